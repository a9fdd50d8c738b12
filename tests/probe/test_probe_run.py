"""The probe runner on this machine (no namespace lab): four "hosts" that are all this machine, reached by a local
exec whose pair tests connect over loopback. Real iperf3 and the ib_write_bw stand-in move real bytes; what is
checked is the runner's part: the rounds, the items and probe.json it stores, the budget, the stop, the sweep.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from fabricase.capturedir import load_capture
from fabricase.probe.exec import LocalExec
from fabricase.probe.model import PROBE_NAME, ProbeDoc, item_source, server_item_source
from fabricase.probe.run import ProbeOptions, run_probe

HOSTS = ["n1", "n2", "n3", "n4"]
STANDINS = Path(__file__).parent / "standins"


class LoopbackExec(LocalExec):
    """Every host is this machine; a pair's client connects to 127.0.0.1."""

    def address(self, host: str) -> str:
        return "127.0.0.1"


def _capture(root: Path, hosts=HOSTS):
    """An empty capture of `hosts`, as `collect` leaves one (records only; the probe adds its items)."""
    root.mkdir(parents=True)
    (root / "capture.json").write_text(json.dumps({
        "format": "fabricase-capture", "format_version": 2, "created_at": "2026-12-01T00:00:00Z",
        "tool_version": "test", "interval_s": 0, "collectors": {}, "targets": {"hosts": list(hosts)},
        "hosts": list(hosts)}))
    for host in hosts:
        d = root / "hosts" / host
        d.mkdir(parents=True)
        (d / "host.json").write_text(json.dumps({"host": host, "status": "ok", "transport": "local", "snapshots": []}))
        (d / "index.json").write_text(json.dumps({"items": []}))
    return load_capture(root)


def _opts(**kw) -> ProbeOptions:
    base = dict(stages=("tcp",), duration_s=1, test_timeout_s=30, budget_s=120, iperf_port=25201, rdma_port=28515)
    return ProbeOptions(**{**base, **kw})


@pytest.fixture
def needs_iperf3():
    if shutil.which("iperf3") is None:
        if os.environ.get("CI") == "true":  # CI installs it (the labs need it): missing there is a failure
            pytest.fail("iperf3 is not installed (Debian: iperf3)")
        pytest.skip("iperf3 is not installed (Debian: iperf3)")


def test_tcp_pairs_run_in_rounds_and_are_stored(tmp_path, needs_iperf3):
    capture = _capture(tmp_path / "cap")
    seen = []
    doc = run_probe(capture, LoopbackExec(), _opts(), on_result=seen.append)
    assert [r.status for r in doc.results] == ["ok"] * 8, [(r.status, r.error) for r in doc.results]
    assert len(seen) == 8
    rounds: dict[int, list] = {}
    for r in doc.results:
        rounds.setdefault(r.test.round, []).append(r.test)
    assert len(rounds) == 4  # ring of 4: two matchings, both directions
    for tests in rounds.values():  # a host is in one test per round
        hosts = [h for t in tests for h in t.hosts]
        assert len(hosts) == len(set(hosts))
    partners = {h: {p for t in (r.test for r in doc.results) if h in t.hosts for p in t.hosts if p != h}
                for h in HOSTS}
    assert all(len(p) == 2 for p in partners.values()), partners
    stored = load_capture(capture.root)  # every item verifies against its sha256
    for r in doc.results:
        item = stored.host(r.test.reporter).item(item_source(r.test.id))
        assert item is not None and item.command and "iperf3 -c 127.0.0.1" in item.command
        data = json.loads(stored.host(r.test.reporter).read(item))
        assert data["end"]["sum_received"]["bytes"] > 0  # real bytes moved
        assert stored.host(r.test.server).item(server_item_source(r.test.id)) is not None
    again = ProbeDoc.from_dict(json.loads((capture.root / PROBE_NAME).read_text()))
    assert again.to_dict() == doc.to_dict()
    assert not doc.interrupted and doc.transport == "local"


def test_budget_skips_rounds_it_cannot_hold(tmp_path, needs_iperf3):
    capture = _capture(tmp_path / "cap")
    doc = run_probe(capture, LoopbackExec(), _opts(budget_s=8))  # a round needs duration + 5 s left
    assert doc.interrupted and "budget" in doc.stopped_reason
    assert 0 < len(doc.results) < 8


def test_stop_ends_the_probe_and_keeps_what_finished(tmp_path, needs_iperf3):
    capture = _capture(tmp_path / "cap")
    stop = threading.Event()

    def on_result(result):
        stop.set()  # after the first test of round 1 is recorded

    doc = run_probe(capture, LoopbackExec(), _opts(), on_result=on_result, stop=stop)
    assert doc.interrupted and doc.stopped_reason.startswith("interrupted")
    assert [r.test.round for r in doc.results] == [1, 1]  # round 1 finished, nothing after it started
    stored = load_capture(capture.root)
    assert all(stored.host(r.test.reporter).item(item_source(r.test.id)) for r in doc.results)


def test_a_missing_tool_is_a_failed_test_with_the_reason(tmp_path):
    capture = _capture(tmp_path / "cap")
    doc = run_probe(capture, LoopbackExec(tools_path=str(tmp_path / "nothing")),
                    _opts(stages=("rdma",), devices=("mlx5_0",), rdma_tools=("ib_read_bw",)))
    if shutil.which("ib_read_bw"):
        pytest.skip("perftest is installed here")
    assert doc.results and all(r.status == "failed" for r in doc.results)
    assert "ib_read_bw" in (doc.results[0].error or "")


def test_ib_write_bw_standin_pairs_over_loopback(tmp_path):
    capture = _capture(tmp_path / "cap")
    doc = run_probe(capture, LoopbackExec(tools_path=str(STANDINS)),
                    _opts(stages=("rdma",), devices=("standin0",)))
    assert [r.status for r in doc.results] == ["ok"] * 8, [(r.status, r.error) for r in doc.results]
    from fabricase.parsers.perftest import parse_perftest

    stored = load_capture(capture.root)
    for r in doc.results:
        text = stored.host(r.test.reporter).text(item_source(r.test.id))
        row = parse_perftest(text).largest()
        assert row is not None and row.bw_avg_gbps > 0
        assert r.test.devices == ("standin0", "standin0") and r.test.rail == 0


def test_leftovers_are_swept_and_reported(tmp_path):
    """A server that outlives its test (the client never came) is killed by the sweep and named."""
    capture = _capture(tmp_path / "cap", ["n1", "n2"])

    class NoClient(LoopbackExec):
        def start(self, host, argv, *, tag, limit_s, env=None):
            argv = list(argv)
            if argv[:1] == ["iperf3"]:
                # the client never comes; the server leaves a child behind that outlives it
                argv = ["true"] if "-c" in argv else ["sh", "-c", 'sleep 120 & exec "$@"', "x", *argv]
            return super().start(host, argv, tag=tag, limit_s=limit_s, env=env)

    doc = run_probe(capture, NoClient(), _opts(budget_s=60))
    assert any(r.leftovers for r in doc.results), [r.to_dict() for r in doc.results]
    assert any("sleep 120" in line for r in doc.results for line in r.leftovers), [r.leftovers for r in doc.results]


def test_gpu_stage_runs_dcgmi_diag_on_every_host_and_names_the_gpu(tmp_path):
    """`--test gpu`: dcgmi diag on every host at once. Here a dcgmi on PATH prints a real `dcgmi diag -r 3`
    excerpt (ml-engineering: GPU 3 with uncorrectable memory errors); the analysis names that GPU."""
    from fabricase.analysis.probe import probe_findings

    real = Path(__file__).parents[1] / "fixtures/real/ml-engineering-excerpts/dcgmi-diag-r3_xid64_excerpt.txt"
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "dcgmi").write_text(f'#!/bin/sh\n[ "$1 $2" = "diag -r" ] || exit 2\ncat "{real.resolve()}"\n')
    (tools / "dcgmi").chmod(0o755)
    capture = _capture(tmp_path / "cap", ["n1", "n2"])
    doc = run_probe(capture, LoopbackExec(tools_path=str(tools)), _opts(stages=("gpu",), dcgm_level=2))
    assert [(r.test.kind, r.test.hosts, r.status) for r in doc.results] == [("dcgmi", ("n1",), "ok"),
                                                                              ("dcgmi", ("n2",), "ok")]
    assert doc.results[0].test.argv[-1] == "2"
    findings = probe_findings(load_capture(capture.root), doc)
    assert sorted((f.kind, f.host, f.component, str(f.severity)) for f in findings) == [
        ("dcgm-health", "n1", "gpu:3", "major"), ("dcgm-health", "n2", "gpu:3", "major")]
    assert "uncorrectable memory errors" in findings[0].summary


def test_gpu_stage_without_dcgm_is_no_finding(tmp_path):
    capture = _capture(tmp_path / "cap", ["n1"])
    doc = run_probe(capture, LoopbackExec(tools_path=str(tmp_path)), _opts(stages=("gpu",)))
    from fabricase.analysis.probe import probe_findings

    if shutil.which("dcgmi"):
        pytest.skip("DCGM is installed here")
    assert [r.status for r in doc.results] == ["ok"]
    assert probe_findings(load_capture(capture.root), doc) == []


def test_the_busbw_baseline_comes_from_the_captured_gpus(tmp_path):
    """8 H100 SXM per host in nvidia-smi -q -x: the bisection holds runs against the 8xH100 floor."""
    from fabricase.probe.stages import _busbw_baseline

    xml = ("<nvidia_smi_log><attached_gpus>8</attached_gpus>"
           + "<gpu><product_name>NVIDIA H100 80GB HBM3</product_name></gpu>" * 8 + "</nvidia_smi_log>")
    root = tmp_path / "cap"
    _capture(root, ["n1", "n2"])
    from fabricase.probe.store import NewItem, append_items

    for host in ("n1", "n2"):
        append_items(root, host, [NewItem("cmd:nvidia-smi-xml", xml.encode(), 0, "nvidia-smi -q -x")])
    from fabricase.probe.run import Probe

    probe = Probe(load_capture(root), LoopbackExec(), _opts(), on_result=None, stop=None)
    expected, basis = _busbw_baseline(probe)
    assert expected == 360.0 and "H100" in basis
    pcie = xml.replace("HBM3", "PCIe")
    for host in ("n1", "n2"):
        append_items(root, host, [NewItem("cmd:nvidia-smi-xml", pcie.encode(), 0, "nvidia-smi -q -x")])
    assert _busbw_baseline(Probe(load_capture(root), LoopbackExec(), _opts(), on_result=None, stop=None)) == (
        None, None)
    given = Probe(load_capture(root), LoopbackExec(), _opts(expect_busbw=45.0), on_result=None, stop=None)
    assert _busbw_baseline(given) == (45.0, "90% of the given 45 GB/s")


def test_a_stage_with_nothing_to_test_says_why(tmp_path):
    """--test rdma on hosts without RDMA and no --rdma-device: nothing is tested, and the text says so."""
    from fabricase.analysis.probe_text import probe_text

    capture = _capture(tmp_path / "cap", ["n1", "n2"])
    doc = run_probe(capture, LoopbackExec(), _opts(stages=("rdma",)))
    assert doc.results == [] and "no RDMA rail" in doc.notes["rdma"]
    lines = probe_text(load_capture(capture.root))
    assert lines[0] == "nothing was tested"
    assert "not run: rdma: no RDMA rail on every host (capture) and none given (--rdma-device)" in " ".join(
        " ".join(lines).split())


def _ran(figures: dict[tuple[str, str], float]):
    """Ring tests of ib_write_bw that ran to their end with these figures (Gb/s), as the run holds them."""
    from fabricase.probe.exec import Outcome
    from fabricase.probe.model import ProbeTest
    from probe.test_probe_analysis import pair_output

    out = []
    for n, ((server, client), gbps) in enumerate(figures.items()):
        test = ProbeTest(f"r1-ib_write_bw-{n:02d}", "ib_write_bw", "pairs", 1, (server, client), rail=0,
                         devices=("mlx5_0", "mlx5_0"))
        out.append((test, Outcome(client, "ok", 0, pair_output(test, gbps).encode(), b"", 5.0, "2026-12-04T00:00Z")))
    return out


def test_only_the_pairs_slow_among_a_fabric_below_its_expected_rate_run_again():
    """Every pair below 90% of the expected 400 Gb/s (a fabric slower than its ports, a wrong --expect-gbps): the
    analysis then judges the pairs against one another, and the run ran every pair a second time."""
    from fabricase.probe.stages import _slow_figures

    hosts = [f"probe-h{i}" for i in range(1, 9)]
    ring = {(hosts[i], hosts[(i + 1) % 8]): (60.0 if "probe-h7" in (hosts[i], hosts[(i + 1) % 8]) else 300.0)
            for i in range(8)}
    again = _slow_figures(_ran(ring), 400.0)
    assert sorted(t.hosts for t in again) == [("probe-h6", "probe-h7"), ("probe-h7", "probe-h8")]
    assert _slow_figures(_ran(dict.fromkeys(ring, 300.0)), 400.0) == []  # alike: none stands out
    # Above the expected rate but one: that one, as before.
    fine = {pair: 390.0 for pair in ring} | {("probe-h1", "probe-h2"): 200.0}
    assert [t.hosts for t in _slow_figures(_ran(fine), 400.0)] == [("probe-h1", "probe-h2")]
