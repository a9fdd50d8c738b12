from __future__ import annotations

from pathlib import Path

import pytest

from fabricase.collectors import COLLECTORS
from fabricase.collectors.rdma import RdmaCollector
from fabricase.models import HostCapture
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from hosttrees import read_as_if_apart


@pytest.fixture
def capture_rdma(tmp_path: Path, monkeypatch):
    """Run a host tree through the real capture script (rdma collector only) and load it back."""
    monkeypatch.setitem(COLLECTORS, "rdma", RdmaCollector)
    counter = iter(range(1000))

    def run(root: Path, interval_s: float = 0) -> HostCapture:
        out = tmp_path / f"capture{next(counter)}"
        opts = CollectOptions(interval_s=interval_s, root=str(root), collectors=("rdma",))
        return read_as_if_apart(collect(Targets(hosts=("localhost",)), opts, out).hosts[0])

    return run
