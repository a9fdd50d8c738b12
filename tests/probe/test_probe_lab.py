"""`fabricase probe --via ssh` on the 8-host probe lab (conftest.py): real sshd per host, a real slow link
(tc tbf on one host's veth, both directions), real iperf3, and the stand-ins for ib_write_bw, mpirun and
all_reduce_perf (standins/: no RDMA or GPU here), which move real bytes over the lab's links, so that the slow
link slows exactly the tests that cross it.

The acceptance of issue 17: pairwise tests and the bisection name the slow host, and only it; the same with the
slow link moved to another host; no suspect without a slow link. Then the guard rails: Ctrl-C keeps what
finished and leaves nothing running on the hosts, the budget stops the probe, the ticket and report show it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase.capturedir import load_capture
from fabricase.cli import cli
from fabricase.probe.model import ProbeDoc

SLOW_RATE = "20mbit"
PROBE_KINDS = ("probe-slow-host", "probe-slow-nic", "probe-slow-path", "probe-below-expected", "probe-collective-slow")


def _argv(lab, out: Path, *extra: str) -> list[str]:
    ssh = [x for o in lab.ssh_options for x in ("--ssh-option", o)]
    return ["probe", "--hosts", ",".join(lab.hosts), "--via", "ssh", *ssh, "--tools-path", lab.tools_path,
            "--interval", "0", "--collector", "identity", "--collector", "netdev",
            "--rdma-device", "standin0", "--duration", "1", "--nccl-sizes", "256K:1M", "--nccl-iters", "3",
            "--test-timeout", "60", "--budget", "5m", "-o", str(out), *extra]


def _probe(lab, tmp_path: Path, name: str, *extra: str) -> tuple[dict, int]:
    out = tmp_path / name
    result = CliRunner().invoke(cli, [*_argv(lab, out, *extra), "--json"], catch_exceptions=False)
    assert result.output.strip().startswith("{"), result.output[-2000:]
    return json.loads(result.output), result.exit_code


def _suspects(doc: dict) -> dict[str, set[str]]:
    """probe finding kind -> the hosts (or components) it names."""
    out: dict[str, set[str]] = {}
    for f in doc["findings"]:
        if f["kind"] in PROBE_KINDS:
            out.setdefault(f["kind"], set()).add(f["host"] or f["component"])
    return out


def _ring_then_slow_ones_again(results, culprit: str) -> None:
    """8 ring edges, both directions (16 tests), then each pair that measured slow once more, after the ring: the
    culprit's among them (a healthy pair may be there too, from noise, and is cleared by its second run)."""
    firsts = [r for r in results if r.test.parent is None]
    seconds = [r for r in results if r.test.parent is not None]
    assert len(firsts) == 16 and {r.test.parent for r in seconds} <= {r.test.id for r in firsts}
    assert any(culprit in r.test.hosts for r in seconds)
    assert min(r.test.round for r in seconds) > max(r.test.round for r in firsts)


def _left_running(lab) -> list:
    return [p for i in range(1, len(lab.hosts) + 1) for p in lab.probe_processes(i)]


@pytest.mark.parametrize("slow", [3, 6])
def test_pairs_and_bisection_name_the_slow_host(probe_lab, tmp_path, slow):
    lab = probe_lab
    with lab.slow_link(slow, SLOW_RATE):
        doc, code = _probe(lab, tmp_path, f"slow{slow}", "--test", "rdma", "--test", "nccl", "--bisect")
    assert code == 0, doc["probe"]
    culprit = lab.hosts[slow - 1]
    assert _suspects(doc) == {"probe-slow-host": {culprit}}
    finding = next(f for f in doc["findings"] if f["kind"] == "probe-slow-host")
    assert "bisection" in finding["summary"] and "partner" in finding["summary"]
    probe = ProbeDoc.from_dict(doc["probe"])
    bisect = [r for r in probe.results if r.test.kind == "all_reduce_perf"]
    rounds = sorted({r.test.round for r in bisect})
    assert 3 <= len(rounds) <= 6, rounds  # 8 hosts: the whole, halves, quarters, the finishing pairs
    assert probe.notes["bisection"]["suspects"] == [culprit]
    pairs = [r for r in probe.results if r.test.kind == "ib_write_bw"]
    assert all(r.status == "ok" for r in pairs)
    _ring_then_slow_ones_again(pairs, culprit)
    assert not _left_running(lab)
    capture = load_capture(Path(doc["capture_dir"]))
    item = capture.host(culprit).item(f"cmd:perf-probe-{pairs[0].test.id}") or capture.host(
        pairs[0].test.reporter).item(f"cmd:perf-probe-{pairs[0].test.id}")
    assert item is not None and item.bytes > 0


def test_no_slow_link_no_suspect(probe_lab, tmp_path):
    doc, code = _probe(probe_lab, tmp_path, "clean", "--test", "rdma", "--test", "nccl", "--bisect")
    assert code == 0, doc["probe"]
    if _suspects(doc):
        # The lab's hosts share 2 cores: a healthy pair can measure under half its peers once (CI saw it twice in
        # many runs). A false alarm that is real comes back when measured again; scheduling noise does not.
        doc, code = _probe(probe_lab, tmp_path, "clean-again", "--test", "rdma", "--test", "nccl", "--bisect")
        assert code == 0, doc["probe"]
    assert _suspects(doc) == {}
    assert ProbeDoc.from_dict(doc["probe"]).notes["bisection"]["suspects"] == []


def test_iperf3_pairs_name_the_slow_host(probe_lab, tmp_path):
    lab = probe_lab
    with lab.slow_link(5, SLOW_RATE):
        doc, code = _probe(lab, tmp_path, "tcp", "--test", "tcp")
    assert code == 0, doc["probe"]
    assert _suspects(doc) == {"probe-slow-host": {lab.hosts[4]}}
    tests = [r for r in ProbeDoc.from_dict(doc["probe"]).results if r.test.kind == "iperf3"]
    _ring_then_slow_ones_again(tests, lab.hosts[4])


def test_terminal_ticket_and_report_show_the_bisection(probe_lab, tmp_path):
    lab = probe_lab
    out = tmp_path / "cap"
    with lab.slow_link(2, SLOW_RATE):
        result = CliRunner().invoke(cli, _argv(lab, out, "--test", "nccl", "--bisect"), catch_exceptions=False)
    assert result.exit_code == 0, result.output[-3000:]
    lines = [line for line in result.output.splitlines() if str(tmp_path) not in line]  # a path is as long as it is
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert lab.hosts[1] in result.output and "round" in result.output.lower()
    home = tmp_path / "home"
    env = {"FABRICASE_HOME": str(home)}
    opened = CliRunner(env=env).invoke(cli, ["open", "--replay", str(out), "--symptom", "allreduce slow",
                                             "--provider", "static", "--dry-run", "--json"], catch_exceptions=False)
    assert opened.exit_code == 0, opened.output[-3000:]
    opened_doc = json.loads(opened.output)
    ticket = Path(opened_doc["ticket_path"]).read_text()
    assert "Active tests" in ticket and lab.hosts[1] in ticket
    with tarfile.open(opened_doc["bundle_path"]) as tar:
        report = next(m for m in tar.getmembers() if m.name.endswith("report.html"))
        html = tar.extractfile(report).read().decode()
        assert any(m.name.endswith("probe.json") for m in tar.getmembers())
    assert "Active tests" in html


def test_open_probe_files_the_probe_with_the_capture(probe_lab, tmp_path):
    """`open --probe`: one command captures, probes, bundles and drafts (dry run): the ticket names the host."""
    lab = probe_lab
    ssh = [x for o in lab.ssh_options for x in ("--ssh-option", o)]
    argv = ["open", "--hosts", ",".join(lab.hosts), "--via", "ssh", *ssh, "--interval", "0", "--collector", "netdev",
            "--probe", "--test", "tcp", "--duration", "1", "--tools-path", lab.tools_path, "--symptom",
            "allreduce 40% slower", "--provider", "static", "--dry-run", "--json"]
    with lab.slow_link(7, SLOW_RATE):
        result = CliRunner(env={"FABRICASE_HOME": str(tmp_path / "home")}).invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output[-3000:]
    doc = json.loads(result.output)
    assert [(f["kind"], f["host"]) for f in doc["findings"] if f["kind"].startswith("probe-")] == [
        ("probe-slow-host", lab.hosts[6])]
    assert [(s["host"], s["verdict"]) for s in doc["suspects"]] == [(lab.hosts[6], "low-bandwidth")]
    ticket = Path(doc["ticket_path"]).read_text()
    assert "Active tests (fabricase probe)" in ticket and f"slow host {lab.hosts[6]}" in ticket
    assert not _left_running(lab)


def test_ctrl_c_keeps_what_finished_and_leaves_nothing_running(probe_lab, tmp_path):
    lab = probe_lab
    out = tmp_path / "interrupted"
    argv = [sys.executable, "-m", "fabricase", *_argv(lab, out, "--test", "rdma", "--duration", "3")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    try:
        deadline = time.monotonic() + 60
        # Interrupt in round 2: a round of 3 s tests takes about 5.5 s (server start, test, collection, sweep)
        # from the moment its first process shows on a host.
        while time.monotonic() < deadline and not _left_running(lab):
            time.sleep(0.1)
        time.sleep(9)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()[-2000:]
    assert not _left_running(lab)
    doc = ProbeDoc.from_dict(json.loads((out / "probe.json").read_text()))
    assert doc.interrupted and doc.stopped_reason.startswith("interrupted")
    finished = [r for r in doc.results if r.status == "ok"]
    assert finished, [r.status for r in doc.results]
    capture = load_capture(out)
    for r in finished:  # what finished is kept, item and all
        assert capture.host(r.test.reporter).item(f"cmd:perf-probe-{r.test.id}") is not None


def test_budget_stops_the_probe_and_says_so(probe_lab, tmp_path):
    doc, code = _probe(probe_lab, tmp_path, "budget", "--test", "rdma", "--budget", "10s")
    probe = ProbeDoc.from_dict(doc["probe"])
    assert code == 3
    assert probe.interrupted and "time budget of 10 s reached" in (probe.stopped_reason or "")
    assert 0 < len(probe.results) < 16 and all(r.status == "ok" for r in probe.results)
    assert probe.notes["not_started"] == 16 - len(probe.results)
    assert f"{16 - len(probe.results)} planned tests not started" in probe.stopped_reason
