"""collect's recorder hands each stream to a recording worker as the file it is stored in, not through a pipe:
streams waiting for a busy worker then hold no memory in the fan-out's process, and the fan-out never waits for
the workers, so a host that hangs starts (and times out) as soon as the fan-out reaches it. bench_fleet's 1,024
hosts: 23.0 s -> 18.3 s, the capture process's peak RSS 672 -> 603 MiB."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from fabricase import capture_write, pipeline
from fabricase.capturedir import load_capture
from fabricase.collectors import select_collectors
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus
from fabricase.transports.base import HostRun

PLAN = CapturePlan(collectors=tuple(select_collectors()), interval_s=0)
STREAM = b"not a capture stream at all \xff\n" * 64  # recorded all the same: a failed host, its bytes kept


class BusyPool:
    """A pool whose workers never finish on their own: what submit was given, and futures the test completes."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.futures: list[Future] = []

    def submit(self, fn, *args):
        self.calls.append(args)
        future: Future = Future()
        self.futures.append(future)
        return future

    def finish(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_result(None)

    def shutdown(self, cancel_futures: bool = False) -> None:
        self.finish()


def _recorder(root: Path, pool: BusyPool) -> pipeline._Recorder:
    recorder = pipeline._Recorder(root, PLAN, "fake", 1, capture_write.WRITTEN_VERSION)  # one host: no real pool
    recorder.pool = pool  # type: ignore[assignment]
    return recorder


def _root(tmp_path: Path, hosts: list[str]) -> Path:
    root = capture_write.prepare_capture_dir(tmp_path / "cap")
    capture_write.write_capture_meta(root, plan=PLAN, targets={}, hosts=hosts, created_at="2026-12-04T00:00:00Z",
                                     version=capture_write.WRITTEN_VERSION)
    return root


def test_the_fan_out_does_not_wait_for_busy_workers(tmp_path: Path, monkeypatch):
    hosts = [f"gpu{i:02d}" for i in range(8)]
    root = _root(tmp_path, hosts)
    monkeypatch.setattr(pipeline._Recorder, "IN_FLIGHT_BYTES", len(STREAM))  # one stream's bytes in a pipe at most
    pool = BusyPool()
    recorder = _recorder(root, pool)
    fan_out = threading.Thread(target=lambda: [recorder.record(HostRun(h, HostStatus.OK, stdout=bytes(STREAM)))
                                               for h in hosts], daemon=True)
    try:
        fan_out.start()
        fan_out.join(timeout=10)
        assert not fan_out.is_alive(), "the fan-out waited for a worker"
    finally:
        pool.finish()
    assert len(pool.calls) == len(hosts) and recorder.in_flight == 0
    for host, (_root_arg, handed, *_rest, stored) in zip(hosts, pool.calls, strict=True):
        assert handed.host == host and handed.stdout == b""  # nothing of the stream goes through the pipe
        assert stored == root / "hosts" / host / capture_write.STREAM_FILE and stored.read_bytes() == STREAM


def test_what_the_worker_is_handed_records_the_host_as_the_bytes_would(tmp_path: Path):
    hosts = ["gpu01"]
    root = _root(tmp_path, hosts)
    pool = BusyPool()
    _recorder(root, pool).record(HostRun("gpu01", HostStatus.OK, stdout=bytes(STREAM), rc=0))
    (args,) = pool.calls
    pipeline._record_and_analyze(*args)  # in this process: what the worker runs
    direct = _root(tmp_path / "direct", hosts)
    pipeline._record_run(direct, HostRun("gpu01", HostStatus.OK, stdout=bytes(STREAM), rc=0), PLAN, "fake")
    got, want = (load_capture(r, verify=True).hosts[0] for r in (root, direct))
    assert (got.status, got.reason) == (want.status, want.reason)
    assert (root / "hosts/gpu01" / capture_write.STREAM_FILE).read_bytes() == STREAM


def test_a_stream_that_cannot_be_stored_goes_through_the_pipe(tmp_path: Path):
    root = _root(tmp_path, ["gpu01"])
    (root / "hosts").mkdir(exist_ok=True)
    (root / "hosts" / "gpu01").write_text("a file where the host's folder goes")
    pool = BusyPool()
    recorder = _recorder(root, pool)
    recorder.record(HostRun("gpu01", HostStatus.OK, stdout=bytes(STREAM)))
    (args,) = pool.calls
    assert args[1].stdout == STREAM and args[-1] is None and recorder.in_flight == len(STREAM)
    pool.finish()
    assert recorder.in_flight == 0


def test_the_recording_workers_start_before_this_process_grows(tmp_path: Path):
    """Each submit to a pool without an idle worker starts one, and a new process counts its parent's pages
    until it runs its own program: the workers started as the first hosts came back, after collect had imported
    the fleet step's modules, and bench_fleet read 140 MiB as the largest worker's peak for its 60 MiB. They
    are all started when the recorder is made."""
    import multiprocessing
    import os

    workers = min(os.cpu_count() or 1, 8)
    if workers < 2:
        pytest.skip("one core: the recorder writes in this process")
    before = set(multiprocessing.active_children())
    recorder = pipeline._Recorder(_root(tmp_path, ["gpu01"]), PLAN, "fake", pipeline._Recorder.PARALLEL_FROM,
                                  capture_write.WRITTEN_VERSION)
    try:
        assert len(set(multiprocessing.active_children()) - before) == workers
    finally:
        recorder.close()
