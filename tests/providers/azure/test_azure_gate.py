"""Issue 14, at the bytes level: no secret reaches Azure through any of the Azure provider's outbound methods.

Fresh random secrets (desks/fakes.py `plant`) go into the draft's title and body, the bundle file, a comment, an
attach note and file, a resolve note, a reopen note and the findings of a Guest Health report. The real SDKs
(azure-mgmt-support, azure-core's ARM pipeline) and httpx then talk HTTPS to the local ARM (azure_fake_arm), which
keeps every request as it arrived (`ArmState.wire`; file chunks are base64 in JSON and are read decoded too). No
secret may be in any of them, each place's canary and `[REDACTED:` must be. With the gate bypassed (`gate.text`
made the identity) every place must leak."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fabricase.models import Finding, Placement, Severity, TicketDraft
from fabricase.redact import gate

sys.path.insert(0, str(Path(__file__).parents[1]))
from desks.fakes import assert_wire, plant_all  # noqa: E402
from faulty_fleet import host_report  # noqa: E402

SEED = 14
PLACES = ("title", "body", "bundle", "comment", "attach-note", "attach-file", "resolve-note", "reopen-note",
          "findings")


@pytest.mark.parametrize("gated", [True, False], ids=["gated", "gate-bypassed"])
def test_no_secret_reaches_azure_in_any_request(provider, arm, tmp_path, monkeypatch, gated):
    if not gated:
        monkeypatch.setattr(gate, "text", lambda value: value)
    planted = plant_all(SEED, PLACES)
    rid = arm.add_vm("gpu002", fault_domain=1)
    bundle = tmp_path / "FC-1-evidence.txt"
    bundle.write_text(planted["bundle"].text)
    log = tmp_path / "nccl.log"
    log.write_text(planted["attach-file"].text)
    draft = TicketDraft(provider="azure", title=planted["title"].line, body=planted["body"].text,
                        severity=Severity.MAJOR, hosts=["gpu002"], components=["rdma:mlx5_0/1"], bundle_id="cd" * 32)
    placement = Placement(host="gpu002", provider="azure", instance_id=rid, region="eastus2",
                          extra={"physical_host_name": "GGBB002"})
    findings = [Finding(kind="rdma-link-flap", severity=Severity.MAJOR, host="gpu002", component="rdma:mlx5_0/1",
                        summary=summary) for summary in planted["findings"].summaries()]

    case_id = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle).case_id
    provider.comment(case_id, planted["comment"].text)
    provider.attach(case_id, [log], planted["attach-note"].text)
    provider.resolve_case(case_id, planted["resolve-note"].text)
    provider.reopen_case(case_id, planted["reopen-note"].text)
    provider.report_faulty_host(placement, host_report(placement, findings))  # the findings' text as suspects'

    workspace = arm.state.tickets[case_id]["properties"]["fileWorkspaceName"]
    assert sorted(arm.state.workspaces[workspace]) == sorted([bundle.name, log.name])
    assert_wire(arm.state.wire, planted, gated=gated)
