"""Recording a host's stream straight into index.fci (capture_scan.scan_host, issue 18) writes what the item path
wrote: encode_index(host_capture_from_stream(...).items) byte for byte, the same snapshots and the same item
count, on real host streams, on the suite's stream literals and their cuts, on mutated and generated streams.
And a host recorded by the collect path reads back as it did."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings

from fabricase import pipeline
from fabricase.capture_index import encode_index
from fabricase.capture_scan import scan_host
from fabricase.capture_write import host_capture_from_stream, prepare_capture_dir, write_capture_meta, write_host
from fabricase.capturedir import load_host
from fabricase.collectors.framing import parse_stream
from fabricase.errors import CaptureError
from fabricase.models import HostStatus
from fabricase.transports import HostRun

from .test_framing_speedup import _mutate, _suite_stream_literals, framed_streams
from .test_framing_speedup import host_streams as host_streams  # noqa: F401 - the module's fixture, reused

PLAN = pipeline._plan(pipeline.CollectOptions(interval_s=0))


def assert_same(data: bytes) -> None:
    stream = parse_stream(data)
    try:
        want = encode_index(host_capture_from_stream("h", stream, PLAN).items)
    except CaptureError:
        return  # the item path cannot index it (a value out of the format's range): nothing to compare
    got = scan_host(data, PLAN)
    assert got.index == want, f"index differs on {data[:120]!r}"
    assert got.items == len(stream.items)
    assert got.snapshots == host_capture_from_stream("h", stream, PLAN).snapshots
    assert (got.result.error, got.result.began, got.result.complete, got.result.snapshots) == (
        stream.error, stream.began, stream.complete, stream.snapshots)


def test_real_host_streams_index_the_same(host_streams):
    for data in host_streams.values():
        assert_same(data)
        assert scan_host(data, PLAN).items > 100


def test_failed_commands_are_worded_from_their_stderr_even_when_it_comes_later():
    data = (b"@@FC1 BEGIN 1 1\n"
            b"@@FC1 I rdma command 0 3 4 0 1.0 2.5 cmd:ibstat\nnope\n"
            b"@@FC1 I rdma stderr 0 0 11 0 - - cmd:ibstat\nno device!\n\n"
            b"@@FC1 I rdma command 0 124 0 0 1.0 9.0 cmd:nosuch\n\n"
            b"@@FC1 I netdev file 0 1 0 0 - - /sys/x\n\n"
            b"@@FC1 END\n")
    assert_same(data)
    errors = [it.error for it in host_capture_from_stream("h", parse_stream(data), PLAN).items]
    assert errors == ["exit 3: no device!", None, "exit 124", "unreadable"]


def test_the_suite_stream_literals_and_their_cuts_index_the_same():
    literals = _suite_stream_literals()
    assert len(literals) >= 20
    for data in literals:
        for cut in range(len(data) + 1):
            assert_same(data[:cut])


def test_mutated_real_streams_index_the_same(host_streams):
    rng = random.Random(1818)
    for _ in range(150):
        data = host_streams["efa"]
        for _ in range(rng.randrange(1, 4)):
            data = _mutate(data, rng)
        assert_same(data)


@settings(max_examples=300, deadline=None)
@given(framed_streams())
def test_generated_streams_index_the_same(data):
    assert_same(data)


@pytest.mark.parametrize("cut", [None, -40])
def test_a_recorded_host_reads_back_as_with_the_item_path(tmp_path, host_streams, cut):
    data = host_streams["hgx"][:cut]
    roots = {}
    for name in ("scan", "items"):
        root = roots[name] = prepare_capture_dir(tmp_path / name)
        write_capture_meta(root, plan=PLAN, targets={}, hosts=["h"], created_at="2026-12-03T00:00:00Z", version=3)
    run = HostRun("h", HostStatus.OK, stdout=data, started_at="a", finished_at="b")
    pipeline._record_run(roots["scan"], run, PLAN, "ssh", 3)
    # The item path, as _record_run took it before capture_scan.
    stream = parse_stream(data)
    hc = host_capture_from_stream("h", stream, PLAN)
    hc.transport, hc.started_at, hc.finished_at = "ssh", "a", "b"
    if stream.error:
        hc.status, hc.reason = HostStatus.PARTIAL, f"capture stream: {stream.error}"
    write_host(roots["items"], hc, data, 3)
    for name in ("index.fci", "host.json", "stream.fc1"):
        assert (roots["scan"] / "hosts/h" / name).read_bytes() == (roots["items"] / "hosts/h" / name).read_bytes()
    got = load_host(roots["scan"], "h", 3)
    assert got.status == (HostStatus.PARTIAL if cut else HostStatus.OK)
    assert got.items == load_host(roots["items"], "h", 3).items
