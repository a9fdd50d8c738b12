"""GcpProvider with the real google-cloud-compute and google-cloud-support SDKs against the local fake (conftest):
host -> placement -> case filed with attachments -> status read back -> resolved, the faulty-host channels,
and every error a user can meet, each one line naming the provider and the operation."""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import sys
import tarfile
from pathlib import Path

import pytest
from gcp_fake import CLASSIFICATION_GPU, PROJECT, TOKEN, ZONE, instance, write_profile
from google.auth.credentials import AnonymousCredentials

from bundles import redacted_bundle
from fabricase.config import Paths
from fabricase.errors import ProviderError, UnsupportedError
from fabricase.models import EscalationState, Finding, Severity, TicketDraft
from fabricase.providers import Feature, get_provider
from fabricase.providers.gcp import GcpProvider

sys.path.insert(0, str(Path(__file__).parents[1]))
from faulty_fleet import host_report  # noqa: E402

GCE = {"product_name": "Google Compute Engine", "sys_vendor": "Google"}


@pytest.fixture
def paths(tmp_path):
    return Paths(data=tmp_path / "data", config=tmp_path / "config")


def make(paths, google, sleeps=None, credentials="anonymous", **profile) -> GcpProvider:
    write_profile(paths.config, google.base, **profile)
    creds = AnonymousCredentials() if credentials == "anonymous" else credentials
    return GcpProvider(paths, credentials=creds, sleep=(sleeps.append if sleeps is not None else lambda s: None))


@pytest.fixture
def draft():
    return TicketDraft(provider="gcp", title="[fabricase] symbol errors on mlx5_3 port 1 on 1 host",
                       body="## Summary\n\nblock blk-a, sub-block sb-1\n", severity=Severity.MAJOR,
                       hosts=["a3u-node-0"], components=["rdma:mlx5_3/1"], summary="# Summary\n\none link\n")


@pytest.fixture
def bundle(tmp_path):
    return redacted_bundle(tmp_path / "FC-1.tar.gz", payload=bytes(range(256)) * 4)


def test_registered_and_declares_what_it_cannot_do(paths):
    provider = get_provider("gcp", paths)
    assert isinstance(provider, GcpProvider) and not provider.supports(Feature.REOPEN)
    with pytest.raises(UnsupportedError, match="no reopen"):
        provider.reopen_case("projects/p/cases/1", "again")


def test_locate_reads_topology_reservation_health_and_policy(paths, google):
    google.add(instance("a3u-node-0"))
    google.add(instance("a3u-node-1", subblock="sb-2", host="h07"))
    provider = make(paths, google, zone=ZONE)
    got = provider.locate([
        {"host": "a3u-node-0", "identity": {**GCE, "hostname": "a3u-node-0"}},
        {"host": "a3u-node-1", "identity": {}},  # unreachable: looked up by its name
        {"host": "ip-10-0-0-1", "identity": {"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge"}},
        {"host": "a3u-node-9", "identity": GCE},  # no such instance
    ])
    assert [p.host for p in got] == ["a3u-node-0", "a3u-node-1", "ip-10-0-0-1", "a3u-node-9"]
    node0, node1, ec2, missing = got
    assert node0.topology == ["cluster:us-central1-cluster-jfhb", "block:blk-a", "subblock:sb-1"]
    assert node1.topology[-1] == "subblock:sb-2" and node1.extra["host"] == "h07"
    assert node0.extra["reservation_sub_block_health"].startswith("DEGRADED (healthy host 17, degraded host 1")
    assert node0.extra["reservation_block_health"].startswith("HEALTHY")
    assert node0.extra["placement_policy"] == {"max_topology_distance": "BLOCK", "type": "HIGH_THROUGHPUT"}
    assert node0.placement_group == "wp-highthroughput" and node0.zone == ZONE
    assert ec2.topology == [] and "aws" in ec2.extra["locate_note"]
    assert missing.topology == [] and "no instance 'a3u-node-9'" in missing.extra["locate_note"]
    # One read per shared resource: the block and the policy once, each sub-block once; nothing for the EC2 host.
    assert len(google.seen("GET", r"/reservationBlocks/blk-a$")) == 1
    assert len(google.seen("GET", r"/resourcePolicies/")) == 1
    assert len(google.seen("GET", r"/reservationSubBlocks/")) == 2
    assert not google.seen("GET", r"ip-10-0-0-1")


def test_without_a_zone_the_instance_is_found_across_zones(paths, google):
    google.add(instance("a3u-node-0", zone="europe-west4-a"), zone="europe-west4-a")
    provider = make(paths, google)
    (p,) = provider.locate([{"host": "a3u-node-0", "identity": GCE}])
    assert p.zone == "europe-west4-a" and p.region == "europe-west4"
    (seen,) = google.seen("GET", r"/aggregated/instances$")
    assert seen.query["filter"] == ['name = "a3u-node-0"']


def test_the_zone_and_project_come_from_the_guest_fqdn(paths, google):
    google.add(instance("a3u-node-0"))
    write_profile(paths.config, google.base)
    (paths.config / "config.toml").write_text((paths.config / "config.toml").read_text().replace(
        f'project = "{PROJECT}"\n', ""))
    provider = GcpProvider(paths, credentials=AnonymousCredentials())
    (p,) = provider.locate([{"host": "n0", "identity": {**GCE, "hostname": f"a3u-node-0.{ZONE}.c.{PROJECT}.internal"}}])
    assert p.extra["project"] == PROJECT and p.topology[1] == "block:blk-a"
    assert google.seen("GET", rf"/projects/{PROJECT}/zones/{ZONE}/instances/a3u-node-0$")


def test_file_status_and_resolve_a_case(paths, google, draft, bundle):
    provider = make(paths, google, support_plan="standard", subscribers=["oncall@example.com"])
    result = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    assert result.case_id == f"projects/{PROJECT}/cases/40000000"
    assert (result.raw_status, result.state) == ("NEW", EscalationState.FILED)
    assert result.location == f"{google.base}/v2/{result.case_id}"
    case = google.cases[result.case_id]
    assert case["displayName"] == "[fabricase FC-1] symbol errors on mlx5_3 port 1 on 1 host"
    assert "sub-block sb-1" in case["description"] and "[fabricase FC-1]" in case["description"]
    assert case["priority"] == "P2"  # major -> P2, sent as the enum's number
    assert (google.seen("POST", r"/cases$")[0].json()["priority"], case["classification"]["id"]) == (
        3, CLASSIFICATION_GPU)
    assert case["subscriberEmailAddresses"] == ["oncall@example.com"]
    assert google.uploads[(result.case_id, "FC-1.tar.gz")] == bundle.read_bytes()
    assert google.uploads[(result.case_id, "summary.md")] == draft.summary.encode()

    google.cases[result.case_id]["state"] = "ACTION_REQUIRED"
    google.google_comment(result.case_id, "Please run the NCCL test on the new host")
    provider.comment(result.case_id, "nccl-tests attached")
    status = provider.case_status(result.case_id)
    assert (status.raw_status, status.state) == ("ACTION_REQUIRED", EscalationState.WAITING_US)
    assert [(c.body, c.from_provider) for c in status.comments] == [
        ("Please run the NCCL test on the new host", True), ("nccl-tests attached", False)]

    provider.resolve_case(result.case_id, "the host was replaced; busbw is back to 360 GB/s")
    status = provider.case_status(result.case_id)
    assert status.state == EscalationState.CLOSED and status.comments[-1].body.startswith("the host was replaced")
    escalated = provider.escalate_case(result.case_id, "technical-expertise", "third NVLink fault this week")
    assert escalated.case_id == result.case_id and google.cases[result.case_id]["escalated"] is True
    assert google.seen("POST", r":escalate$")[0].json()["escalation"]["justification"] == "third NVLink fault this week"


def test_filing_again_finds_the_case_and_files_nothing_twice(paths, google, draft, bundle):
    provider = make(paths, google, classification_id=CLASSIFICATION_GPU)
    first = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    google.search_lags = True  # the search index has not seen it: the list of cases must
    again = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    assert again.case_id == first.case_id and len(google.cases) == 1
    assert len(google.seen("POST", r"/upload/")) == 2  # bundle and summary, once each
    assert not google.seen("GET", r"caseClassifications")  # the configured classification is used as is
    assert provider.find_case("FC-1").case_id == first.case_id and provider.find_case("FC-2") is None


def test_an_upload_that_fails_leaves_nothing_recorded_and_filing_again_finishes(paths, google, draft, bundle):
    provider = make(paths, google)
    google.fail("POST", r"/upload/", 500, "backend error", times=5)
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    message = str(info.value)
    assert "\n" not in message and message.startswith("gcp: case projects/") and "file again to finish" in message
    assert "cloudsupport.media.upload: 500 backend error (after 5 attempts)" in message
    result = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    assert len(google.cases) == 1 and (result.case_id, "FC-1.tar.gz") in google.uploads


def test_a_bundle_above_the_attachment_limit_goes_as_parts(paths, google, draft, tmp_path):
    from fabricase.bundler.verify import verify_bundle

    noise = random.Random(1).randbytes(300_000)  # incompressible
    bundle = redacted_bundle(tmp_path / "big.tar.gz", payload=noise, mtime=1_700_000_000)
    provider = make(paths, google, attachment_max_bytes=100_000)
    result = provider.file_case(escalation_id="FC-3", draft=draft, bundle_path=bundle)
    parts = sorted(name for case, name in google.uploads if case == result.case_id and name != "summary.md")
    assert len(parts) >= 3 and all(len(google.uploads[(result.case_id, n)]) <= 100_000 for n in parts)
    for n in parts:  # each part is a bundle of its own that verifies
        (tmp_path / n).write_bytes(google.uploads[(result.case_id, n)])
        assert verify_bundle(tmp_path / n).ok
    with tarfile.open(tmp_path / parts[0]) as tf:
        assert "PART.json" in tf.getnames()


def test_throttling_is_retried_with_bounded_backoff(paths, google, draft):
    sleeps: list[float] = []
    provider = make(paths, google, sleeps=sleeps)
    google.fail("POST", r"/cases$", 429, "Quota exceeded for quota metric 'Requests'", times=2)
    result = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=None)
    assert result.state == EscalationState.FILED and len(google.cases) == 1
    assert len(sleeps) == 2 and all(0 <= s <= 1.0 for s in sleeps)


def test_a_persistent_5xx_gives_up_with_one_line_and_files_nothing(paths, google, draft):
    provider = make(paths, google)
    google.fail("POST", r"/cases$", 503, "The service is currently unavailable.", times=99)
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=None)
    assert str(info.value) == ("gcp: cloudsupport.cases.create: 503 The service is currently unavailable. "
                               "(after 5 attempts)")
    assert google.cases == {}


def test_permission_denied_names_the_role_and_is_not_retried(paths, google, draft):
    sleeps: list[float] = []
    provider = make(paths, google, sleeps=sleeps)
    google.fail("GET", r"/cases:search$", 403, "The caller does not have permission", times=99)
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=None)
    message = str(info.value)
    assert message.startswith("gcp: cloudsupport.cases.search: permission denied (403): The caller does not have")
    assert "roles/cloudsupport.techSupportEditor" in message and "\n" not in message and sleeps == []
    assert google.cases == {}


def test_a_missing_bundle_fails_before_any_request(paths, google, draft, tmp_path):
    provider = make(paths, google)
    with pytest.raises(ProviderError, match="bundle file not found"):
        provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=tmp_path / "gone.tar.gz")
    assert google.requests == []


def test_missing_credentials_is_one_line(paths, google, draft, no_adc):
    provider = make(paths, google, credentials=None)
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=None)
    assert str(info.value).startswith("gcp: no Google credentials found") and "application-default login" in str(
        info.value)
    results = provider.check()
    assert [(r.check, r.ok) for r in results] == [("credentials", False)]
    assert google.requests == []


def test_application_default_credentials_are_used_and_sent(paths, google, draft, bundle, adc):
    write_profile(paths.config, google.base)
    provider = GcpProvider(paths, sleep=lambda s: None)
    result = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    # The SDK signs its own JWT with the key (self-signed JWT access); the upload's token comes from token_uri.
    for seen in google.seen("POST", r"/cases$") + google.seen("POST", r"/upload/"):
        account = f"fabricase-test@{PROJECT}.iam.gserviceaccount.invalid"
        assert _bearer_of(seen.headers["authorization"]) in (TOKEN, account)
    assert google.tokens_issued >= 1
    assert (result.case_id, bundle.name) in google.uploads


def _bearer_of(header: str) -> str:
    """The access token, or for a self-signed JWT its issuer."""
    token = header.removeprefix("Bearer ")
    if token.count(".") == 2 and token.startswith("eyJ"):
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["iss"]
    return token


def test_check_reports_each_access(paths, google):
    provider = make(paths, google)
    assert [(r.check, r.ok) for r in provider.check()] == [
        ("credentials", True), ("project access", True), ("support access", True), ("case classification", True)]
    google.fail("GET", r"/v2/projects/[^/]+/cases$", 403, "Customer Care is not enabled", times=99)
    results = {r.check: r for r in provider.check()}
    assert not results["support access"].ok and "techSupportEditor" in results["support access"].detail
    assert results["project access"].ok


def test_report_a_faulty_host(paths, google):
    google.add(instance("a3u-node-0"))
    provider = make(paths, google, zone=ZONE)
    (p,) = provider.locate([{"host": "a3u-node-0", "identity": GCE}])
    xid = Finding(kind="nvidia-xid", severity=Severity.CRITICAL, host="a3u-node-0", component="gpu:3",
                  summary="79 GPU_HAS_FALLEN_OFF_THE_BUS x1")
    minor = Finding(kind="rdma-port-errors", severity=Severity.MINOR, host="a3u-node-0",
                    component="rdma:mlx5_0/1", summary="a few errors")
    report = host_report(p, [xid, minor])  # the minor finding's suspect is reported by no one
    result = provider.report_faulty_host(p, report)
    assert result.channel == "compute.instances.reportHostAsFaulty" and result.reference == (
        "operation-reportHostAsFaulty-1") and result.raw_status == "RUNNING"
    (seen,) = google.seen("POST", r"/instances/a3u-node-0/reportHostAsFaulty$")
    assert seen.json() == {"disruptionSchedule": "FUTURE", "faultReasons": [
        {"behavior": "UNRECOVERABLE_GPU_ERROR", "description": "fabricase FC-1, support case case-4711: 1 suspect "
         "on a3u-node-0\ncritical: a3u-node-0 GPU 3: bad link; 79 GPU_HAS_FALLEN_OFF_THE_BUS x1"}]}
    provider.report_faulty_host(p, report)  # a retry of the same report carries the same request id
    first, second = google.seen("POST", r"reportHostAsFaulty$")
    assert first.query["requestId"] == second.query["requestId"]
    provider.report_faulty_host(p, report, disruption="immediate")
    assert google.seen("POST", r"reportHostAsFaulty$")[-1].json()["disruptionSchedule"] == "IMMEDIATE"


def test_report_an_nvlink_switch_fault_to_the_sub_block_only_when_immediate(paths, google):
    google.add(instance("a4x-node-0", machine="a4x-highgpu-4g"))
    provider = make(paths, google, zone=ZONE)
    (p,) = provider.locate([{"host": "a4x-node-0", "identity": GCE}])
    sxid = Finding(kind="nvswitch-sxid", severity=Severity.MAJOR, host="a4x-node-0", component="nvswitch:0000:05:00.0",
                   summary="SXid 20034 x3")
    report = host_report(p, [sxid])
    # The sub-block channel knows IMMEDIATE only: by default (future) the host itself is reported.
    assert provider.report_faulty_host(p, report).channel == "compute.instances.reportHostAsFaulty"
    assert not google.seen("POST", r"/reportFaulty$")
    result = provider.report_faulty_host(p, report, disruption="immediate")
    assert result.channel == "compute.reservationSubBlocks.reportFaulty"
    (seen,) = google.seen("POST", r"/reservations/res-a3u/reservationBlocks/blk-a/reservationSubBlocks/sb-1"
                                  r"/reportFaulty$")
    assert seen.json()["failureComponent"] == "NVLINK_SWITCH" and seen.json()["disruptionSchedule"] == "IMMEDIATE"
    assert seen.json()["faultReasons"][0]["behavior"] == "NVSWITCH_FAULT_SWITCH_ERROR"


def test_a_host_without_suspects_or_placement_is_not_reported(paths, google):
    provider = make(paths, google)
    (p,) = provider.locate([{"host": "a3u-node-5", "identity": GCE}])  # not found
    flap = Finding(kind="link-flap", severity=Severity.MAJOR, host="a3u-node-5", component="netdev:eth1", summary="x")
    report = host_report(p, [flap])
    with pytest.raises(ProviderError, match="not located on Compute Engine"):
        provider.report_faulty_host(p, report)
    with pytest.raises(ProviderError, match="no provider-owned major or critical suspect to report"):
        provider.report_faulty_host(p, dataclasses.replace(report, suspects=(), findings=()))
    assert not google.seen("POST", r"report")


def test_plan_lists_the_requests_without_sending_any(paths, google, draft, bundle):
    provider = make(paths, google)
    plan = [r.to_dict() for r in provider.plan_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)]
    assert [r["operation"] for r in plan] == [
        "cases.search", "caseClassifications.search", "cases.create", "media.upload", "media.upload"]
    create = plan[2]["payload"]
    assert create["case"]["display_name"].startswith("[fabricase FC-1]") and create["case"]["priority"] == "P2"
    upload = plan[3]["payload"]
    assert (upload["name"], upload["size"], len(upload["sha256"])) == ("FC-1.tar.gz", bundle.stat().st_size, 64)
    assert google.requests == []
