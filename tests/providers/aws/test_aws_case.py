"""AWS Support cases: filed with the bundle attached (attachment set, upload links, the fallback), found again
instead of filed twice, read back, commented, resolved and reopened; valid codes cached; the dry-run plan."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from awsfakes import REGION, SERVICES, SEVERITIES, capture_params, stub_codes, stub_upload_links, write_config

from bundles import redacted_bundle
from fabricase.errors import ProviderError
from fabricase.models import EscalationState, Severity, TicketDraft
from fabricase.providers.aws import AwsProvider
from fabricase.providers.aws_support import pick_severity
from fabricase.templates.severity import desk_severity


def draft(severity: Severity = Severity.MAJOR) -> TicketDraft:
    return TicketDraft(provider="aws", title="[fabricase] mlx5_0/1: symbol_error +40 on 1 host",
                       body="Affected instances\n\nnetwork nodes nn-top > nn-mid > nn-a\n", severity=severity,
                       hosts=["gpu001"], components=["rdma:mlx5_0/1"])


def moto_cases(moto: str) -> list[dict]:
    support = boto3.client("support", region_name=REGION, endpoint_url=moto)
    return support.describe_cases(includeResolvedCases=True)["cases"]


def blob(path: Path, size: int) -> Path:
    """A file of `size` incompressible bytes, the same at every run: it goes through the gate as a file, and
    fresh random bytes could one day hold a match of the secret rules (changed by the gate) or the gzip magic."""
    path.write_bytes(random.Random(size).randbytes(size))
    return path


def real_bundle(tmp_path: Path, payload_bytes: int) -> Path:
    """A real bundle (it verifies, so it can be split) holding incompressible data."""
    return redacted_bundle(tmp_path / "FC-1-cap.tar.gz", payload=os.urandom(payload_bytes))


def test_lifecycle_filed_with_attachment_set_read_back_commented_resolved_reopened(provider, clients, moto,
                                                                                  tmp_path):
    bundle = blob(tmp_path / "FC-1-cap.tar.gz", 4096)
    stub_codes(clients)
    stub = clients.stub("support")
    stub.add_response("add_attachments_to_set", {"attachmentSetId": "as-1", "expiryTime": "2026-11-30T03:00:00Z"},
                      {"attachments": [{"fileName": bundle.name, "data": bundle.read_bytes()}]})
    created = capture_params(clients.clients["support"], "CreateCase")

    result = provider.file_case(escalation_id="FC-1", draft=draft(), bundle_path=bundle)

    [sent] = created
    assert sent["subject"] == "[fabricase FC-1] mlx5_0/1: symbol_error +40 on 1 host"
    assert "nn-top > nn-mid > nn-a" in sent["communicationBody"]
    assert (sent["serviceCode"], sent["categoryCode"], sent["severityCode"], sent["issueType"], sent["language"]) == (
        "amazon-elastic-compute-cloud-linux", "instance-issue", "high", "technical", "en")
    assert sent["attachmentSetId"] == "as-1" and "uploadIds" not in sent
    [case] = moto_cases(moto)
    assert result.case_id == case["caseId"] and result.state == EscalationState.FILED
    assert result.location.startswith("https://support.console.aws.amazon.com/support/home#/case/?displayId=")

    stub.add_response("describe_communications", {"communications": [
        {"caseId": result.case_id, "body": "Please reseat the cable.", "submittedBy": "Amazon Web Services",
         "timeCreated": "2026-11-30T05:00:00.000Z"},
        {"caseId": result.case_id, "body": "evidence", "submittedBy": "arn:aws:iam::123456789012:user/oncall",
         "timeCreated": "2026-11-30T03:00:00.000Z"}]}, {"caseId": result.case_id})
    status = provider.case_status(result.case_id)
    assert status.raw_status == case["status"]
    assert [(c.body, c.from_provider) for c in status.comments] == [("evidence", False),
                                                                    ("Please reseat the cable.", True)]

    stub.add_response("add_communication_to_case", {"result": True},
                      {"caseId": result.case_id, "communicationBody": "Cable reseated, errors stopped."})
    provider.comment(result.case_id, "Cable reseated, errors stopped.")
    stub.add_response("add_communication_to_case", {"result": True},
                      {"caseId": result.case_id, "communicationBody": "Fixed, thanks."})
    resolved = capture_params(clients.clients["support"], "ResolveCase")
    provider.resolve_case(result.case_id, "Fixed, thanks.")
    assert resolved == [{"caseId": result.case_id}]
    # moto answers ResolveCase but leaves the case open: the read-back of a resolved case is stubbed
    stub.operations.add("DescribeCases")
    stub.add_response("describe_cases", {"cases": [{**case, "status": "resolved"}]},
                      {"caseIdList": [result.case_id], "includeResolvedCases": True, "includeCommunications": False})
    stub.add_response("describe_communications", {"communications": []}, {"caseId": result.case_id})
    assert provider.case_status(result.case_id).state == EscalationState.RESOLVED
    stub.operations.discard("DescribeCases")
    stub.add_response("add_communication_to_case", {"result": True},
                      {"caseId": result.case_id, "communicationBody": "Back again on gpu001."})
    provider.reopen_case(result.case_id, "Back again on gpu001.")
    clients.assert_no_pending()


def test_filing_again_finds_the_case_instead_of_opening_a_second(provider, clients, moto, tmp_path):
    stub_codes(clients)
    first = provider.file_case(escalation_id="FC-7", draft=draft(), bundle_path=None)
    # A second open of another escalation whose id shares a prefix must not match FC-7's marker.
    again = provider.file_case(escalation_id="FC-7", draft=draft(), bundle_path=None)
    assert again.case_id == first.case_id and len(moto_cases(moto)) == 1
    assert provider.find_case("FC-70") is None
    clients.assert_no_pending()


def test_large_bundle_goes_by_upload_links_in_parts(paths, clients, moto, uploads, tmp_path):
    write_config(paths.config, moto, attachments="auto")
    provider = AwsProvider(paths, sleep=lambda s: None)
    part = 512 * 1024
    size = 12 * part + 1000  # 6.3 MB: above 5 MB, and 13 parts, so two GetAttachmentUploadLinks calls
    bundle = blob(tmp_path / "FC-2-cap.tar.gz", size)
    stub_codes(clients)
    stub_upload_links(clients, uploads, name=bundle.name, size=size, part_bytes=part)
    completed = capture_params(clients.clients["support"], "CompleteAttachmentUpload")
    created = capture_params(clients.clients["support"], "CreateCase")

    provider.file_case(escalation_id="FC-2", draft=draft(), bundle_path=bundle)

    clients.assert_no_pending()
    assert created[0]["uploadIds"] == ["upl-1"] and "attachmentSetId" not in created[0]
    got = b"".join(uploads.bodies[f"/upl-1/part{i}"] for i in range(1, 14))
    assert got == bundle.read_bytes()
    assert [c["partIndex"] for c in completed[0]["completedUploads"]] == list(range(1, 14))
    assert completed[0]["completedUploads"][0]["eTag"].startswith('"')


def test_upload_links_unsupported_falls_back_to_split_attachment_sets(provider, clients, moto, tmp_path):
    bundle = real_bundle(tmp_path, 7_000_000)
    stub_codes(clients)
    stub = clients.stub("support")
    stub.add_client_error("get_attachment_upload_links", "UnknownOperationException", "Unknown operation", 400)
    stub.add_response("add_attachments_to_set", {"attachmentSetId": "as-2"})
    sets = capture_params(clients.clients["support"], "AddAttachmentsToSet")
    created = capture_params(clients.clients["support"], "CreateCase")

    provider.file_case(escalation_id="FC-3", draft=draft(), bundle_path=bundle)

    clients.assert_no_pending()
    names = [a["fileName"] for a in sets[0]["attachments"]]
    assert names == [f"{bundle.name}.part001-of-002", f"{bundle.name}.part002-of-002"]
    assert all(len(a["data"]) <= 5_000_000 for a in sets[0]["attachments"])
    assert created[0]["attachmentSetId"] == "as-2"


def test_attachment_too_large_for_attachment_sets_files_nothing(paths, clients, moto, tmp_path):
    write_config(paths.config, moto, attachments="attachment-set")
    provider = AwsProvider(paths, sleep=lambda s: None)
    bundle = real_bundle(tmp_path, 16_000_000)  # 4 parts of 5 MB: an attachment set takes 3
    stub_codes(clients)
    with pytest.raises(ProviderError, match="AddAttachmentsToSet: attachment too large") as info:
        provider.file_case(escalation_id="FC-4", draft=draft(), bundle_path=bundle)
    assert info.value.where == "aws" and "\n" not in str(info.value)
    assert moto_cases(moto) == []


def test_codes_are_cached_in_the_data_dir_until_the_ttl(paths, clients, moto):
    now = [datetime(2026, 11, 30, tzinfo=UTC)]
    stub_codes(clients)
    AwsProvider(paths, now=lambda: now[0]).file_case(escalation_id="FC-5", draft=draft(), bundle_path=None)
    assert (paths.data / "cache" / "aws-support-codes.json").is_file()
    # fresh: no Describe call (the Stubber has none queued and would fail the call)
    AwsProvider(paths, now=lambda: now[0]).file_case(escalation_id="FC-6", draft=draft(), bundle_path=None)
    now[0] += timedelta(days=2)
    stub_codes(clients)
    AwsProvider(paths, now=lambda: now[0]).file_case(escalation_id="FC-8", draft=draft(), bundle_path=None)
    clients.assert_no_pending()
    assert len(moto_cases(moto)) == 3


def test_severity_is_capped_at_what_the_plan_offers(provider, clients, moto):
    assert pick_severity(desk_severity("aws", Severity.CRITICAL), ["low", "normal", "high", "urgent"]) == "urgent"
    assert pick_severity(desk_severity("aws", Severity.MAJOR), ["low", "normal"]) == "normal"
    assert pick_severity(desk_severity("aws", Severity.INFO), ["normal", "high"]) == "normal"
    stub_codes(clients)
    created = capture_params(clients.clients["support"], "CreateCase")
    provider.file_case(escalation_id="FC-9", draft=draft(Severity.CRITICAL), bundle_path=None)
    assert created[0]["severityCode"] == "urgent"  # Business plan: no `critical`


def test_plan_case_lists_the_requests_and_sends_none(provider, clients, moto, tmp_path):
    bundle = blob(tmp_path / "FC-1-cap.tar.gz", 6_000_000)
    plan = provider.plan_case(escalation_id="FC-1", draft=draft(), bundle_path=bundle)
    ops = [r.operation for r in plan]
    assert ops == ["DescribeCases", "DescribeServices", "DescribeSeverityLevels", "GetAttachmentUploadLinks",
                   "PUT <presigned upload URL> (each part)", "CompleteAttachmentUpload", "CreateCase"]
    create = plan[-1].payload
    assert create["subject"].startswith("[fabricase FC-1] ") and create["uploadIds"] == ["<uploadId>"]
    assert plan[4].payload["attachment"]["size"] == 6_000_000 and len(plan[4].payload["attachment"]["sha256"]) == 64
    assert moto_cases(moto) == []
    clients.assert_no_pending()


def test_services_without_the_configured_category_is_one_line(paths, clients, moto):
    write_config(paths.config, moto, category_code="no-such-category")
    stub_codes(clients)
    with pytest.raises(ProviderError, match="category_code 'no-such-category' is not a category"):
        AwsProvider(paths).file_case(escalation_id="FC-1", draft=draft(), bundle_path=None)
    assert moto_cases(moto) == [] and SERVICES and SEVERITIES
