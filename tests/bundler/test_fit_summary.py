"""fit_summary, and a 64-host escalation fitted to AWS: the summary attachment within 5 MB, the body within
8,000 characters. The fleet is the evaluation harness's (a real capture directory, analyzed for real) with a
bad leaf switch, plus many more findings on its ports, as a sick fleet gives: 521 findings, one suspect."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fabricase.bundler.body import fit_body, markdown_sections
from fabricase.bundler.limits import DESK_LIMITS
from fabricase.bundler.summary import SummaryInput, fit_summary
from fabricase.capturedir import load_capture
from fabricase.errors import BundleError
from fabricase.escalate import host_summaries, make_draft
from fabricase.models import Evidence, Finding, Placement, Severity
from fabricase.pipeline import analyze_capture
from fabricase.placements import inventory_placements, topology_of

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import fleetgen  # noqa: E402


def port_findings(hosts: list[str]) -> list[Finding]:
    """8 ports x 64 hosts of minor and info findings, six evidence items each."""
    out = []
    for i, host in enumerate(hosts):
        for port in range(8):
            evidence = [Evidence(f"rdma.counter_{k}", 40 + k + port, "errors", baseline=0,
                                 source=f"/sys/class/infiniband/mlx5_{port}/ports/1/counters/c{k}", snapshot=1)
                        for k in range(6)]
            out.append(Finding("rdma-symbol-errors", Severity.INFO if (i + port) % 2 else Severity.MINOR, host,
                               f"rdma:mlx5_{port}/1", f"mlx5_{port}/1: symbol_error +{40 + port} in 5 s on {host}",
                               evidence=evidence, confidence=0.5 + port / 100))
    return out


@pytest.fixture(scope="module")
def escalation(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet") / "capture"
    scenario = next(s for s in fleetgen.scenarios(64, 1, 0) if s.kind == "bad-switch")
    fleetgen.build(scenario, folder, seed=3)
    capture = load_capture(folder)
    placements = inventory_placements(folder / "inventory.json", [h.host for h in capture.hosts])
    findings = analyze_capture(capture, topology_of(placements))
    findings += port_findings([h.host for h in capture.hosts])
    draft = make_draft(capture, findings, provider="aws", symptom="allreduce busbw fell from 360 to 210 GB/s",
                       severity=Severity.MAJOR, placements=placements, bundle_id="ab" * 32, escalation_id="esc-7")
    summary = SummaryInput(title=draft.title, symptom="allreduce busbw fell from 360 to 210 GB/s", severity="major",
                           captured_at=capture.created_at, findings=findings, hosts=host_summaries(capture),
                           placements=placements, timeline=[(capture.created_at, "evidence captured on 64 hosts")],
                           bundle_id="ab" * 32, escalation_id="esc-7")
    return draft, summary, findings


def test_64_host_escalation_fits_aws(escalation):
    draft, summary, findings = escalation
    aws = DESK_LIMITS["aws"]
    assert len(findings) > 500
    fitted = fit_summary(summary, aws.attachment_max_bytes)
    assert len(fitted.data) <= aws.attachment_max_bytes == 5_000_000
    doc = json.loads(fitted.data)
    assert doc["complete"] and len(doc["findings"]) == len(findings)
    assert doc["findings"][0]["component"] == "switch:leaf-000"  # the worst first
    assert doc["hosts"]["captured"] == 64 and len(doc["topology"]) == 64
    assert [s["name"] for s in doc["suspects"]] == ["switch leaf-000"]  # the diagnosis, from the findings
    assert doc["findings_total"] == len(findings)

    # Built from the one suspect, not the 521 findings, the whole ticket fits: nothing is cut.
    assert len(draft.body) <= aws.body_max_chars == 8000
    assert fit_body(markdown_sections(draft.body), aws.body_max_chars) == draft.body.strip()
    assert "leaf-000" in draft.title and draft.body.startswith("1 suspect (shared) on 6 of 64 captured hosts")
    assert "## Findings" not in draft.body and "521 in the bundle's findings.json" in draft.body


def test_a_smaller_limit_keeps_less_of_the_same_ticket(escalation):
    draft = escalation[0]
    small = fit_body(markdown_sections(draft.body), 1200)
    large = fit_body(markdown_sections(draft.body), 2000)
    assert len(small) <= 1200 and len(small) < len(large) <= 2000
    assert large.startswith(small.rpartition("\n\n")[0].rpartition("\n")[0])


ORDER = ("info findings", "evidence items", "hosts without a finding", "texts cut", "identities", "timeline entries",
         "counter rows", "lowest-ranked findings", "counter rows of dropped", "least severe suspects")


def test_detail_goes_in_order_and_is_named(escalation):
    summary = escalation[1]
    full = fit_summary(summary, None)
    assert json.loads(full.data)["complete"] and full.dropped == []
    dropped = {}
    for limit in (len(full.data) - 1, 200_000, 40_000, 8_000):
        fitted = fit_summary(summary, limit)
        doc = json.loads(fitted.data)
        assert len(fitted.data) <= limit and doc["dropped"] == fitted.dropped and not doc["complete"]
        assert doc["suspects"][0]["name"] == "switch leaf-000"  # the suspects are the last to go
        assert doc["findings"] == [] or doc["findings"][0]["component"] == "switch:leaf-000"  # then the worst finding
        assert all(f["severity"] != "info" for f in doc["findings"])
        stages = [next(i for i, what in enumerate(ORDER) if what in line) for line in fitted.dropped]
        assert stages == sorted(stages)
        dropped[limit] = fitted.dropped
    assert dropped[len(full.data) - 1] == ["256 info findings"]
    assert dropped[200_000][1].endswith("evidence items beyond the first 3 of each finding")
    assert any("hosts without a finding" in d for d in dropped[8_000])
    assert any("lowest-ranked findings" in d for d in dropped[8_000])


def test_same_input_same_bytes(escalation):
    summary = escalation[1]
    assert fit_summary(summary, 50_000).data == fit_summary(summary, 50_000).data


def small(findings, **kw) -> SummaryInput:
    hosts = [{"host": f"gpu{i:03d}", "status": "ok", "reason": None, "identity": {"product": "p5"}} for i in range(4)]
    return SummaryInput(title="t", symptom="s", severity="major", captured_at="2026-11-30T00:00:00Z",
                        findings=findings, hosts=hosts, **kw)


def finding(host, component, severity=Severity.MAJOR, n_evidence=1):
    ev = [Evidence(f"m{k}", k, "errors", baseline=0) for k in range(n_evidence)]
    return Finding("k", severity, host, component, f"{component} on {host}", evidence=ev)


def test_counter_rows_go_with_their_findings():
    findings = [finding("gpu000", "rdma:mlx5_0/1"), finding("gpu001", "rdma:mlx5_1/1", Severity.INFO, 40)]
    counters = [{"host": "gpu000", "component": "rdma:mlx5_0/1", "metric": "symbol_error", "value": 40, "fleet": 0},
                {"host": "gpu001", "component": "rdma:mlx5_1/1", "metric": "symbol_error", "value": 2, "fleet": 0}]
    whole = fit_summary(small(findings, counters=counters), None)
    assert len(json.loads(whole.data)["counters"]) == 2
    fitted = fit_summary(small(findings, counters=counters), len(whole.data) - 1)
    doc = json.loads(fitted.data)
    assert [c["host"] for c in doc["counters"]] == ["gpu000"]
    assert fitted.dropped == ["1 info findings", "1 counter rows of dropped findings"]
    # a row of a kept finding's component stays even when the finding itself is cut down
    assert doc["findings"][0]["component"] == "rdma:mlx5_0/1"


def test_shared_component_keeps_the_hosts_under_it_as_suspects():
    placements = [Placement("gpu000", "static", topology=["switch:leaf-1"]),
                  Placement("gpu001", "static", topology=["switch:leaf-1"]),
                  Placement("gpu002", "static", topology=["switch:leaf-2"])]
    findings = [finding(None, "switch:leaf-1"), *(finding("gpu003", f"x{i}", Severity.INFO, 30) for i in range(30))]
    s = small(findings, placements=placements)
    without_info = fit_summary(s, len(fit_summary(s, None).data) - 1)
    assert without_info.dropped == ["30 info findings"]
    fitted = fit_summary(s, len(without_info.data) - 1)  # a byte less: the next detail must go
    assert fitted.dropped == ["30 info findings", "2 hosts without a finding (counted by status only)"]
    doc = json.loads(fitted.data)
    assert doc["findings"][0]["component"] == "switch:leaf-1"
    assert [h["host"] for h in doc["hosts"]["suspects"]] == ["gpu000", "gpu001"]
    assert [p["host"] for p in doc["topology"]] == ["gpu000", "gpu001"]
    assert doc["hosts"]["others"] == [] and doc["hosts"]["by_status"] == {"ok": 4}


def test_timeline_keeps_its_first_and_last_entries():
    timeline = [(f"2026-11-29T{h:02d}:00:00Z", "x" * 150) for h in range(24)]
    s = small([finding("gpu000", "a")], timeline=timeline)
    whole = fit_summary(s, None)
    doc = json.loads(fit_summary(s, len(whole.data) - 2000).data)
    kept = [e["at"] for e in doc["timeline"]]
    assert kept[0] == timeline[0][0] and kept[-1] == timeline[-1][0] and len(kept) < 24


def test_a_limit_too_small_for_the_header_is_one_line_error():
    with pytest.raises(BundleError, match="cannot hold even its header"):
        fit_summary(small([finding("gpu000", "a")]), 100)
    with pytest.raises(BundleError, match="number of bytes"):
        fit_summary(small([finding("gpu000", "a")]), "5MB")  # type: ignore[arg-type]


def _diagnosis(n: int):
    from fabricase.diagnosis import Background, Diagnosis, HostOutcome, Suspect

    suspects = [Suspect(id=f"S{i}", host=f"gpu{i:03d}", unit="nic-port", components=[f"rdma:mlx5_{i}/1"],
                        verdict="bad-link", verdict_text="bad link (cable, optic or switch port)",
                        severity=Severity.MAJOR, confidence=0.99, q_value=1e-9,
                        owner="operator" if i == n - 1 else "provider", action="Inspect or replace the cable " * 4,
                        evidence=[f"phy.symbol_errors_uncorrected +{40 + i} (8/s); fleet median 0/s, p99 0/s"] * 3,
                        identity={"pci": f"0000:{i:02x}:00.0"}, findings=[f"k@gpu{i:03d}/rdma:mlx5_{i}/1"])
                for i in range(n)]
    background = [Background("rdma.out_of_sequence", "rdma", 61, 128, 0.058)]
    return Diagnosis(suspects, background, [HostOutcome(f"gpu{i:03d}", "ok") for i in range(4)])


def test_the_summary_carries_the_suspects_of_every_owner_and_the_background():
    diagnosis = _diagnosis(3)
    doc = json.loads(fit_summary(small([finding("gpu000", "rdma:mlx5_0/1")], diagnosis=diagnosis), None).data)
    assert [s["id"] for s in doc["suspects"]] == ["S0", "S1", "S2"]
    assert doc["suspects"][2]["owner"] == "operator"  # not the provider's: the user's summary still has it
    assert doc["background"][0]["text"].startswith("out_of_sequence rose on 61 of 128 ports")
    assert doc["verdict"] == diagnosis.verdict_line


def test_without_a_diagnosis_the_summary_diagnoses_the_findings():
    doc = json.loads(fit_summary(small([finding("gpu000", "rdma:mlx5_0/1")]), None).data)
    assert [(s["host"], s["components"][0]) for s in doc["suspects"]] == [("gpu000", "rdma:mlx5_0/1")]


def test_suspects_go_last_and_are_counted():
    s = small([finding("gpu000", "rdma:mlx5_0/1", n_evidence=3)], diagnosis=_diagnosis(40))
    whole = fit_summary(s, None)
    fitted = fit_summary(s, len(whole.data) // 2)
    doc = json.loads(fitted.data)
    assert len(fitted.data) <= len(whole.data) // 2
    assert doc["findings"] == [] and 0 < len(doc["suspects"]) < 40
    assert fitted.dropped[-1].endswith("least severe suspects")
    assert [x["id"] for x in doc["suspects"]] == [f"S{i}" for i in range(len(doc["suspects"]))]  # the first kept
