"""fit_summary, and a 64-host escalation fitted to AWS: the summary attachment within 5 MB, the body within
8,000 characters. The fleet is the evaluation harness's (a real capture directory, analyzed for real) with a
bad leaf switch, plus many more findings on its ports, as a sick fleet gives."""

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
import harness  # noqa: E402


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
    scenario = next(s for s in harness.scenarios(64, 1, 0) if s.kind == "bad-switch")
    harness.build(scenario, folder, seed=3)
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

    assert len(draft.body) > aws.body_max_chars  # the full ticket does not fit: it must be cut
    body = fit_body(markdown_sections(draft.body), aws.body_max_chars)
    assert len(body) <= aws.body_max_chars == 8000
    first = draft.body.split("\n\n")[0]
    assert body.startswith(first) and "switch:leaf-000" in first
    assert "## Findings" in body
    assert body.split("\n")[-1].startswith("(Cut to the desk's 8000-character limit")
    full = set(draft.body.split("\n"))
    assert all(line in full for line in body.split("\n") if line.startswith("|"))


def test_gcp_body_keeps_more_than_aws(escalation):
    draft = escalation[0]
    aws = fit_body(markdown_sections(draft.body), DESK_LIMITS["aws"].body_max_chars)
    gcp = fit_body(markdown_sections(draft.body), DESK_LIMITS["gcp"].body_max_chars)
    assert len(aws) < len(gcp) <= 12_800
    assert gcp.startswith(aws.rpartition("\n\n")[0].rpartition("\n")[0])


ORDER = ("info findings", "evidence items", "hosts without a finding", "texts cut", "identities", "timeline entries",
         "counter rows", "lowest-ranked findings")


def test_detail_goes_in_order_and_is_named(escalation):
    summary = escalation[1]
    full = fit_summary(summary, None)
    assert json.loads(full.data)["complete"] and full.dropped == []
    dropped = {}
    for limit in (len(full.data) - 1, 200_000, 40_000, 8_000):
        fitted = fit_summary(summary, limit)
        doc = json.loads(fitted.data)
        assert len(fitted.data) <= limit and doc["dropped"] == fitted.dropped and not doc["complete"]
        assert doc["findings"][0]["component"] == "switch:leaf-000"  # the worst finding is the last to go
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
