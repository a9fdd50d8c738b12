from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.conftest import home, host_tree, run  # noqa: F401  (the CLI tests' fixtures: FABRICASE_HOME, a host tree)

REPO = Path(__file__).parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import fleetgen  # noqa: E402  (synthetic fleets written as real capture directories)

HOSTS = [f"gpu{i:04d}" for i in range(1, 33)]  # two leaf switches of 16


def promtool() -> str:
    """Debian's promtool; skipped without it, a failure under CI=true (.ci/run installs prometheus)."""
    found = shutil.which("promtool")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but promtool is missing: .ci/run must install Debian's prometheus", pytrace=False)
    pytest.skip("promtool is not installed (apt-get install prometheus)")


def run_promtool(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="session")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, set[str]]]:
    """Harness captures of 32 hosts, one per fault kind: kind -> (capture directory, the faulty components)."""
    root = tmp_path_factory.mktemp("fleets")
    out = {}
    for kind in ("pfc-storm", "symbol-errors", "xid-79", "nvlink-replay", "speed-downshift"):
        scenario = fleetgen.Scenario(kind, kind, HOSTS)
        fleetgen.build(scenario, root / kind, seed=1)
        out[kind] = (root / kind, scenario.truth)
    return out
