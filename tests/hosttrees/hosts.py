"""Whole golden hosts, composed from the domain builders: what a fabric engineer meets in the field.

- `hgx_mlx5_host`: an 8-GPU HGX H100 with 8 ConnectX-7 RoCE NICs (mlx5_i <-> eth_i), PCIe, PFC/ECN config.
- `efa_host`: an EC2-style host with 4 EFA devices.
- `bnxt_host`: a Broadcom RoCE host with 2 bnxt_re devices and bnxt_en netdevs.
Every host records its own kernel log, so no golden test reads this machine's.
"""

from __future__ import annotations

from pathlib import Path

from hosttrees import record_command, write_file
from hosttrees.ethernet import add_fabric_config, add_pcie_devices, add_roce_netdevs
from hosttrees.nvidia import add_hgx_gpus, journalctl_args
from hosttrees.rdma import add_bnxt_re_devices, add_efa_devices, add_mlx5_devices

__all__ = ["DEGRADED", "bnxt_host", "efa_host", "hgx_mlx5_host"]

# The degraded HGX host: one bad RoCE port (mlx5_3 = eth3), one PCIe link trained at x8 (NIC of eth5), and the GPU
# faults of hosttrees.nvidia (GPU 3 link 5 inactive, GPU 2 link 1 replays, GPU 4 fabric in progress, GPU 6 Xid 79).
DEGRADED = {
    "rdma": {"mlx5_3": {"symbol_error": 40, "link_downed": 2}},
    "netdev": "eth3",
    "pcie": "0000:9c:00.0",
}


_REAL = Path(__file__).parents[1] / "fixtures" / "real" / "local-vm_procfs-sysfs-net"


def _identity(root: Path, name: str, vendor: str, product: str, asset: str = "") -> None:
    # Protocol counters and OS identity from a real Linux host (tests/fixtures/real/local-vm_procfs-sysfs-net).
    for rel in ("proc/net/snmp", "proc/net/netstat", "proc/net/dev", "etc/os-release"):
        write_file(root, "/" + rel, (_REAL / rel).read_bytes())
    write_file(root, "/proc/sys/kernel/hostname", name + "\n")
    write_file(root, "/sys/class/dmi/id/sys_vendor", vendor + "\n")
    write_file(root, "/sys/class/dmi/id/product_name", product + "\n")
    if asset:
        write_file(root, "/sys/class/dmi/id/board_asset_tag", asset + "\n")


def _quiet_kernel_log(root: Path) -> None:
    record_command(root, "journalctl", journalctl_args(),
                   "2026-11-29T22:00:00.000001+0000 host kernel: Linux version 6.8.0-45-generic\n")


def hgx_mlx5_host(root: Path, *, degraded: bool = False, ports: int = 1) -> Path:
    """An 8-GPU, 8-NIC mlx5 RoCE host; `degraded` injects the faults in DEGRADED and the GPU ones."""
    _identity(root, "gpu001", "Amazon EC2", "p5.48xlarge", "i-0fab00000000c0de1")
    add_mlx5_devices(root, n=8, ports=ports, link_layer="Ethernet",
                     degraded=DEGRADED["rdma"] if degraded else None)
    add_roce_netdevs(root, n=8, degraded=DEGRADED["netdev"] if degraded else None)
    add_pcie_devices(root, nics=8, gpus=8, downgraded_bdf=DEGRADED["pcie"] if degraded else None)
    add_fabric_config(root, n=8)
    add_hgx_gpus(root, n=8, degraded=True if degraded else None)
    return root


def efa_host(root: Path, *, degraded: dict | None = None) -> Path:
    _identity(root, "efa001", "Amazon EC2", "p4d.24xlarge", "i-0fab00000000efa01")
    add_efa_devices(root, n=4, degraded=degraded)
    _quiet_kernel_log(root)
    return root


def bnxt_host(root: Path, *, degraded: dict | None = None) -> Path:
    _identity(root, "bnxt001", "Dell Inc.", "PowerEdge XE9680")
    add_bnxt_re_devices(root, n=2, degraded=degraded)
    add_roce_netdevs(root, n=2, driver="bnxt_en")
    _quiet_kernel_log(root)
    return root
