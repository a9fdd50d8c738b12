"""collect analyzes each host in the recording worker as soon as it is written (CollectOptions.analyze_hosts), so
that the analysis runs while the fan-out waits for slower hosts; diagnose_capture then takes those results. They
must be exactly what the diagnosis of the same directory, loaded afresh, computes: findings, diagnosis,
hardware and host statuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricase import analysis as analysis_module
from fabricase.analysis import findings_to_json
from fabricase.capturedir import load_capture
from fabricase.cli.screen import diagnosis_json
from fabricase.collectors import select_collectors
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.pipeline import CollectOptions, collect, diagnose_capture
from fabricase.targets import Targets
from fabricase.transports.fake import FakeTransport
from fabricase.transports.local import LocalTransport
from hosttrees.hosts import hgx_mlx5_host


@pytest.fixture(scope="module")
def degraded_stream(tmp_path_factory) -> bytes:
    root = hgx_mlx5_host(tmp_path_factory.mktemp("hgx") / "root", degraded=True)
    plan = CapturePlan(collectors=tuple(select_collectors()), interval_s=0, root=str(root))
    return LocalTransport().run_one("localhost", compile_script(plan), timeout_s=60).stdout


def _analyzed_in_parent(monkeypatch) -> list[int]:
    sizes: list[int] = []
    real = analysis_module.map_hosts

    def counting(hosts, *a, **kw):
        sizes.append(len(hosts))
        return real(hosts, *a, **kw)

    monkeypatch.setattr(analysis_module, "map_hosts", counting)
    return sizes


def test_hosts_analyzed_while_recorded_give_the_diagnosis_of_the_directory(tmp_path: Path, degraded_stream,
                                                                            monkeypatch):
    hosts = [f"gpu{i:02d}" for i in range(1, 21)]  # past _Recorder.PARALLEL_FROM: recorded in worker processes
    garbled = {"gpu07"}
    fake = FakeTransport(lambda h: b"@@FC1 garbage\n\xff" if h in garbled else bytes(degraded_stream),
                         latency_s=(0.0, 0.05), hang_fraction=0.1, seed=3)
    hung = {h for h in hosts if fake.hangs(h)}
    assert hung and not hung & garbled
    capture = collect(Targets(hosts=tuple(hosts)), CollectOptions(interval_s=0, timeout_s=2, analyze_hosts=True),
                      tmp_path / "cap", transport=fake)
    assert set(capture.analyzed) == set(hosts)  # every host, the hung and the garbled ones too
    fresh = load_capture(tmp_path / "cap", verify=False)
    sizes = _analyzed_in_parent(monkeypatch)
    early, late = diagnose_capture(capture), diagnose_capture(fresh)
    assert sizes == [0, len(hosts)]  # the first diagnosis analyzed no host itself; the fresh one all of them
    assert findings_to_json(early.findings) == findings_to_json(late.findings)
    assert diagnosis_json(early.diagnosis) == diagnosis_json(late.diagnosis)
    assert early.hardware == late.hardware and early.samples == late.samples
    assert [(h.host, h.status, h.reason) for h in capture.hosts] == [(h.host, h.status, h.reason) for h in fresh.hosts]
    assert {f.host for f in early.findings if f.host} >= set(hosts) - hung - garbled
    # Taken once: a second diagnosis of the same capture analyzes afresh, to the same result.
    again = diagnose_capture(capture)
    assert sizes[-1] == len(hosts) and findings_to_json(again.findings) == findings_to_json(early.findings)


def test_without_analyze_hosts_the_workers_only_record(tmp_path: Path, degraded_stream):
    hosts = [f"gpu{i:02d}" for i in range(1, 18)]
    fake = FakeTransport(lambda h: bytes(degraded_stream), latency_s=(0.0, 0.01))
    capture = collect(Targets(hosts=tuple(hosts)), CollectOptions(interval_s=0, timeout_s=5), tmp_path / "cap",
                      transport=fake)
    assert capture.analyzed == {} and capture.analyzed_with is None


def test_a_worker_whose_analysis_fails_still_records_and_leaves_the_host_to_the_diagnosis(tmp_path: Path,
                                                                                         degraded_stream,
                                                                                         monkeypatch):
    import fabricase.analysis
    from fabricase import capture_write
    from fabricase.capture_write import prepare_capture_dir, write_capture_meta
    from fabricase.models import HostStatus
    from fabricase.pipeline import _record_and_analyze
    from fabricase.transports.base import HostRun

    plan = CapturePlan(collectors=tuple(select_collectors()), interval_s=0)
    root = prepare_capture_dir(tmp_path / "cap")
    version = capture_write.WRITTEN_VERSION
    write_capture_meta(root, plan=plan, targets={}, hosts=["gpu01"], created_at="2026-12-02T00:00:00Z",
                       version=version)
    run = HostRun("gpu01", HostStatus.OK, stdout=bytes(degraded_stream), rc=0)
    assert _record_and_analyze(root, run, plan, "fake", version, True) is not None

    def broken(*a, **kw):
        raise RuntimeError("a bug in the analysis")

    monkeypatch.setattr(fabricase.analysis, "prepare_host", broken)
    run = HostRun("gpu01", HostStatus.OK, stdout=bytes(degraded_stream), rc=0)
    (tmp_path / "cap2").mkdir()
    root2 = prepare_capture_dir(tmp_path / "cap2")
    write_capture_meta(root2, plan=plan, targets={}, hosts=["gpu01"], created_at="2026-12-02T00:00:00Z",
                       version=version)
    assert _record_and_analyze(root2, run, plan, "fake", version, True) is None
    assert load_capture(root2, verify=True).hosts[0].items  # recorded all the same


def test_the_fan_out_and_the_diagnosis_collect_garbage_less_often(tmp_path: Path, degraded_stream, monkeypatch):
    """The workers' outcomes pile up in this process while the fan-out runs (about a thousand samples a host):
    at the default young threshold of 700 the collector re-walked them hundreds of times (bench_fleet's 1,024
    hosts: 1.4 s of the capture process's 5.7 s of CPU); the thresholds are restored after."""
    import gc

    from fabricase.analysis.pool import _YOUNG_THRESHOLD

    seen: list[int] = []
    before = gc.get_threshold()
    fake = FakeTransport(lambda h: bytes(degraded_stream), latency_s=(0.0, 0.01))
    capture = collect(Targets(hosts=("gpu01", "gpu02")), CollectOptions(interval_s=0, timeout_s=5), tmp_path / "cap",
                      transport=fake, on_host=lambda run: seen.append(gc.get_threshold()[0]))
    assert seen == [_YOUNG_THRESHOLD] * 2 and gc.get_threshold() == before
    real = analysis_module.analyze

    def watched(*a, **kw):
        seen.append(gc.get_threshold()[0])
        return real(*a, **kw)

    monkeypatch.setattr(analysis_module, "analyze", watched)
    diagnose_capture(capture)
    assert seen[-1] == _YOUNG_THRESHOLD and gc.get_threshold() == before


_WARM = """
import sys, threading
from pathlib import Path
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from fabricase.transports.fake import FakeTransport
stream = Path(sys.argv[1]).read_bytes()
hosts = tuple(f"gpu{i:02d}" for i in range(1, 21))
assert "scipy.special" not in sys.modules
collect(Targets(hosts=hosts), CollectOptions(interval_s=0, timeout_s=5, analyze_hosts=%s), Path(sys.argv[2]),
        transport=FakeTransport(lambda h: stream, latency_s=(0.0, 0.01)), load=False)
print("scipy.special" in sys.modules, threading.active_count())
"""


@pytest.mark.parametrize("analyze", [True, False])
def test_the_fleet_steps_imports_are_paid_while_the_hosts_are_captured(tmp_path: Path, degraded_stream, analyze):
    """scipy.special and the fleet-wide modules took 0.2 s after the last host (bench_fleet's serial tail);
    collect imports them in a thread of its own while the fan-out waits, when an analysis follows, and the
    thread is gone before it returns (the analysis pool forks only without other threads)."""
    import subprocess
    import sys

    (tmp_path / "stream").write_bytes(degraded_stream)
    out = subprocess.run([sys.executable, "-c", _WARM % analyze, str(tmp_path / "stream"), str(tmp_path / "cap")],
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out == [str(analyze), "1"]


def test_the_workers_outcomes_wait_in_the_collectors_permanent_generation(tmp_path: Path, degraded_stream,
                                                                          monkeypatch):
    """Each host's outcome (about 2,500 objects) was walked by every young collection of this process until the
    fleet step: frozen as it arrives (bench_fleet's 1,024 hosts: the capture process's GC 0.8 -> 0.08 s), and
    unfrozen when the capture ends, so that nothing stays out of the collector's reach."""
    import gc

    calls: list[int] = []
    real = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (calls.append(1), real())[1])
    hosts = tuple(f"gpu{i:02d}" for i in range(1, 21))
    fake = FakeTransport(lambda h: bytes(degraded_stream), latency_s=(0.0, 0.01))
    capture = collect(Targets(hosts=hosts), CollectOptions(interval_s=0, timeout_s=5, analyze_hosts=True),
                      tmp_path / "cap", transport=fake)
    assert len(calls) == len(hosts) and set(capture.analyzed) == set(hosts)
    assert gc.get_freeze_count() == 0


def test_the_outcomes_that_arrive_share_their_names(tmp_path: Path, degraded_stream):
    """Each worker's outcome arrives through a pipe with its own copies of every component, metric, unit and source
    name (70 KiB an HGX host; bench_fleet's 10,000 hosts read 4.6 GiB, over the 4 GiB target): interned here."""
    hosts = tuple(f"gpu{i:02d}" for i in range(1, 21))
    fake = FakeTransport(lambda h: bytes(degraded_stream), latency_s=(0.0, 0.01))
    capture = collect(Targets(hosts=hosts), CollectOptions(interval_s=0, timeout_s=5, analyze_hosts=True),
                      tmp_path / "cap", transport=fake)
    first, second = (capture.analyzed[h].value.samples for h in ("gpu01", "gpu20"))
    assert len(first) == len(second) > 100
    for a, b in zip(first, second, strict=True):
        assert a.component is b.component and a.metric is b.metric and a.unit is b.unit and a.source is b.source
