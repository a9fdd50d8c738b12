"""Issue 14, at the bytes level: no secret reaches AWS through any of the provider's outbound methods.

Fresh random secrets (desks/fakes.py `plant`) go into the draft's title and body, the bundle file, a comment, an
attach note and file, a resolve note, a reopen note and the findings of a faulty-host report. The real boto3 path
then runs (moto over HTTP, the Stubber for what moto lacks), and every request is read as bytes
(awsfakes.record_wire; attachment data is base64 in JSON, EC2's form bodies are percent-encoded: both are read
decoded too). No secret may be in any of them, each place's canary and `[REDACTED:` must be.

The same run with the gate bypassed (`gate.text` made the identity) must see every place leak: the check can fail,
and no place is left out of it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from awsfakes import record_wire, stub_codes, stub_upload_links, write_config

from fabricase.models import Finding, Placement, Severity, TicketDraft
from fabricase.providers.aws import AwsProvider
from fabricase.redact import gate

sys.path.insert(0, str(Path(__file__).parents[1]))
from desks.fakes import assert_wire, plant_all  # noqa: E402
from faulty_fleet import host_report  # noqa: E402

SEED = 14
PLACES = ("title", "body", "bundle", "comment", "attach-note", "attach-file", "resolve-note", "reopen-note",
          "findings")


@pytest.mark.parametrize("gated", [True, False], ids=["gated", "gate-bypassed"])
def test_no_secret_reaches_aws_in_any_request(provider, clients, moto, tmp_path, monkeypatch, gated):
    if not gated:
        monkeypatch.setattr(gate, "text", lambda value: value)
    planted = plant_all(SEED, PLACES)
    wires = [record_wire(client) for client in clients.clients.values()]
    support, ec2 = clients.stub("support"), clients.stub("ec2")
    bundle = tmp_path / "FC-1-evidence.txt"
    bundle.write_text(planted["bundle"].text)
    log = tmp_path / "nccl.log"
    log.write_text(planted["attach-file"].text)
    draft = TicketDraft(provider="aws", title=planted["title"].line, body=planted["body"].text,
                        severity=Severity.MAJOR, hosts=["gpu001"], components=["rdma:mlx5_0/1"])
    placement = Placement(host="gpu001", provider="aws", instance_id="i-0123456789abcdef0", region="us-east-1")
    findings = [Finding(kind="rdma-symbol-errors", severity=Severity.MAJOR, host="gpu001", component="rdma:mlx5_0/1",
                        summary=summary) for summary in planted["findings"].summaries()]

    stub_codes(clients)
    support.add_response("add_attachments_to_set", {"attachmentSetId": "as-1"}, None)
    case_id = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle).case_id
    support.add_response("add_communication_to_case", {"result": True}, None)
    provider.comment(case_id, planted["comment"].text)
    support.add_response("add_attachments_to_set", {"attachmentSetId": "as-2"}, None)
    support.add_response("add_communication_to_case", {"result": True}, None)
    provider.attach(case_id, [log], planted["attach-note"].text)
    support.add_response("add_communication_to_case", {"result": True}, None)
    provider.resolve_case(case_id, planted["resolve-note"].text)  # the note as a reply, then ResolveCase (moto)
    support.add_response("add_communication_to_case", {"result": True}, None)
    provider.reopen_case(case_id, planted["reopen-note"].text)
    ec2.add_response("report_instance_status", {}, None)
    provider.report_faulty_host(placement, host_report(placement, findings))  # the findings' text as suspects'
    clients.assert_no_pending()

    assert_wire([request for w in wires for request in w], planted, gated=gated)


@pytest.mark.parametrize("gated", [True, False], ids=["gated", "gate-bypassed"])
def test_no_secret_reaches_aws_by_upload_links(paths, clients, moto, uploads, tmp_path, monkeypatch, gated):
    """The other way files go: GetAttachmentUploadLinks, then PUTs of the parts to presigned URLs (the local
    upload server keeps each body as it arrived)."""
    if not gated:
        monkeypatch.setattr(gate, "text", lambda value: value)
    write_config(paths.config, moto, attachments="upload-links")
    provider = AwsProvider(paths, sleep=lambda s: None)
    planted = plant_all(SEED + 1, ("title", "body", "bundle", "attach-note", "attach-file"))
    wires = [record_wire(client) for client in clients.clients.values()]
    bundle = tmp_path / "FC-2-evidence.txt"
    bundle.write_text(planted["bundle"].text)
    log = tmp_path / "nccl.log"
    log.write_text(planted["attach-file"].text)
    draft = TicketDraft(provider="aws", title=planted["title"].line, body=planted["body"].text,
                        severity=Severity.MAJOR, hosts=["gpu001"], components=["rdma:mlx5_0/1"])

    stub_codes(clients)
    # the size the links are asked for is the size of what is sent: the gate's copy
    size = len(gate.text(bundle.read_text()).encode())
    stub_upload_links(clients, uploads, name=bundle.name, size=size, part_bytes=512, upload_id="upl-1")
    case_id = provider.file_case(escalation_id="FC-2", draft=draft, bundle_path=bundle).case_id
    size = len(gate.text(log.read_text()).encode())
    stub_upload_links(clients, uploads, name=log.name, size=size, part_bytes=512, upload_id="upl-2")
    clients.stub("support").add_response("add_communication_to_case", {"result": True}, None)
    provider.attach(case_id, [log], planted["attach-note"].text)
    clients.assert_no_pending()

    # each file's parts joined again, so that a secret cut at a part boundary is still seen
    parts = sorted(uploads.bodies, key=lambda path: (path.rsplit("/part", 1)[0], int(path.rsplit("part", 1)[1])))
    puts = [f"PUT {upload}\n".encode() + b"".join(uploads.bodies[p] for p in parts if p.startswith(upload + "/"))
            for upload in ("/upl-1", "/upl-2")]
    assert [put.partition(b"\n")[2] for put in puts] == [gate.text(f.read_text()).encode() for f in (bundle, log)]
    assert_wire([request for w in wires for request in w] + puts, planted, gated=gated)
