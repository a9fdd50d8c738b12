"""One bad host never stops a fleet: a host whose items make a parser, a rule or the per-host hook raise is
marked failed (`analysis: ...`, naming the stage, the item read last and the line), left out of fleet
statistics, and the rest of the fleet is analyzed as before."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from fabricase import analysis
from fabricase.analysis import Analyzer, HostAnalysisError, analyze, analyze_host
from fabricase.capturedir import load_capture
from fabricase.models import HostStatus
from fabricase.pipeline import diagnose_capture

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import bench_capture_fuzz as fuzz  # noqa: E402


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fuzz.build_capture(tmp_path_factory.mktemp("fleet") / "pristine")


@pytest.fixture
def fleet(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "capture"))


def _by_host(findings) -> dict[str | None, list[tuple[str, str, str]]]:
    out: dict[str | None, list[tuple[str, str, str]]] = {}
    for f in findings:
        out.setdefault(f.host, []).append((f.kind, f.component, str(f.severity)))
    return out


def _five_thousand_digits(fleet: Path) -> None:
    """gpu001's counters (an RDMA port's symbol errors, every NVLink counter) read with 5,000 digits."""
    fuzz.rewrite_item(fleet, "gpu001", lambda fi: fi.source.endswith("mlx5_0/ports/1/counters/symbol_error")
                      and fi.snapshot == 1, b"9" * 5000 + b"\n")
    fuzz.rewrite_item(fleet, "gpu001", lambda fi: fi.source == "cmd:nvlink-errors" and fi.snapshot == 1,
                      lambda text: re.sub(rb"\b\d+\b", b"9" * 5000, text))


def test_a_host_with_a_5000_digit_counter_does_not_stop_the_fleet(fleet):
    before = _by_host(diagnose_capture(load_capture(fleet)).findings)
    assert before.get("gpu002") and before.get("gpu003")  # the fleet's real faults: symbol errors, an Xid 79
    _five_thousand_digits(fleet)
    capture = load_capture(fleet)
    result = diagnose_capture(capture)
    after = _by_host(result.findings)
    assert after["gpu002"] == before["gpu002"] and after["gpu003"] == before["gpu003"]
    gpu001 = capture.host("gpu001")
    # Either a parser reads it as what it is (helper parsers record an error), or the host fails, named.
    assert gpu001.status == HostStatus.OK or gpu001.reason.startswith("analysis: ")
    outcome = {h.host: h for h in result.diagnosis.hosts}["gpu001"]
    assert (outcome.status, outcome.reason) == (str(gpu001.status), gpu001.reason)


def _odd_rule(hc, samples):
    """A rule that raises on odd data, as a rule with a bug would on a host nobody tested."""
    text = hc.text("/sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error", 1)
    if hc.host == "gpu002":
        int(text.strip() + "x")  # ValueError on this host only
    return []


@pytest.fixture
def odd_rule(monkeypatch):
    monkeypatch.setattr(analysis, "ANALYZERS", (*analysis.ANALYZERS, Analyzer("odd", lambda hc: [], (_odd_rule,))))


def test_a_rule_raising_on_one_host_fails_that_host_and_the_rest_is_analyzed(fleet, odd_rule):
    samples, hardware = {}, {}
    capture = load_capture(fleet)
    findings = analyze(capture, samples_out=samples, per_host=lambda hc: hc.host, per_host_out=hardware)
    gpu002 = capture.host("gpu002")
    assert gpu002.status == HostStatus.FAILED
    assert re.fullmatch(
        r"analysis: odd rule _odd_rule: ValueError: invalid literal for int\(\) with base 10: '\d+x' "
        r"\(after reading /sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error \(snapshot 1\)\)", gpu002.reason)
    # Its findings, samples and hook result are left out (fleet statistics skip it); the others are intact. The
    # job's NCCL log, read apart from the host's items, still blames gpu002's port.
    by_host = _by_host(findings)
    assert [kind for kind, _, _ in by_host["gpu002"]] == ["nccl-nic-errors"]
    assert by_host["gpu003"] == [("nvidia-xid", "pcie:0000:3b:00", "critical")]
    assert sorted(samples) == sorted(hardware) == ["gpu001", "gpu003"]
    assert [h.status for h in capture.hosts] == [HostStatus.OK, HostStatus.FAILED, HostStatus.OK]


def test_the_failure_names_the_fabricase_line_that_raised(fleet, monkeypatch):
    from fabricase.analysis import rdma

    def broken(hc):
        if hc.host == "gpu003":
            raise RecursionError("maximum recursion depth exceeded")
        return real(hc)

    real = rdma.samples
    analyzers = tuple(Analyzer(a.name, broken, a.rules) if a.name == "rdma" else a for a in analysis.ANALYZERS)
    monkeypatch.setattr(analysis, "ANALYZERS", analyzers)
    capture = load_capture(fleet)
    result = diagnose_capture(capture)
    reason = capture.host("gpu003").reason
    assert reason.startswith("analysis: rdma samples: RecursionError: maximum recursion depth exceeded")
    assert {f.host for f in result.findings} - {None} == {"gpu002"}
    assert "gpu003" in {h.host for h in result.diagnosis.hosts_not_captured}


def test_a_per_host_hook_raising_fails_its_host(fleet):
    def hook(hc):
        if hc.host == "gpu001":
            raise KeyError("odd")
        return hc.host

    out = {}
    capture = load_capture(fleet)
    analyze(capture, per_host=hook, per_host_out=out)
    assert capture.host("gpu001").reason.startswith("analysis: per-host hook: KeyError: 'odd'")
    assert sorted(out) == ["gpu002", "gpu003"]


def test_a_host_failed_in_capture_keeps_its_capture_reason_and_analysis_says_it_once(fleet, odd_rule):
    capture = load_capture(fleet)
    gpu002 = capture.host("gpu002")
    gpu002.status, gpu002.reason = HostStatus.PARTIAL, "connection lost after 9000 bytes"
    analyze(capture)
    first = gpu002.reason
    assert first.startswith("analysis: odd rule _odd_rule: ValueError")
    assert first.endswith("; capture: partial: connection lost after 9000 bytes")
    analyze(capture)  # again (the bundle, after the terminal): the same one line
    assert gpu002.reason == first and gpu002.status == HostStatus.FAILED


def test_analyze_host_raises_one_line_naming_the_host(fleet, odd_rule):
    hc = load_capture(fleet).host("gpu002")
    with pytest.raises(HostAnalysisError) as info:
        analyze_host(hc)
    assert str(info.value).startswith("gpu002: analysis: odd rule _odd_rule: ValueError")
    assert "\n" not in str(info.value) and info.value.stage == "odd rule _odd_rule"


def test_keyboard_interrupt_is_not_taken_for_a_bad_host(fleet, monkeypatch):
    def interrupted(hc, samples):
        raise KeyboardInterrupt

    monkeypatch.setattr(analysis, "ANALYZERS", (Analyzer("ctrl-c", lambda hc: [], (interrupted,)),))
    with pytest.raises(KeyboardInterrupt):
        analyze(load_capture(fleet))
