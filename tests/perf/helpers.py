"""Paths of the perf fixtures, and a HostCapture built from files on disk (capture format 1 layout)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fabricase.models import CaptureItem, HostCapture, HostStatus

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "perf"
DATA = Path(__file__).parent / "data"
SYNTHETIC_NCCL_LOG = DATA / "nccl_debug_2x8_rank11-mlx5_3-errors.synthetic.log"
SYNTHETIC_IPERF3 = DATA / "iperf3_tcp_minimal.synthetic.json"


def real(path: str) -> str:
    return (REAL / path).read_text(encoding="utf-8", errors="replace")


def host_capture(root: Path, host: str, items: dict[str, str]) -> HostCapture:
    """Snapshot-0 items {source: content}; `cmd:<name>` sources are commands, others files."""
    folder = root / "hosts" / host
    captured = []
    for source, content in sorted(items.items()):
        command = source.startswith("cmd:")
        path = f"s0/cmd/{source[4:]}" if command else f"s0/fs{source}"
        data = content.encode()
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
        kind, rc = ("command", 0) if command else ("file", None)
        captured.append(CaptureItem(source, 0, kind, "perf", path, len(data), hashlib.sha256(data).hexdigest(), rc=rc))
    return HostCapture(host, HostStatus.OK, "fake", items=captured, root=folder)
