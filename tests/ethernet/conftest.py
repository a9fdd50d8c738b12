"""Run a recorded host tree through the real capture script with this part's collectors, and load it back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fabricase import collectors
from fabricase.collectors.ethtool import EthtoolCollector
from fabricase.collectors.fabric_config import FabricConfigCollector
from fabricase.collectors.pcie import PcieCollector
from fabricase.models import HostCapture
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from hosttrees import read_as_if_apart

FIXTURES = Path(__file__).parents[1] / "fixtures" / "real"


@pytest.fixture
def capture_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., HostCapture]:
    """capture_tree(root, *collector names) -> the loaded HostCapture of localhost.

    The collectors are added to the registry for the test (harmless once the lead registers them), and FC_ROOT
    points the commands' /sys loops at the tree (the capture script exports it from --root once plan.py does).
    """
    for col in (EthtoolCollector, PcieCollector, FabricConfigCollector):
        monkeypatch.setitem(collectors.COLLECTORS, col.name, col)

    runs = iter(range(1_000_000))

    def run(root: Path, *names: str) -> HostCapture:
        monkeypatch.setenv("FC_ROOT", str(root))
        opts = CollectOptions(interval_s=0.1, root=str(root), collectors=names)
        out = tmp_path / f"capture{next(runs)}"
        return read_as_if_apart(collect(Targets(hosts=("localhost",), nodeset="localhost"), opts, out).hosts[0])

    return run
