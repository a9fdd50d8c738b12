from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    """A tiny host tree: two interfaces with counters, a binary file, an empty file."""
    root = tmp_path / "root"
    for ifname, crc in (("eth0", "0"), ("eth1", "57")):
        stats = root / "sys/class/net" / ifname / "statistics"
        stats.mkdir(parents=True)
        (stats / "rx_bytes").write_text("123456789\n")
        (stats / "rx_crc_errors").write_text(crc + "\n")
        (root / "sys/class/net" / ifname / "operstate").write_text("up\n")
        (root / "sys/class/net" / ifname / "mtu").write_text("9000\n")
    (root / "bin").mkdir()
    (root / "bin/blob").write_bytes(bytes(range(256)) * 4)
    (root / "proc/net").mkdir(parents=True)
    (root / "proc/net/empty").write_bytes(b"")
    return root
