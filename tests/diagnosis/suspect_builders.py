"""Findings, host hardware and captured hosts built by hand for the diagnosis tests.

A plain module with a name no other test folder uses (tests/ is on the path; this folder has no __init__)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fabricase.diagnosis import HostHardware, HostOutcome
from fabricase.models import CaptureItem, Evidence, Finding, HostCapture, HostStatus, Severity, SnapshotInfo

MAJOR, CRITICAL, MINOR, INFO = Severity.MAJOR, Severity.CRITICAL, Severity.MINOR, Severity.INFO


def finding(kind: str, component: str, host: str | None = "gpu001", severity: Severity = MAJOR, *,
            evidence: list[Evidence] | None = None, related: list[str] | None = None,
            confidence: float | None = 0.9, q_value: float | None = None) -> Finding:
    return Finding(kind, severity, host, component, f"{kind} on {component}", evidence or [], confidence, q_value,
                   related or [])


def delta(metric: str, value: float, baseline: float | None = 0, unit: str = "packets") -> Evidence:
    return Evidence(f"{metric}.delta", value, unit, baseline)


def xid(code: int, component: str = "pcie:0000:9b:00", host: str = "gpu001", severity: Severity = CRITICAL) -> Finding:
    return finding("nvidia-xid", component, host, severity, evidence=[Evidence(f"xid_{code}", 1, "events")])


def outcomes(*hosts: str) -> list[HostOutcome]:
    return [HostOutcome(h, "ok") for h in hosts]


def nic_port_hardware(host: str = "gpu001", *, port: str = "mlx5_3/1", netdev: str = "ens4np0",
                      pci: str = "0000:4d:00.0", mac: str = "0c:42:a1:00:00:04",
                      node_guid: str = "0xa088c20300da6303", hw: HostHardware | None = None) -> HostHardware:
    """A host (or one more port of it) whose RDMA port, netdev and PCI function are one NIC port."""
    hw = hw or HostHardware(host)
    hw.ports[port] = {"netdev": netdev, "pci": pci, "mac": mac, "node_guid": node_guid, "firmware": "28.41.1000"}
    hw.netdevs[netdev] = {"rdma": port, "pci": pci, "mac": mac, "driver": "mlx5_core"}
    hw.pci[pci] = ("rdma", port.split("/")[0])
    return hw


def gpu_hardware(hw: HostHardware, index: str = "3", pci: str = "0000:9b:00.0") -> HostHardware:
    hw.gpus[index] = {"pci": pci, "serial": f"165012403000{index}", "uuid": f"GPU-5e1f000{index}-0000", "model": "H100"}
    hw.pci[pci] = ("gpu", index)
    return hw


def write_host(root: Path, host: str, files: dict[tuple[int, str], bytes | str]) -> HostCapture:
    """A captured host in capture format 1: files {(snapshot, source): content}; `cmd:<name>` for commands."""
    host_dir = root / "hosts" / host
    items = []
    for (snapshot, source), content in sorted(files.items()):
        data = content.encode() if isinstance(content, str) else content
        if source.startswith("cmd:"):
            path, kind, rc = f"s{snapshot}/cmd/{source[4:]}", "command", 0
        else:
            path, kind, rc = f"s{snapshot}/fs{source}", "file", None
        (host_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (host_dir / path).write_bytes(data)
        items.append(CaptureItem(source, snapshot, kind, "test", path, len(data), hashlib.sha256(data).hexdigest(),
                                 rc=rc))
    snapshots = [SnapshotInfo(0, 1_700_000_000.0, 100.0, 100.5), SnapshotInfo(1, None, 110.0, None)]
    return HostCapture(host, HostStatus.OK, "fake", items=items, snapshots=snapshots, root=host_dir)
