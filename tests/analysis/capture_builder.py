"""Build HostCapture/Capture objects backed by real files in tmp_path, laid out as capture format 1.

A plain module, not a conftest, so that its name cannot collide with other test folders' conftest modules."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fabricase.models import Capture, CaptureItem, HostCapture, HostStatus, SnapshotInfo


def write_host(
    root: Path,
    host: str,
    files: dict[tuple[int, str], str],
    *,
    status: HostStatus = HostStatus.OK,
    reason: str | None = None,
    interval_s: float | None = 10.0,
) -> HostCapture:
    """files: {(snapshot, source): content}; source is an absolute path or `cmd:<name>`."""
    host_dir = root / "hosts" / host
    host_dir.mkdir(parents=True, exist_ok=True)
    items = []
    for (snapshot, source), content in sorted(files.items()):
        if source.startswith("cmd:"):
            path, kind, rc = f"s{snapshot}/cmd/{source[4:]}", "command", 0
        else:
            path, kind, rc = f"s{snapshot}/fs{source}", "file", None
        data = content.encode()
        (host_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (host_dir / path).write_bytes(data)
        items.append(
            CaptureItem(source, snapshot, kind, "test", path, len(data), hashlib.sha256(data).hexdigest(), rc=rc)
        )
    snapshots = []
    if interval_s is not None and files:
        snapshots = [SnapshotInfo(0, 1_700_000_000.0, 100.0, 100.5), SnapshotInfo(1, None, 100.0 + interval_s, None)]
    return HostCapture(host, status, "fake", reason=reason, items=items, snapshots=snapshots, root=host_dir)


def sysfs_net(interface: str, s0: dict[str, str], s1: dict[str, str] | None = None) -> dict[tuple[int, str], str]:
    """Files of one interface: attr (e.g. "statistics/rx_errors", "operstate") -> content, per snapshot."""
    base = f"/sys/class/net/{interface}/"
    files = {(0, base + attr): value for attr, value in s0.items()}
    files.update({(1, base + attr): value for attr, value in (s1 or {}).items()})
    return files


def make_capture(root: Path, hosts: list[HostCapture]) -> Capture:
    return Capture(root, 1, "2026-11-29T23:00:00Z", "0.1.0", 10.0, {"net": 1}, {"hosts": "test"}, hosts)


HEALTHY_COUNTERS = {
    "statistics/rx_bytes": "1000000\n",
    "statistics/rx_packets": "5000\n",
    "statistics/rx_errors": "0\n",
    "statistics/rx_crc_errors": "0\n",
    "statistics/rx_frame_errors": "0\n",
    "statistics/rx_dropped": "0\n",
    "statistics/tx_errors": "0\n",
    "carrier_changes": "2\n",
    "operstate": "up\n",
    "carrier": "1\n",
    "speed": "100000\n",
}


def healthy_eth0() -> dict[tuple[int, str], str]:
    s1 = dict(HEALTHY_COUNTERS, **{"statistics/rx_bytes": "2000000\n", "statistics/rx_packets": "9000\n"})
    return sysfs_net("eth0", dict(HEALTHY_COUNTERS, mtu="9000\n"), s1)


def degraded_eth2() -> dict[tuple[int, str], str]:
    s1 = dict(
        HEALTHY_COUNTERS,
        **{"statistics/rx_crc_errors": "57\n", "statistics/rx_errors": "57\n", "carrier_changes": "6\n"},
    )
    return sysfs_net("eth2", dict(HEALTHY_COUNTERS, mtu="9000\n"), s1)
