"""RDMA devices (mlx5, mlx4, EFA, bnxt_re, irdma, ...): port state, rate and every counter from
/sys/class/infiniband, plus `rdma statistic show`, `rdma link`, `ibstat` and `ibv_devinfo -v` where installed."""

from fabricase.collectors.base import Collector, CommandSpec, FileSpec

_IB = "/sys/class/infiniband/*"
_PORT = f"{_IB}/ports/*"


def _when(tool: str, command: str) -> str:
    # Absent tool: rc 0 and no output, which the parsers read as "not installed".
    return f"command -v {tool} >/dev/null 2>&1 || exit 0; {command}"


class RdmaCollector(Collector):
    name = "rdma"
    version = 1
    description = "RDMA ports: state, phys_state, rate, counters and hw_counters; rdma/ibstat/ibv_devinfo outputs"
    requires_any = ("/sys/class/infiniband",)
    files = (
        # Counters (one number each). Some hw_counters return EIO on some kernels: recorded rc=1, empty.
        FileSpec(f"{_PORT}/counters/*", counter=True, cap=128),
        FileSpec(f"{_PORT}/counters_ext/*", counter=True, cap=128),
        FileSpec(f"{_PORT}/hw_counters/*", counter=True, cap=128),
        FileSpec(f"{_IB}/hw_counters/*", counter=True, cap=128),
        # Read twice so that a port going down or retraining to a lower rate during the interval shows.
        *(FileSpec(f"{_PORT}/{attr}", counter=True, cap=256) for attr in ("state", "phys_state", "rate")),
        FileSpec(f"{_PORT}/link_layer", cap=256),
        # RDMA-to-netdev mapping: the first four GIDs only (tables hold 128-256 entries).
        FileSpec(f"{_PORT}/gid_attrs/ndevs/[0-3]", cap=256),
        FileSpec(f"{_PORT}/gids/[0-3]", cap=256),
        *(
            FileSpec(f"{_IB}/{attr}", cap=1024)
            for attr in ("node_type", "fw_ver", "hca_type", "board_id", "node_guid", "sys_image_guid")
        ),
        # `device` links to the PCI function: its driver and address tie the port to PCIe and netdev findings.
        *(FileSpec(f"{_IB}/device/{attr}", cap=4096) for attr in ("vendor", "device", "uevent")),
    )
    commands = (
        CommandSpec("rdma-statistic", _when("rdma", "rdma statistic show"), timeout_s=10, cap=512 * 1024,
                    counter=True),
        CommandSpec("rdma-link", _when("rdma", "rdma link"), timeout_s=10, cap=128 * 1024),
        CommandSpec("ibstat", _when("ibstat", "ibstat"), timeout_s=15, cap=256 * 1024),
        CommandSpec("ibv-devinfo", _when("ibv_devinfo", "ibv_devinfo -v"), timeout_s=20, cap=1024 * 1024),
    )
