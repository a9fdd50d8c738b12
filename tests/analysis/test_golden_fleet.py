"""Golden tests: the findings, the diagnosis, the host notes and the heat map's samples of fleet scenarios stay
byte-identical to what the analysis produced before it was made fast (issue 18: "the findings and suspects stay
byte-identical to today's on the same capture").

Each scenario's capture is regenerated in tmp_path from benchmarks/fleetgen.py and its seed, analyzed as
`fabricase analyze DIR --inventory DIR/inventory.json --json` does (diagnose_capture with the inventory's
topology), and compared with tests/fixtures/golden-fleet/<name>.json.gz. Together the scenarios exercise rdma,
netdev/ethernet (RoCE pause, PFC storm), nvlink/gpu, pcie and kernel (Xid), topology (a bad or minority leaf
switch, rack power), counter resets and reboots, configuration drift's inputs, small fleets and fleet-sized ones.

The fixtures were written by the code before the change; regenerate them only when a change of the findings is
meant (then say so in the change):

    python tests/analysis/test_golden_fleet.py --write
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fleetgen  # noqa: E402

from fabricase.analysis import HostAnalysisError, findings_to_json  # noqa: E402
from fabricase.analysis.pool import MIN_POOL_HOSTS, WORKERS_ENV, map_hosts, pool_workers  # noqa: E402
from fabricase.analysis.rates import note_host  # noqa: E402
from fabricase.capturedir import load_capture  # noqa: E402
from fabricase.cli.screen import diagnosis_json  # noqa: E402
from fabricase.models import HostCapture, HostStatus  # noqa: E402
from fabricase.pipeline import diagnose_capture  # noqa: E402
from fabricase.placements import inventory_placements, topology_of  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "golden-fleet"
SEED = 1


@dataclass(frozen=True)
class Case:
    """One golden scenario: a fleetgen kind (None: clean; "fleet16": build_fleet16) over `hosts` hosts."""

    name: str
    kind: str | None
    hosts: int
    ib_only: bool = False


CASES = (
    Case("fleet16", "fleet16", 16),  # eight faults of every host-level kind on one leaf
    Case("pfc-storm-64", "pfc-storm", 64),
    Case("bad-switch-64", "bad-switch", 64),
    Case("minority-switch-64", "minority-switch-6-x2", 64),
    Case("speed-downshift-64", "speed-downshift", 64),
    Case("reboot-32", "reboot", 32),
    Case("counter-reset-32", "counter-reset", 32),
    Case("xid-74-16", "xid-74", 16),
    Case("nvlink-replay-16", "nvlink-replay", 16),
    Case("link-flap-ib-256", "link-flap", 256, ib_only=True),
)


def _build(case: Case, root: Path) -> list[str]:
    hosts = [f"gpu{i:04d}" for i in range(1, case.hosts + 1)]
    if case.kind == "fleet16":
        fleetgen.build_fleet16(root, seed=SEED)
    else:
        fleetgen.build(fleetgen.Scenario(case.name, case.kind, hosts), root, seed=SEED, ib_only=case.ib_only)
    return hosts


def _sample_digest(samples: dict) -> str:
    """sha256 of every sample the heat map receives (samples_out), host by host in the analysis's order."""
    h = hashlib.sha256()
    for host, rows in samples.items():
        h.update(f"{host}\n".encode())
        for s in rows:
            h.update((json.dumps(dataclasses.astuple(s), allow_nan=True) + "\n").encode())
    return h.hexdigest()


def golden_of(case: Case, root: Path) -> dict:
    """What the golden file holds for a scenario whose capture is at `root`: the analysis as the CLI emits it."""
    hosts = _build(case, root)
    capture = load_capture(root, verify=False)
    placed = inventory_placements(root / "inventory.json", hosts)
    result = diagnose_capture(capture, topology_of(placed), placed)
    diagnosis = json.dumps(diagnosis_json(result.diagnosis), indent=2, sort_keys=True, default=str,
                           ensure_ascii=True)
    return {
        "findings": findings_to_json(result.findings),
        "diagnosis": diagnosis,
        "hosts": [[hc.host, str(hc.status), hc.reason] for hc in capture.hosts],
        "samples_sha256": _sample_digest(result.samples),
        "samples_count": sum(len(v) for v in result.samples.values()),
    }


def _path(case: Case) -> Path:
    return FIXTURES / f"{case.name}.json.gz"


def _write(doc: dict, path: Path) -> None:
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    path.write_bytes(gzip.compress(data, mtime=0))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_fleet(case: Case, tmp_path: Path) -> None:
    expected = json.loads(gzip.decompress(_path(case).read_bytes()))
    got = golden_of(case, tmp_path / "capture")
    assert got["hosts"] == expected["hosts"]
    assert got["findings"] == expected["findings"]
    assert got["diagnosis"] == expected["diagnosis"]
    assert (got["samples_count"], got["samples_sha256"]) == (expected["samples_count"], expected["samples_sha256"])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_golden_serial_and_pool(workers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bytes whether the hosts are analyzed one by one or in a pool of processes (analysis.pool)."""
    monkeypatch.setenv(WORKERS_ENV, workers)
    case = next(c for c in CASES if c.name == "bad-switch-64")
    expected = json.loads(gzip.decompress(_path(case).read_bytes()))
    got = golden_of(case, tmp_path / "capture")
    assert (got["findings"], got["diagnosis"], got["hosts"]) == (expected["findings"], expected["diagnosis"],
                                                                 expected["hosts"])
    assert got["samples_sha256"] == expected["samples_sha256"]


def _pool_work(hc: HostCapture) -> str:
    """A stand-in for a host's analysis: fails on every 7th host, notes a reset on every 5th."""
    n = int(hc.host.removeprefix("h"))
    if n % 7 == 0:
        raise HostAnalysisError(hc.host, "rdma samples", f"rdma samples: ValueError: bad counter on {hc.host}")
    if n % 5 == 0:
        note_host(hc, f"counters reset between snapshots: rates unknown (h{n})")
    return f"{hc.host}:{os.getpid()}"


def test_pool_carries_failures_and_host_notes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a pool the children's changes to a host (status, reason) and the caught errors reach the parent as they
    would serially, in host order."""
    if threading.active_count() > 1:
        # Another test's servers run threads in this process, and the pool never forks beside threads: run this
        # test alone, in a fresh pytest process, where it does.
        import subprocess

        alone = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                f"{__file__}::test_pool_carries_failures_and_host_notes_back"],
                               capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
        assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-2000:]
        return
    hosts = [HostCapture(f"h{i}", HostStatus.OK, "harness") for i in range(MIN_POOL_HOSTS + 6)]
    serial = [HostCapture(f"h{i}", HostStatus.OK, "harness") for i in range(MIN_POOL_HOSTS + 6)]
    monkeypatch.setenv(WORKERS_ENV, "2")
    assert pool_workers(len(hosts)) == 2
    pooled = map_hosts(hosts, _pool_work, catch=(HostAnalysisError,))
    monkeypatch.setenv(WORKERS_ENV, "1")
    alone = map_hosts(serial, _pool_work, catch=(HostAnalysisError,))
    assert {o.value.split(":")[1] for o in pooled if o.value} != {str(os.getpid())}  # ran in other processes
    for hc, hs, p, a in zip(hosts, serial, pooled, alone, strict=True):
        assert (hc.status, hc.reason) == (hs.status, hs.reason)
        assert (p.value is None) == (a.value is None)
        if a.error is not None:
            assert isinstance(p.error, HostAnalysisError)
            assert (p.error.host, p.error.stage, p.error.reason) == (a.error.host, a.error.stage, a.error.reason)
    assert hosts[5].status == HostStatus.PARTIAL and hosts[7].status == HostStatus.OK  # analyze() marks failures
    assert sum(o.error is not None for o in pooled) == len(range(0, len(hosts), 7))


def test_golden_cases_are_not_trivial() -> None:
    """The scenarios must keep exercising the domains they are here for: every one of these finding kinds and
    component families appears in at least one golden file."""
    kinds, families = set(), set()
    for case in CASES:
        doc = json.loads(gzip.decompress(_path(case).read_bytes()))
        for f in json.loads(doc["findings"]):
            kinds.add(f["kind"])
            families.add(f["component"].split(":", 1)[0])
    assert {"nvidia-xid", "nvlink-errors", "pfc-storm", "rdma-symbol-errors", "rdma-link-flap", "fleet-outlier",
            "shared-component-fault", "rdma-speed-downshift", "congestion-outlier"} <= kinds
    assert {"rdma", "netdev", "nvlink", "pcie", "switch"} <= families


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    FIXTURES.mkdir(parents=True, exist_ok=True)
    for c in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            _write(golden_of(c, Path(tmp) / "capture"), _path(c))
