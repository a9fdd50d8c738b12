"""Issue 15 item 6: the provider facts fabricase fetched are in the provider's ticket, in a "Provider's view"
block per host with a suspect (AWS Capacity Block interconnect status, GCP reservation block and sub-block
health, the Azure physical host), and item 7: the ticket labels both the bundle id and the file's sha256."""

from __future__ import annotations

import dataclasses

import pytest
import ticket_cases as tc

from fabricase.bundler.body import markdown_sections
from fabricase.models import Severity
from fabricase.templates import render_draft
from fabricase.templates.facts import host_facts
from fabricase.templates.ruled_out import checks_run

VIEW = "Provider's view"


def _draft(desk: str, placements, **overrides):
    kwargs = dict(provider=desk, symptom=tc.SYMPTOM, severity=Severity.MAJOR,
                  findings=tc.findings(tc.shared_component(desk)), hosts=tc.hosts(), placements=placements,
                  bundle_id=tc.BUNDLE_ID, capture_created_at=tc.CREATED_AT, escalation_id=tc.ESCALATION,
                  checks=checks_run(tc.host_captures()))
    return render_draft(**(kwargs | overrides))


def _with_extra(placements, extra_of):
    return [dataclasses.replace(p, extra={**p.extra, **extra_of(p)}) for p in placements]


def _view(body: str) -> str:
    return " ".join(dict(markdown_sections(body)).get(VIEW, "").split())


def test_aws_ticket_says_the_capacity_block_interconnect_status():
    status = {"gpu001": "impaired", "gpu002": "ok", "gpu003": "impaired"}
    placements = _with_extra(tc.placements("aws"), lambda p: {"capacity_block_interconnect": status[p.host],
                                                             "state": "running"})
    view = _view(_draft("aws", placements).body)
    assert "- gpu001 (i-0a1b2c3d4e5f60001): Capacity Block cr-0c5e7a9b1d3f5a7c9 interconnect: impaired" in view
    assert "gpu002 (i-0a1b2c3d4e5f60002): Capacity Block cr-0c5e7a9b1d3f5a7c9 interconnect: ok" in view
    assert "gpu003" not in view  # no suspect on it: not in the block
    assert "running" not in view  # a running instance is nothing to read


def test_gcp_ticket_says_the_block_and_sub_block_health():
    def extra(p):
        return {"reservation_block": "0b6e5d12", "reservation_sub_block": p.topology[-1].split(":")[1],
                "reservation_block_health": "DEGRADED (healthy sub block 7, degraded sub block 1)",
                "reservation_sub_block_health": "DEGRADED (healthy host 15, degraded host 1)"}

    view = _view(_draft("gcp", _with_extra(tc.placements("gcp"), extra)).body)
    assert ("- gpu001 (a3u-train-001): reservation block 0b6e5d12 health: DEGRADED (healthy sub block 7, degraded "
            "sub block 1); sub-block 3f9c1e07 health: DEGRADED (healthy host 15, degraded host 1)") in view
    assert "gpu002 (a3u-train-002)" in view and "gpu003" not in view


def test_azure_ticket_says_the_physical_host_and_a_stopped_vm():
    placements = _with_extra(tc.placements("azure"),
                             lambda p: {"power_state": "PowerState/deallocated"} if p.host == "gpu002" else {})
    view = _view(_draft("azure", placements).body)
    assert "- gpu001: physical host GZ21B0701C3D4E" in view
    assert "- gpu002: physical host GZ21B0702C3D4E; instance state: deallocated" in view
    assert "gpu003" not in view


def test_a_lookup_that_found_nothing_is_said():
    from fabricase.templates.facts import provider_view

    p = dataclasses.replace(tc.placements("gcp")[0], extra={"locate_note": "no instance 'gpu001' in ml-train-prod"})
    assert provider_view(host_facts("gpu001", "ok", p)) == ["not located: no instance 'gpu001' in ml-train-prod"]


@pytest.mark.parametrize("desk", tc.DESKS)
def test_no_provider_facts_no_block(desk):
    plain = [dataclasses.replace(p, extra={k: v for k, v in p.extra.items() if k != "physical_host_name"})
             for p in tc.placements(desk)]
    assert VIEW not in _draft(desk, plain).body


@pytest.mark.parametrize("desk", tc.DESKS)
def test_the_ticket_labels_the_bundle_id_and_the_file_sha256(desk):
    file_sha = "a7" * 32
    body = " ".join(_draft(desk, tc.placements(desk), bundle_sha256=file_sha).body.split())
    assert f"bundle id (manifest sha256): {tc.BUNDLE_ID}" in body
    assert f"file sha256: {file_sha}" in body
    # Without the file (the ticket inside the bundle cannot know either), neither is claimed.
    inner = _draft(desk, tc.placements(desk), bundle_id=None).body
    assert "manifest sha256" not in inner and "file sha256" not in inner


@pytest.mark.parametrize("desk", tc.DESKS)
def test_pseudonymized_ticket_and_summary_have_no_host_in_folded_form(desk):
    """Issue 15 item 7: each desk's ticket and summary.md, through the flow's redaction (escalate.redact_draft),
    name no host, folded (`gpu[001-002,004]`, in tables too) or alone."""
    import random
    import re

    import suspect_cases as sc
    from ClusterShell.NodeSet import NodeSet

    from fabricase.escalate import redact_draft
    from fabricase.redact import Redactor

    d = render_draft(provider=desk, symptom=sc.SYMPTOM, severity=Severity.CRITICAL, findings=sc.findings(),
                     hosts=sc.hosts(), placements=sc.placements(), bundle_id=sc.BUNDLE_ID,
                     capture_created_at=sc.CREATED_AT, escalation_id=sc.ESCALATION, diagnosis=sc.diagnosis())
    hosts = [h["host"] for h in sc.hosts()]
    text = d.title + "\n" + d.body + "\n" + d.summary
    assert re.search(r"gpu\\?\[", text)  # the plain ticket folds them
    redactor = Redactor(pseudonymize=True, key=random.Random(15).randbytes(32), hosts=hosts)
    out = redact_draft(d, redactor)
    text = out.title + "\n" + out.body + "\n" + out.summary
    assert not [h for h in hosts if h in text]
    folded = [m.group(0) for m in re.finditer(r"[A-Za-z0-9_]+\\?\[[0-9,\-\\]+\]", text)
              if set(NodeSet(m.group(0).replace("\\", ""))) & set(hosts)]
    assert folded == []
    assert redactor.host_pseudonym(hosts[0]) in text or redactor.host_pseudonym(hosts[2]) in text
