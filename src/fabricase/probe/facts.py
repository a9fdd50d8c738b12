"""What the probe takes from the capture before it runs anything: each host's RDMA rails (NIC i to NIC i), their
port rates (the expected figure is 90% of it), the RoCE GID index, and the number of GPUs for nccl-tests' -g.

RoCE GID index: the capture reads the first four GIDs of each port; mlx5 lists an IPv4 address's RoCE v1 GID
before its RoCE v2 one, so the last IPv4-mapped GID of the four (`::ffff:a.b.c.d`) is the RoCE v2 entry that
ib_write_bw's `-x` wants. InfiniBand ports need no GID index. An option always wins over the capture.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fabricase.models import HostCapture

__all__ = ["HostFacts", "Rail", "common_rails", "gpu_count", "gpu_model", "host_facts", "roce_gid_index"]

_IPV4_MAPPED = re.compile(r"^0000:0000:0000:0000:0000:ffff:[0-9a-f]{4}:[0-9a-f]{4}$")
_ATTACHED = re.compile(r"<attached_gpus>\s*(\d{1,3})\s*</attached_gpus>")
_PRODUCT = re.compile(r"<product_name>\s*([^<]{1,120}?)\s*</product_name>")


@dataclass(frozen=True)
class Rail:
    device: str
    port: int
    rate_gbps: float | None = None
    link_layer: str | None = None
    gid_index: int | None = None
    state: str | None = None


@dataclass(frozen=True)
class HostFacts:
    host: str
    rails: tuple[Rail, ...] = ()  # active ports first by device name: rail i is the i-th
    gpus: int | None = None
    gpu_model: str | None = None  # nvidia-smi's product name when every GPU has the same one


def roce_gid_index(gids: dict[int, str]) -> int | None:
    """The RoCE v2 IPv4 GID index among the first GIDs of a port (see the module doc), or None."""
    mapped = [n for n, text in sorted(gids.items()) if _IPV4_MAPPED.match(text.strip().lower())]
    return mapped[-1] if mapped else None


def _gids(hc: HostCapture, device: str, port: int) -> dict[int, str]:
    out = {}
    for n in range(4):
        text = hc.text(f"/sys/class/infiniband/{device}/ports/{port}/gids/{n}")
        if text:
            out[n] = text
    return out


def gpu_count(hc: HostCapture) -> int | None:
    """GPUs `nvidia-smi -q -x` counted on the host (attached_gpus), when the nvidia collector ran."""
    text = hc.text("cmd:nvidia-smi-xml")
    found = _ATTACHED.search(text[:65536]) if text else None
    return int(found.group(1)) or None if found else None


def gpu_model(hc: HostCapture) -> str | None:
    """The GPUs' product name (`NVIDIA H100 80GB HBM3`) when they all have one and the same."""
    text = hc.text("cmd:nvidia-smi-xml")
    names = set(_PRODUCT.findall(text[:4 << 20])) if text else set()
    return names.pop() if len(names) == 1 else None


def host_facts(hc: HostCapture) -> HostFacts:
    """The host's rails: one per RDMA device (its first ACTIVE port, else its first port), by device name."""
    from fabricase.analysis.rdma import load_ports

    try:
        ports = [r0 for r0, _ in load_ports(hc)]
    except Exception:  # an unreadable capture item: no rails from the capture (options can still name them)
        ports = []
    rails: list[Rail] = []
    for device in sorted({p.device for p in ports}):
        mine = [p for p in ports if p.device == device]
        pick = next((p for p in mine if (p.state or "").upper() == "ACTIVE"), mine[0])
        gid = roce_gid_index(_gids(hc, device, pick.port)) if (pick.link_layer or "").lower() == "ethernet" else None
        rails.append(Rail(device, pick.port, pick.rate_gbps, pick.link_layer, gid, pick.state))
    return HostFacts(hc.host, tuple(rails), gpu_count(hc), gpu_model(hc))


def common_rails(facts: Iterable[HostFacts]) -> int:
    """How many rails every host has (NIC i to NIC i needs rail i on both sides)."""
    counts = [len(f.rails) for f in facts]
    return min(counts) if counts else 0
