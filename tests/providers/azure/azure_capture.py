"""Captures of Azure ND VMs for the tests: DMI that says Azure, Hyper-V KVP pool 3, RDMA counters."""

from __future__ import annotations

import sys
from pathlib import Path

from fabricase.capturedir import host_capture_from_stream, write_capture_meta, write_host
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus
from fabricase.providers.identity import AZURE_CHASSIS_ASSET_TAG

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))

import fleetgen  # noqa: E402  (its capture-stream writer)

AZURE_DMI = {
    "/sys/class/dmi/id/sys_vendor": "Microsoft Corporation",
    "/sys/class/dmi/id/product_name": "Virtual Machine",
    "/sys/class/dmi/id/chassis_asset_tag": AZURE_CHASSIS_ASSET_TAG,
    "/sys/class/dmi/id/board_vendor": "Microsoft Corporation",
}


def kvp_record(key: str, value: str) -> bytes:
    return key.encode().ljust(512, b"\0") + value.encode().ljust(2048, b"\0")


def _identity_item(source: str, data: bytes) -> bytes:
    return f"@@FC1 I identity file 0 0 {len(data)} 0 - - {source}\n".encode() + data + b"\n"


def write_azure_capture(root: Path, hosts: dict[str, str], flapping: str) -> Path:
    """A capture of Azure ND VMs: hosts maps host -> its physical host name (Hyper-V KVP pool 3, captured at
    /var/lib/hyperv/.kvp_pool_3); DMI says Azure; one RDMA port of `flapping` went down twice."""
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "identity"])), interval_s=fleetgen.INTERVAL_S)
    root.mkdir(parents=True)
    write_capture_meta(root, plan=plan, targets={"nodeset": ",".join(hosts)}, hosts=list(hosts),
                       created_at="2026-11-30T00:00:00Z")
    for host, physical in hosts.items():
        counters = {name: (10, 10) for name in (*fleetgen.COUNTERS, *fleetgen.HW)}
        counters["port_rcv_data"] = counters["port_xmit_data"] = (10**9, 2 * 10**9)
        if host == flapping:
            counters["link_downed"] = (1, 3)
        raw = fleetgen._stream([{"dev": "mlx5_0", "counters": counters, "rate": "400 Gb/sec (4X NDR)"}])
        items = b"".join(_identity_item(src, (text + "\n").encode()) for src, text in
                         {**AZURE_DMI, "/proc/sys/kernel/hostname": host}.items())
        items += _identity_item("/var/lib/hyperv/.kvp_pool_3",
                                kvp_record("HostName", physical) + kvp_record("PhysicalHostName", physical))
        raw = raw.replace(b"@@FC1 END\n", items + b"@@FC1 END\n")
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "test"
        write_host(root, hc, raw)
    return root
