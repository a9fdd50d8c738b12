"""The probe's analysis over probe captures built in tmp_path: real-format outputs (the perftest client section
of ../shared/fixtures/real/perftest-outputs/ib_write_bw_100G-RoCE_mlx5_server-and-client_hpe-shs.txt and the
all_reduce_perf table of nccl-tests-outputs_issues/...issue-232.txt, figures rewritten), stored as items the way
load_capture reads them, with probe.json beside capture.json."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from fabricase.analysis import analyze
from fabricase.analysis.perf import perf_records
from fabricase.analysis.probe import load_probe, probe_findings, probe_measures
from fabricase.analysis.probe_text import probe_lines, probe_summary
from fabricase.capture_records import item_path
from fabricase.capturedir import load_capture
from fabricase.diagnosis import verdict_of
from fabricase.models import CaptureItem, Severity
from fabricase.probe.model import ProbeDoc, ProbeResult, ProbeTest, item_source

HOSTS = [f"probe-h{i}" for i in range(1, 9)]
GOOD, SLOW = 385.0, 97.0  # Gb/s at the largest message; expected 400 (slow under 360)

PERFTEST_CLIENT = """\
# ib_write_bw -d {dev} -F -D 5 --report_gbits {server}
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : {dev}
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 TX depth        : 128
 CQ Moderation   : 1
 Mtu             : 4096[B]
 Link type       : Ethernet
 GID index       : 3
 Max inline data : 0[B]
 rdma_cm QPs     : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x0ddd PSN 0xec1a24 RKey 0x04c4bd VAddr 0x007f1e2f010000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:04
 remote address: LID 0000 QPN 0x0e1d PSN 0xd0b406 RKey 0x0d0238 VAddr 0x007fb11ab70000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:02
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      560960           0.00               {bw:.2f}              0.186974
---------------------------------------------------------------------------------------
"""

NCCL_TABLE = """\
# nThread 1 nGpus 1 minBytes 2097152 maxBytes 1073741824 step: 2(factor) warmup iters: 10 iters: 10
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     2097152        524288     float     sum      -1    113.2   18.53   18.53      0    93.35   22.46   22.46      0
    33554432       8388608     float     sum      -1    812.3   41.31   41.31      0    808.2   41.52   41.52      0
  1073741824     268435456     float     sum      -1  25000.0  {b:>6}  {b:>6}      0  25010.0  {b:>6}  {b:>6}      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : {b}
#
"""
NCCL_WARN = ("probe-h5:41011:41125 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
             "10.0.0.1<49152> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.3.0.2 "
             "remoteGids::ffff:10.3.0.1 hca mlx5_3\n")  # fmt: skip


def ring_tests(hosts: list[str], rails: int = 1) -> list[ProbeTest]:
    """Ring pairs, both directions: 4 rounds of disjoint pairs per rail (8 hosts: 16 tests a rail)."""
    n, tests, rnd = len(hosts), [], 0
    for rail in range(rails):
        for offset in (0, 1):
            edges = [(hosts[i], hosts[(i + 1) % n]) for i in range(offset, n, 2)]
            for flip in (False, True):
                rnd += 1
                for k, (a, b) in enumerate(edges):
                    server, client = (b, a) if flip else (a, b)
                    tests.append(ProbeTest(f"r{rnd}-ib_write_bw-{k:02d}", "ib_write_bw", "pairs", rnd,
                                           (server, client), rail=rail, devices=(f"mlx5_{rail}", f"mlx5_{rail}")))
    return tests


def pair_output(test: ProbeTest, gbps: float) -> str:
    return PERFTEST_CLIENT.format(dev=test.devices[1] if test.devices else "mlx5_0", server=test.hosts[0], bw=gbps)


def store(root: Path, items: dict[str, list[CaptureItem]], host: str, source: str, data: bytes) -> None:
    rel = item_path(source, 0, "command")
    hdir = root / "hosts" / host
    (hdir / rel).parent.mkdir(parents=True, exist_ok=True)
    (hdir / rel).write_bytes(data)
    items[host].append(CaptureItem(source, 0, "command", "probe", rel, len(data), hashlib.sha256(data).hexdigest(),
                                   rc=0))


def build(root: Path, tests_and_outputs: list[tuple[ProbeTest, str | bytes | None, str]], *,
          expected: dict | None = None, hosts: list[str] = HOSTS, extra: dict | None = None, **doc_fields):
    """A probe capture: each test's output on its reporter (None: no item), items of the hosts' own (`extra`:
    host -> source -> text) and probe.json; loaded back with load_capture."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "capture.json").write_text(json.dumps({
        "format": "fabricase-capture", "format_version": 2, "created_at": "2026-12-01T00:00:00Z",
        "tool_version": "0.1.0", "interval_s": 0.0, "collectors": {}, "targets": {}, "hosts": hosts}))
    items: dict[str, list[CaptureItem]] = {h: [] for h in hosts}
    results = []
    for test, output, status in tests_and_outputs:
        error = output if status == "failed" and isinstance(output, str) and output.startswith("probe-") else None
        results.append(ProbeResult(test, status, error=error, duration_s=5.0))
        if output is not None and error is None:
            store(root, items, test.reporter, item_source(test.id),
                  output if isinstance(output, bytes) else output.encode())
    for host, own in (extra or {}).items():
        for source, text in own.items():
            store(root, items, host, source, text.encode())
    for h in hosts:
        hdir = root / "hosts" / h
        hdir.mkdir(parents=True, exist_ok=True)
        (hdir / "host.json").write_text(json.dumps({"host": h, "status": "ok", "reason": None, "transport": "ssh",
                                                    "started_at": None, "finished_at": None, "snapshots": []}))
        (hdir / "index.json").write_text(json.dumps({"items": [it.to_dict() for it in items[h]]}))
    doc = ProbeDoc(hosts=list(hosts), results=results, expected=expected or {}, **doc_fields)
    (root / "probe.json").write_text(json.dumps(doc.to_dict()))
    capture = load_capture(root)
    loaded, why = load_probe(root)
    assert why is None
    return capture, loaded


def pairs_capture(root: Path, rate, *, rails: int = 1, expected: float | None = 400.0, hosts=HOSTS):
    """rate(test) -> Gb/s."""
    tests = ring_tests(hosts, rails)
    exp = {"pair_gbps": expected, "pair_basis": "the 400 Gb/s port rate"} if expected else {}
    return build(root, [(t, pair_output(t, rate(t)), "ok") for t in tests], expected=exp, hosts=hosts)


def slow_with(*slow_hosts: str):
    return lambda t: SLOW if set(t.hosts) & set(slow_hosts) else GOOD


def kinds(findings):
    return [(f.kind, f.host, f.component) for f in findings]


@pytest.mark.parametrize("slow", ["probe-h3", "probe-h6"])
def test_one_slow_host_among_ring_pairs_is_that_host(tmp_path, slow):
    capture, doc = pairs_capture(tmp_path, slow_with(slow))
    assert len(doc.results) == 16 and {r.test.round for r in doc.results} == {1, 2, 3, 4}
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-slow-host", slow, "host")]
    f = findings[0]
    assert f.severity == Severity.MAJOR and f.confidence == 0.9
    assert "slow with both partners (2/2 pairs, 4 tests)" in f.summary
    assert {e.metric for e in f.evidence} == {"probe.pair_gbps"} and {e.value for e in f.evidence} == {SLOW}
    assert {e.baseline for e in f.evidence} == {400.0} and len(f.evidence) == 4
    assert all(e.source.startswith("cmd:perf-probe-r") for e in f.evidence)
    assert verdict_of(f) == "low-bandwidth"


def test_measures_are_parsed_from_the_reporters_items(tmp_path):
    capture, doc = pairs_capture(tmp_path, slow_with("probe-h3"))
    measures = probe_measures(capture, doc)
    assert len(measures) == 16
    by_id = {m.test.id: m for m in measures}
    slow_one = next(m for m in measures if "probe-h3" in m.test.hosts)
    assert slow_one.value == SLOW and slow_one.unit == "Gb/s" and slow_one.size == 65536
    assert sorted({m.value for m in by_id.values()}) == [SLOW, GOOD]


def test_no_slow_host_no_probe_finding(tmp_path):
    capture, doc = pairs_capture(tmp_path, lambda t: GOOD)
    assert probe_findings(capture, doc) == []
    lines = probe_lines(probe_summary(capture, doc))
    assert lines[0].startswith("no slow host") and "16 tests: 16 ok, 0 failed or timed out, 0 slow" in lines[1]


def test_a_slow_path_is_named_when_both_hosts_are_fine_with_their_other_partners(tmp_path):
    capture, doc = pairs_capture(tmp_path, lambda t: SLOW if set(t.hosts) == {"probe-h5", "probe-h6"} else GOOD)
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-slow-path", None, "path:probe-h5-probe-h6")]
    assert "both directions" in findings[0].summary and len(findings[0].evidence) == 2
    assert findings[0].confidence == 0.7 and verdict_of(findings[0]) == "low-bandwidth"


def _with_second_runs(tests: list[ProbeTest], rate, again) -> list[tuple[ProbeTest, str, str]]:
    """The ring's tests, then each slow one run again as the probe runs it (parent: the first run), its figure
    `again(test)`."""
    import dataclasses

    out = [(t, pair_output(t, rate(t)), "ok") for t in tests]
    last = max(t.round for t in tests)
    for k, t in enumerate(t for t in tests if rate(t) == SLOW):
        second = dataclasses.replace(t, id=f"r{last + 1 + k}-ib_write_bw-a{k:02d}", round=last + 1 + k, parent=t.id)
        out.append((second, pair_output(second, again(second)), "ok"))
    return out


_EXPECTED = {"pair_gbps": 400.0, "pair_basis": "the 400 Gb/s port rate"}


@pytest.mark.parametrize("again", [SLOW, GOOD])
def test_a_slow_pair_is_slow_only_when_its_second_run_is_too(tmp_path, again):
    """One slow run of a healthy pair (a busy CPU, a noisy neighbour) named a path before; the probe now runs
    each slow pair once more, and only a pair slow both times is named."""
    rate = lambda t: SLOW if t.hosts == ("probe-h5", "probe-h6") else GOOD  # noqa: E731  one direction
    capture, doc = build(tmp_path, _with_second_runs(ring_tests(HOSTS), rate, lambda t: again), expected=_EXPECTED)
    findings = probe_findings(capture, doc)
    if again == GOOD:
        assert findings == []
    else:
        assert kinds(findings) == [("probe-slow-path", None, "path:probe-h5-probe-h6")]
        assert "one direction" in findings[0].summary and len(findings[0].evidence) == 2


@pytest.mark.parametrize("again", [SLOW, GOOD])
def test_a_slow_host_is_named_only_when_its_pairs_are_slow_again(tmp_path, again):
    rate = slow_with("probe-h3")
    capture, doc = build(tmp_path, _with_second_runs(ring_tests(HOSTS), rate, lambda t: again), expected=_EXPECTED)
    findings = probe_findings(capture, doc)
    if again == GOOD:
        assert findings == []
    else:
        assert kinds(findings) == [("probe-slow-host", "probe-h3", "host")]
        assert "slow with both partners (2/2 pairs, 8 tests)" in findings[0].summary


def test_one_slow_rail_of_two_is_a_slow_nic(tmp_path):
    rate = lambda t: SLOW if "probe-h3" in t.hosts and t.rail == 1 else GOOD  # noqa: E731
    capture, doc = pairs_capture(tmp_path, rate, rails=2)
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-slow-nic", "probe-h3", "rdma:mlx5_1")]
    assert "rail 1 (mlx5_1)" in findings[0].summary and "other rails are fine" in findings[0].summary


def test_both_rails_slow_is_the_host(tmp_path):
    capture, doc = pairs_capture(tmp_path, slow_with("probe-h3"), rails=2)
    assert kinds(probe_findings(capture, doc)) == [("probe-slow-host", "probe-h3", "host")]


def test_every_pair_below_the_expected_rate_is_one_fabric_finding(tmp_path):
    capture, doc = pairs_capture(tmp_path, lambda t: 300.0 + (hash(t.id) % 5))
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-below-expected", None, "fabric")]
    assert findings[0].severity == Severity.MINOR and "every pair test (16)" in findings[0].summary
    # one host far below even a slow fabric still stands out, beside the fabric finding
    capture, doc = pairs_capture(tmp_path / "b", lambda t: 60.0 if "probe-h7" in t.hosts else 300.0)
    assert kinds(probe_findings(capture, doc)) == [("probe-slow-host", "probe-h7", "host"),
                                                   ("probe-below-expected", None, "fabric")]


def test_without_an_expected_rate_slow_is_against_the_median(tmp_path):
    capture, doc = pairs_capture(tmp_path, slow_with("probe-h2"), expected=None)
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-slow-host", "probe-h2", "host")]
    assert {e.baseline for e in findings[0].evidence} == {GOOD}


def test_two_hosts_cannot_tell_the_host_from_its_partner(tmp_path):
    hosts = ["probe-h1", "probe-h2"]
    tests = [ProbeTest("r1-ib_write_bw-00", "ib_write_bw", "pairs", 1, ("probe-h1", "probe-h2"), rail=0),
             ProbeTest("r2-ib_write_bw-00", "ib_write_bw", "pairs", 2, ("probe-h2", "probe-h1"), rail=0)]
    capture, doc = build(tmp_path, [(t, pair_output(t, SLOW), "ok") for t in tests], expected={"pair_gbps": 400.0},
                         hosts=hosts)
    findings = probe_findings(capture, doc)
    assert {f.host for f in findings} == set(hosts) and {f.confidence for f in findings} == {0.4}
    assert all("cannot be told from the partner" in f.summary for f in findings)


def set_test(tid, rnd, hosts, parent=None):
    return ProbeTest(tid, "all_reduce_perf", "bisect" if parent else "collective", rnd, tuple(hosts), parent=parent)


def bisection(busbw: dict[str, float], log: str = ""):
    """8 hosts -> halves -> quarters -> probe-h5 and probe-h6 each beside a known-good helper."""
    plan = [set_test("b1", 5, HOSTS), set_test("b2a", 6, HOSTS[:4], "b1"), set_test("b2b", 6, HOSTS[4:], "b1"),
            set_test("b3a", 7, HOSTS[4:6], "b2b"), set_test("b3b", 7, HOSTS[6:], "b2b"),
            set_test("b4a", 8, ["probe-h5", "probe-h1"], "b3a"), set_test("b4b", 8, ["probe-h6", "probe-h2"], "b3a")]
    return [(t, log + NCCL_TABLE.format(b=f"{busbw.get(t.id, 45.0):.2f}"), "ok") for t in plan if t.id in busbw]


SLOW_H5 = {"b1": 20.0, "b2a": 45.0, "b2b": 20.0, "b3a": 20.0, "b3b": 45.0, "b4a": 20.0, "b4b": 45.0}
BUSBW = {"busbw_gbs": 45.0, "busbw_basis": "45 GB/s of this fabric's baseline"}


def test_the_bisection_is_reconstructed_and_names_its_candidate(tmp_path):
    capture, doc = build(tmp_path, bisection(SLOW_H5), expected=BUSBW)
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-slow-host", "probe-h5", "host")]
    assert "named by the bisection in 4 rounds" in findings[0].summary and findings[0].confidence == 0.8
    assert findings[0].evidence[0].metric == "probe.busbw_gbs" and findings[0].evidence[0].value == 20.0
    summary = probe_summary(capture, doc)
    assert [(r.round, r.hosts, r.slow) for r in summary.bisection] == [
        (5, "probe-h[1-8]", True), (6, "probe-h[1-4]", False), (6, "probe-h[5-8]", True),
        (7, "probe-h[5-6]", True), (7, "probe-h[7-8]", False), (8, "probe-h[1,5]", True), (8, "probe-h[2,6]", False)]
    assert [r.candidate for r in summary.bisection][-2:] == ["probe-h5", "probe-h6"]


def test_the_bisection_without_a_baseline_judges_each_round_against_its_best(tmp_path):
    capture, doc = build(tmp_path, bisection(SLOW_H5))
    assert kinds(probe_findings(capture, doc)) == [("probe-slow-host", "probe-h5", "host")]


def test_pairs_and_bisection_naming_one_host_are_one_finding(tmp_path):
    tests = ring_tests(HOSTS)
    pairs = [(t, pair_output(t, slow_with("probe-h5")(t)), "ok") for t in tests]
    capture, doc = build(tmp_path, pairs + bisection(SLOW_H5), expected={"pair_gbps": 400.0, **BUSBW})
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-slow-host", "probe-h5", "host")]
    f = findings[0]
    assert f.confidence == 0.97 and "both partners" in f.summary and "bisection in 4 rounds" in f.summary
    assert {e.metric for e in f.evidence} == {"probe.pair_gbps", "probe.busbw_gbs"}
    lines = probe_lines(probe_summary(capture, doc))
    assert lines[0].startswith("slow host probe-h5: slow with both partners (2/2 pairs, 4 tests) and named by")


def test_a_whole_set_slow_with_no_subset_slow_is_the_collective(tmp_path):
    busbw = {"b1": 20.0, "b2a": 44.0, "b2b": 45.0}
    capture, doc = build(tmp_path, bisection(busbw), expected=BUSBW)
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("probe-collective-slow", None, "collective")]
    assert findings[0].severity == Severity.MINOR and "none of its 2 subsets was" in findings[0].summary


def test_nccl_lines_in_a_collective_name_the_nic(tmp_path):
    capture, doc = build(tmp_path, bisection({"b1": 45.0}, log=NCCL_WARN), expected=BUSBW)
    assert ("nccl-nic-errors", "probe-h5", "rdma:mlx5_3") in [k[:2] + (k[2].split("/")[0],)
                                                               for k in kinds(probe_findings(capture, doc))]


def test_a_test_that_could_not_run_is_perf_test_failed_once_per_host(tmp_path):
    tests = ring_tests(HOSTS)
    rows = [(t, "probe-h2: ib_write_bw: command not found", "failed") if "probe-h2" in t.hosts
            else (t, pair_output(t, GOOD), "ok") for t in tests]
    capture, doc = build(tmp_path, rows, expected={"pair_gbps": 400.0})
    findings = probe_findings(capture, doc)
    assert kinds(findings) == [("perf-test-failed", "probe-h2", "host")]
    assert "command not found" in findings[0].summary and findings[0].evidence[0].value == 4
    assert [m.could_not_run for m in probe_measures(capture, doc)].count(True) == 4


def test_a_timed_out_test_is_slow(tmp_path):
    tests = ring_tests(HOSTS)
    rows = [(t, None, "timed-out") if "probe-h4" in t.hosts else (t, pair_output(t, GOOD), "ok") for t in tests]
    capture, doc = build(tmp_path, rows, expected={"pair_gbps": 400.0})
    assert kinds(probe_findings(capture, doc)) == [("probe-slow-host", "probe-h4", "host")]


HOSTILE = {
    "garbage": b"\xff\xfe#bytes BW average \x80\x81 nonsense\n" * 50,
    "digits": b"9" * (1 << 20),
    "nuls": b"\x00" * 4096 + b" 65536 1000 0.00 \x00385.0 0.1\n",
    "ansi": b"\x1b[2J\x1b[31m #bytes #iterations BW peak BW average\n 65536 \x1b[0m 10 0.00 nan 0.1\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_items_give_no_figure_and_no_exception(tmp_path, name):
    tests = ring_tests(HOSTS)[:4] + [set_test("b1", 5, HOSTS)]
    capture, doc = build(tmp_path, [(t, HOSTILE[name], "ok") for t in tests], expected={"pair_gbps": 400.0, **BUSBW})
    measures = probe_measures(capture, doc)
    assert [m.value for m in measures] == [None] * 5 and all(m.reason and not m.judged for m in measures)
    assert all(m.reason.isprintable() for m in measures)
    assert probe_findings(capture, doc) == []
    assert all(len(line) <= 80 for line in probe_lines(probe_summary(capture, doc)))


@pytest.mark.parametrize("content, why", [
    (b"{not json", "probe.json: "),
    (b'{"format": "something-else"}', "not a fabricase probe record"),
    (b'{"format": "fabricase-probe", "format_version": 9}', "format_version 9"),
    (b'{"format": "fabricase-probe", "format_version": 1, "results": [{"status": "odd"}]}', "is not one of"),
    (b'{"format": "fabricase-probe", "format_version": 1, "results": [{"status": "ok"}]}', "missing field"),
    (b'{"format": "fabricase-probe", "hosts": [NaN]}', "NaN"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_an_unusable_probe_json_says_why(tmp_path, content, why):
    (tmp_path / "probe.json").write_bytes(content)
    doc, reason = load_probe(tmp_path)
    assert doc is None and reason.startswith("probe.json: ") and why in reason


def test_probe_json_absent_too_big_or_a_symlink_out(tmp_path):
    assert load_probe(tmp_path) == (None, None)
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    cap = tmp_path / "cap"
    cap.mkdir()
    os.symlink(outside, cap / "probe.json")
    assert "outside the capture" in load_probe(cap)[1]
    (cap / "probe.json").unlink()
    (cap / "probe.json").write_bytes(b" " * (16 * 1024 * 1024 + 1))
    assert "over the 16 MiB cap" in load_probe(cap)[1]


def test_analyze_wires_probe_findings_and_keeps_probe_items_out_of_perf(tmp_path):
    # busbw 20 GB/s at 1 GiB after 41.5 at 32 MiB is a collapse to the per-host rule: judged only by the probe
    own = NCCL_TABLE.format(b="20.00")
    capture, doc = build(tmp_path, bisection(SLOW_H5), expected=BUSBW,
                         extra={"probe-h8": {"cmd:perf-all_reduce_perf": own}})
    assert [r.source for hc in capture.hosts for r in perf_records(hc)] == ["cmd:perf-all_reduce_perf"]
    found = kinds(analyze(capture))
    assert ("probe-slow-host", "probe-h5", "host") in found
    assert [k for k in found if k[0] == "nccl-busbw-collapse"] == [("nccl-busbw-collapse", "probe-h8", "host")]


def test_analyze_reports_an_unusable_probe_json_and_goes_on(tmp_path):
    capture, _ = pairs_capture(tmp_path, slow_with("probe-h3"))
    (tmp_path / "probe.json").write_text("[1, 2")
    found = analyze(load_capture(tmp_path))
    bad = [f for f in found if f.kind == "probe-unreadable"]
    assert len(bad) == 1 and bad[0].host is None and bad[0].severity == Severity.INFO
    assert bad[0].summary.startswith("probe.json: ")


def test_probe_lines_fit_the_width_and_lead_with_the_verdict(tmp_path):
    tests = ring_tests(HOSTS)
    pairs = [(t, pair_output(t, slow_with("probe-h5")(t)), "ok") for t in tests]
    capture, doc = build(tmp_path, pairs + bisection(SLOW_H5), expected={"pair_gbps": 400.0, **BUSBW},
                         interrupted=True, stopped_reason="the 600 s budget ended")
    summary = probe_summary(capture, doc)
    assert (summary.tests, summary.ok, summary.failed) == (23, 23, 0)
    assert summary.slow == 4 + 4 and len(summary.slow_pairs) == 4
    for width in (80, 60, 40):
        lines = probe_lines(summary, width=width)
        assert lines and all(len(line) <= width for line in lines)
        assert lines[0].startswith("slow host probe-h5")
        assert any("round" in line and "busbw" in line for line in lines)
        assert any(line.startswith("stopped early: the 600 s budget") for line in lines)


def test_wrong_results_name_the_narrowest_wrong_set(tmp_path):
    """#wrong > 0 is corrupt data, not bandwidth: the narrowest set that returned it is named (not its parents)."""
    plan = [set_test("b1", 5, HOSTS), set_test("b2a", 6, HOSTS[:4], "b1"), set_test("b2b", 6, HOSTS[4:], "b1")]
    good = NCCL_TABLE.format(b="45.00")
    bad = good.replace("      0  25010.0", "     12  25010.0")
    capture, doc = build(tmp_path, [(plan[0], bad, "ok"), (plan[1], good, "ok"), (plan[2], bad, "ok")],
                         expected=BUSBW)
    wrong = [f for f in probe_findings(capture, doc) if f.kind == "nccl-wrong-results"]
    assert [(f.host, f.component, f.severity) for f in wrong] == [(None, "collective:probe-h[5-8]", Severity.MAJOR)]
    assert "12 wrong elements" in wrong[0].summary
