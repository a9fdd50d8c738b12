"""The Azure provider against the local ARM server: host -> placement -> ticket filed with the bundle ->
status read back -> resolved, the faulty-host report, check(), and the errors the desk can give."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from azure_fake_arm import SUB
from azure_fakes import NoCredential, write_config

from bundles import redacted_bundle
from fabricase.bundler.verify import join_parts, verify_bundle
from fabricase.errors import ProviderError
from fabricase.models import EscalationState, Evidence, Finding, Placement, Severity, TicketDraft
from fabricase.providers import get_provider
from fabricase.providers.azure import AzureProvider

sys.path.insert(0, str(Path(__file__).parents[1]))
from faulty_fleet import host_report  # noqa: E402


def _draft(body_extra: str = "", bundle_id: str | None = "cd" * 32, severity=Severity.MAJOR) -> TicketDraft:
    rid = f"/subscriptions/{SUB}/resourceGroups/rg-train/providers/Microsoft.Compute/virtualMachines/gpu002"
    return TicketDraft(provider="azure", title="gpu002 mlx5_0 port 1: link flapping",
                       body=f"Symptom: busbw fell\n\n- gpu002 (ok): {rid}\n  fault domain 1\n{body_extra}",
                       severity=severity, hosts=["gpu002"], components=["gpu002/rdma:mlx5_0/1"], bundle_id=bundle_id)


@pytest.fixture
def bundle(tmp_path):
    return redacted_bundle(tmp_path / "FC-1-fleet.tar.gz", payload=bytes(range(256)) * 40)


def test_registry_gives_the_azure_provider(paths):
    assert isinstance(get_provider("azure", paths), AzureProvider)


def test_locate_maps_hosts_to_vms_with_fault_domain_and_interconnect(provider, arm):
    arm.add_vm("gpu001", fault_domain=0, update_domain=0, subgroup="5a1c0b9e-0000-4000-8000-000000000001",
               block="ib-block-7")
    arm.add_vm("ndvm-2", computer="gpu002", fault_domain=1, update_domain=3, scale_set=None)
    arm.add_vm("other", fault_domain=2)  # three VMs: two pages
    hosts = [
        {"host": "gpu001", "identity": {"sys_vendor": "Microsoft Corporation", "physical_host_name": "GGBB001"}},
        {"host": "gpu002.cluster.example", "identity": {"sys_vendor": "Microsoft Corporation"}},
        {"host": "aws001", "identity": {"sys_vendor": "Amazon EC2"}},
        {"host": "gpu404", "identity": {}},
    ]
    one, two, aws, missing = provider.locate(hosts)
    assert one.instance_id.endswith("/virtualMachines/gpu001") and one.instance_type == "Standard_ND96isr_H100_v5"
    assert (one.region, one.zone, one.placement_group) == ("eastus2", "2", "vmss-ib")
    assert one.topology == ["interconnect-block:ib-block-7",
                            "interconnect-subgroup:5a1c0b9e-0000-4000-8000-000000000001", "physical-host:GGBB001"]
    assert one.extra["fault_domain"] == 0 and one.extra["physical_host_name"] == "GGBB001"
    assert one.extra["power_state"] == "PowerState/running" and one.extra["resource_group"] == "rg-train"
    assert two.extra["name"] == "ndvm-2" and two.extra["fault_domain"] == 1 and two.extra["update_domain"] == 3
    assert two.placement_group == "ppg-train"  # no scale set: the proximity placement group
    assert aws == Placement(host="aws001", provider="azure") and missing == Placement(host="gpu404", provider="azure")
    lists = arm.calls("GET", "/virtualMachines")
    assert [c["query"].get("skip") for c in lists if c["path"].endswith("/virtualMachines")] == [None, "2"]
    views = arm.calls("GET", "/instanceView")
    assert len(views) == 2 and {c["query"]["api-version"] for c in views} == {"2026-04-01"}
    assert all(c["auth"] == "Bearer fake-token-not-real" for c in arm.state.requests)


def test_locate_with_no_azure_host_calls_nothing(provider, arm):
    assert provider.locate([{"host": "a", "identity": {"sys_vendor": "Google"}}]) == [Placement("a", "azure")]
    assert arm.state.requests == []


def test_lifecycle_file_status_comment_attach_resolve(provider, arm, bundle, tmp_path):
    filed = provider.file_case(escalation_id="FC-1", draft=_draft(), bundle_path=bundle)
    name = "fabricase-FC-1-cdcdcdcdcdcd"
    assert filed.case_id == name and filed.state == EscalationState.FILED and filed.raw_status == "Open"
    assert "support request 2611300010000001" in filed.location
    ticket = arm.state.tickets[name]["properties"]
    assert ticket["title"].startswith("[fabricase FC-1] gpu002") and "[fabricase FC-1]" in ticket["description"]
    assert ticket["severity"] == "moderate" and ticket["fileWorkspaceName"] == name
    assert ticket["problemClassificationId"].endswith("/pc-gpu") and ticket["serviceId"].endswith("79dc")
    assert ticket["technicalTicketDetails"]["resourceId"].endswith("/virtualMachines/gpu002")
    assert ticket["contactDetails"]["primaryEmailAddress"] == "ops@fabric.example"
    assert arm.file_bytes(name, bundle.name) == bundle.read_bytes()
    polls = arm.calls("GET", "/operationsStatus/")
    assert len(polls) == 2  # InProgress, then Succeeded: the SDK's polling, then its final GET
    assert {c["query"].get("api-version") for c in arm.calls(contains="Microsoft.Support")
            if "/operationsStatus/" not in c["path"]} == {"2024-04-01"}

    # filing again (a retry after a crash) finds the same ticket and uploads nothing
    puts = len(arm.calls("PUT"))
    assert provider.file_case(escalation_id="FC-1", draft=_draft(), bundle_path=bundle) == filed
    assert len(arm.calls("PUT")) == puts
    assert provider.find_case("FC-1") == filed and provider.find_case("FC-2") is None

    status = provider.case_status(name)
    assert status.state == EscalationState.WAITING_PROVIDER and status.comments == ()
    arm.reply("Please reseat the cable and tell us.", name)
    status = provider.case_status(name)
    assert status.state == EscalationState.WAITING_US and status.comments[-1].from_provider
    arm.fail("PUT", r"/communications/", 503, after=True)  # the post lands, its answer is lost: retried
    provider.comment(name, "Reseated; still flapping.")  # the retry reuses the name: one message
    status = provider.case_status(name)
    assert status.state == EscalationState.WAITING_PROVIDER
    assert [c.body for c in status.comments] == ["Please reseat the cable and tell us.", "Reseated; still flapping."]

    report = tmp_path / "report.html"
    report.write_text("<html>report</html>")
    provider.attach(name, [report], "The HTML report.")
    assert arm.file_bytes(name, "report.html.txt") == b"<html>report</html>"
    assert "- report.html.txt (report.html)" in arm.state.communications[name][-1]["properties"]["body"]

    provider.resolve_case(name, "Host replaced.")
    status = provider.case_status(name)
    assert status.raw_status == "Closed" and status.state == EscalationState.CLOSED
    assert status.comments[-1].body == "Host replaced."
    provider.reopen_case(name, "Back again.")
    assert provider.case_status(name).state == EscalationState.WAITING_PROVIDER


def test_a_bundle_over_five_megabytes_goes_as_verified_parts(provider, arm, tmp_path):
    import random

    noise = random.Random(7).randbytes(7_000_000)  # incompressible: the bundle stays over 5 MB
    big = redacted_bundle(tmp_path / "FC-2-big.tar.gz", payload=noise)
    bundle_id = verify_bundle(big).bundle_id
    provider.file_case(escalation_id="FC-2", draft=_draft(bundle_id=bundle_id), bundle_path=big)
    files = arm.state.workspaces[f"fabricase-FC-2-{bundle_id[:12]}"]
    assert sorted(files) == ["FC-2-big.tar.gz.part001-of-002", "FC-2-big.tar.gz.part002-of-002"]
    first, second = (files[n]["properties"] for n in sorted(files))
    assert first["numberOfChunks"] == 2 and first["fileSize"] > 5_000_000 and second["fileSize"] <= 5_242_880
    parts = []
    for name in sorted(files):
        part = tmp_path / name
        part.write_bytes(arm.file_bytes(f"fabricase-FC-2-{bundle_id[:12]}", name))
        parts.append(part)
    joined = join_parts(parts, tmp_path / "joined.tar.gz")
    assert joined.read_bytes() == big.read_bytes()


def test_throttling_is_retried_after_the_servers_retry_after(provider, arm, bundle, delays):
    arm.fail("PUT", r"/supportTickets/", 429, headers={"Retry-After": "7"})
    filed = provider.file_case(escalation_id="FC-3", draft=_draft(), bundle_path=bundle)
    assert filed.state == EscalationState.FILED and len(delays) == 1 and delays[0] >= 7


def test_server_errors_give_up_after_the_bound_and_nothing_is_filed(provider, arm, bundle, delays):
    arm.fail("PUT", r"/supportTickets/", 503, times=99)
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-4", draft=_draft(), bundle_path=bundle)
    message = str(info.value)
    assert "\n" not in message and message.startswith("azure: PUT supportTickets/fabricase-FC-4")
    assert "503" in message and "(after 5 attempts)" in message and len(delays) == 4
    assert arm.state.tickets == {}


def test_permission_denied_is_one_line_and_not_retried(provider, arm, bundle, delays):
    arm.fail("GET", r"/supportTickets/", 403, body={"error": {
        "code": "AuthorizationFailed", "message": "The client does not have authorization to perform action\n"
        "'Microsoft.Support/supportTickets/read'."}})
    with pytest.raises(ProviderError, match=r"permission denied \(403 AuthorizationFailed: .*supportTickets/read"):
        provider.file_case(escalation_id="FC-5", draft=_draft(), bundle_path=bundle)
    assert delays == [] and arm.state.tickets == {}


def test_no_support_plan_says_so(provider, arm, bundle):
    arm.fail("PUT", r"/supportTickets/", 400, body={"error": {
        "code": "BadRequest", "message": "This subscription does not have a support plan for technical tickets."}})
    with pytest.raises(ProviderError, match="no Azure support plan that can file this ticket"):
        provider.file_case(escalation_id="FC-6", draft=_draft(), bundle_path=bundle)
    assert arm.state.tickets == {}


def test_missing_credentials_are_one_line(paths, arm, bundle):
    provider = AzureProvider(paths, credential=NoCredential(), sleep=lambda s: None)
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-7", draft=_draft(), bundle_path=bundle)
    assert "no usable Azure credential" in str(info.value) and "az login" in str(info.value)
    assert "\n" not in str(info.value) and arm.state.requests == []
    checks = provider.check()
    assert [(c.check, c.ok) for c in checks] == [("credentials", False)]


def test_missing_contact_fails_before_anything_is_sent(tmp_path, arm, tls, bundle):
    from fabricase.config import Paths

    home = tmp_path / "nocontact"
    write_config(home, arm, tls[0], contact=False)
    from azure_fakes import FakeCredential

    provider = AzureProvider(Paths(data=home, config=home), credential=FakeCredential())
    with pytest.raises(ProviderError, match="contact needs first_name, last_name, email, country, timezone"):
        provider.file_case(escalation_id="FC-8", draft=_draft(), bundle_path=bundle)
    assert arm.calls("PUT") == [] and arm.calls("POST") == []


def test_plan_case_sends_nothing(provider, arm, bundle):
    plan = provider.plan_case(escalation_id="FC-9", draft=_draft(), bundle_path=bundle)
    assert [p.operation.split("/")[0] for p in plan] == ["PUT fileWorkspaces", "PUT fileWorkspaces",
                                                         "POST fileWorkspaces", "PUT supportTickets"]
    assert plan[1].payload["attachment"]["size"] == bundle.stat().st_size
    assert plan[-1].payload["severity"] == "moderate" and arm.state.requests == []


def test_report_faulty_host_puts_a_workload_impact(provider, arm):
    rid = arm.add_vm("gpu002", fault_domain=1)
    placement = Placement(host="gpu002", provider="azure", instance_id=rid, region="eastus2",
                          extra={"physical_host_name": "GGBB002"})
    findings = [Finding(kind="rdma-link-flap", severity=Severity.MAJOR, host="gpu002", component="rdma:mlx5_0/1",
                        summary="link_downed +2 in 5 s", evidence=[Evidence("link.down_events.delta", 2, "events")]),
                # another host's Xid 79: neither this host's category nor its text
                Finding(kind="nvidia-xid", severity=Severity.CRITICAL, host="gpu009", component="gpu:3",
                        summary="Xid 79", evidence=[Evidence("xid_79", 1, "events")])]
    report = provider.report_faulty_host(placement, host_report(placement, findings))
    assert report.raw_status == "Succeeded" and report.reference in arm.state.impacts
    assert "IBPortFlapping" in report.channel
    body = arm.state.impacts[report.reference]["properties"]
    assert body["impactCategory"] == "Resource.Hpc.Unhealthy.IBPortFlapping" and body["impactedResourceId"] == rid
    assert body["additionalProperties"] == {"PhysicalHostName": "GGBB002", "Location": "eastus2"}
    assert body["startDateTime"] == "2026-11-29T23:59:58Z"  # the host's first error, not the time of the call
    assert "link_downed +2" in body["impactDescription"] and "support case case-4711" in body["impactDescription"]
    assert "Xid" not in body["impactDescription"]
    (call,) = arm.calls("PUT", "workloadImpacts")
    assert call["query"]["api-version"] == "2025-01-01-preview" and call["auth"] == "Bearer fake-token-not-real"
    with pytest.raises(ProviderError, match="needs its PhysicalHostName"):
        bare = Placement(host="gpu002", provider="azure", instance_id=rid)
        provider.report_faulty_host(bare, host_report(bare, findings))


def test_a_report_without_suspects_sends_nothing(provider, arm):
    rid = arm.add_vm("gpu002")
    placement = Placement(host="gpu002", provider="azure", instance_id=rid, extra={"physical_host_name": "GGBB002"})
    flap = Finding(kind="rdma-link-flap", severity=Severity.MAJOR, host="gpu002", component="rdma:mlx5_0/1",
                   summary="link_downed +2 in 5 s")
    empty = dataclasses.replace(host_report(placement, [flap]), suspects=(), findings=())
    with pytest.raises(ProviderError, match="no provider-owned major or critical suspect to report"):
        provider.report_faulty_host(placement, empty)
    assert arm.calls("PUT", "workloadImpacts") == []


def test_report_faulty_host_errors_are_one_line(provider, arm, delays):
    arm.fail("PUT", "workloadImpacts", 403, body={"error": {"code": "FeatureNotRegistered",
                                                             "message": "Allow Impact Reporting is not registered"}})
    placement = Placement(host="g", provider="azure", instance_id="/subscriptions/x/vm", extra={
        "physical_host_name": "GGBB"})
    report = host_report(placement, [Finding(kind="rdma-link-flap", severity=Severity.MAJOR, host="g",
                                             component="rdma:mlx5_0/1", summary="flap")])
    with pytest.raises(ProviderError, match="permission denied .403 FeatureNotRegistered: Allow Impact"):
        provider.report_faulty_host(placement, report)
    arm.fail("PUT", "workloadImpacts", 429, headers={"Retry-After": "3"})
    assert provider.report_faulty_host(placement, report).raw_status == "Succeeded" and delays == [3.0]


def test_check_reports_each_part(provider, arm):
    arm.add_vm("gpu001")
    checks = {c.check: c for c in provider.check()}
    assert all(c.ok for c in checks.values()), checks
    assert "1 VMs readable" in checks["subscription access"].detail
    assert "pc-gpu" in checks["support plan and ticket fields"].detail
    arm.fail("GET", r"/supportTickets$", 403)
    checks = {c.check: c for c in provider.check()}
    assert not checks["support tickets"].ok and "permission denied" in checks["support tickets"].detail
    assert json.dumps([c.detail for c in checks.values()]).count("fake-token") == 0


@pytest.mark.parametrize("extra, message", [
    ('regoin = "eastus"\n', "unknown key 'regoin'"),
    ('severity = "high"\n', "severity must be a table"),
    ('diagnostic_consent = "maybe"\n', "diagnostic_consent must be"),
])
def test_a_bad_profile_is_one_config_error(tmp_path, arm, tls, extra, message):
    from fabricase.config import Paths
    from fabricase.errors import ConfigError

    home = tmp_path / "bad"
    write_config(home, arm, tls[0], extra=extra)
    with pytest.raises(ConfigError, match=message):
        AzureProvider(Paths(data=home, config=home))
