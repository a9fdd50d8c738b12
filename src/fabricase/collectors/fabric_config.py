"""RoCE fabric configuration for drift analysis: PFC priorities and trust mode (mlnx_qos, dcb, dcbtool), ECN
enable per priority, RoCE GID types, and driver module versions. MTU, kernel and firmware come from the netdev,
identity and ethtool collectors."""

from fabricase.collectors.base import Collector, CommandSpec, FileSpec
from fabricase.collectors.ethtool import each_port

__all__ = ["MODULES", "FabricConfigCollector"]

# Out-of-tree builds (MLNX_OFED, vendor packages, the NVIDIA driver) have a version file; in-tree ones do not.
MODULES = ("mlx5_core", "mlx5_ib", "efa", "bnxt_en", "bnxt_re", "ice", "irdma", "nvidia")
_GID = "/sys/class/infiniband/*/ports/*/gid_attrs"


def _unless(*tools: str) -> str:
    return "".join(f"command -v {t} >/dev/null 2>&1 && exit 0; " for t in tools)


class FabricConfigCollector(Collector):
    name = "fabric_config"
    version = 1
    description = "PFC/trust (mlnx_qos, dcb, dcbtool), ECN per priority, RoCE GID types, driver module versions"
    requires_any = ("/sys/class/net",)
    files = (
        FileSpec("/sys/class/net/*/ecn/roce_np/enable/*", cap=64),
        FileSpec("/sys/class/net/*/ecn/roce_rp/enable/*", cap=64),
        # RoCE v1/v2 per GID. The table has 128-256 entries; the first four (link-local and first address, each
        # in v1 and v2) are read, the same ones whose ndevs and gids the rdma collector reads.
        FileSpec(f"{_GID}/types/[0-3]", cap=64),
        *(FileSpec(f"/sys/module/{module}/version", cap=256) for module in MODULES),
    )
    # One source of PFC truth per host, in order of detail: dcb runs only without mlnx_qos, dcbtool only
    # without either (three tools per port on every host cost more CPU than the whole sysfs read).
    commands = (
        CommandSpec("mlnx-qos", each_port("mlnx_qos", 'mlnx_qos -i "$i"'), timeout_s=60, cap=512 << 10),
        CommandSpec("dcb", _unless("mlnx_qos") + each_port(
            "dcb", 'dcb pfc show dev "$i"; dcb apptrust show dev "$i"', keep_status=False),
                    timeout_s=20, cap=128 << 10),
        CommandSpec("dcbtool", _unless("mlnx_qos", "dcb") + each_port("dcbtool", 'dcbtool gc "$i" pfc',
                                                                       keep_status=False),
                    timeout_s=20, cap=128 << 10),
    )
