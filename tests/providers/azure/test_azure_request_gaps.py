"""Issue 15, build item 5 (Azure): what the real API requires, checked by the local ARM server (azure_fake_arm)
and against azure-mgmt-support's and azure-mgmt-compute's own models.

- every communication carries `sender` (required when the caller is a service principal);
- a phone contact needs, and sends, a phone number;
- each faulty-host report attempt has its own impact name (Azure refuses a reused one);
- a communication's name includes its time: the same text posted twice is two messages, a retried post one;
- the azure-mgmt-compute floor in pyproject.toml is a version that has the attributes read.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import tomllib
from pathlib import Path

import pytest
from azure_fake_arm import SUB
from azure_fakes import CONTACT, FakeCredential, write_config

from fabricase.config import Paths
from fabricase.errors import ConfigError
from fabricase.models import Evidence, Finding, Placement, Severity, TicketDraft
from fabricase.providers.azure import AzureProvider
from fabricase.providers.azure_ticket import communication_name

REPO = Path(__file__).resolve().parents[3]
COMPUTE_FLOOR = (39,)  # azure-mgmt-compute 39.0.0: VirtualMachine.interconnect_block_profile (read by locate)


def _ticking() -> dt.datetime:
    return dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC)


def _provider(paths: Paths) -> AzureProvider:
    """A provider whose clock moves one second a call: posts at different times, as in real use."""
    seconds = itertools.count()
    return AzureProvider(paths, credential=FakeCredential(), sleep=lambda s: None,
                         now=lambda: _ticking() + dt.timedelta(seconds=next(seconds)))


def _draft() -> TicketDraft:
    rid = f"/subscriptions/{SUB}/resourceGroups/rg-train/providers/Microsoft.Compute/virtualMachines/gpu002"
    return TicketDraft(provider="azure", title="gpu002 mlx5_0 port 1: link flapping", body=f"- gpu002: {rid}\n",
                       severity=Severity.MAJOR, hosts=["gpu002"], components=["gpu002/rdma:mlx5_0/1"],
                       bundle_id="cd" * 32)


def _file(provider: AzureProvider) -> str:
    return provider.file_case(escalation_id="FC-1", draft=_draft(), bundle_path=None).case_id


def test_every_communication_is_sent_by_the_contacts_email(paths, arm, tmp_path):
    provider = _provider(paths)
    name = _file(provider)
    provider.comment(name, "Reseated; still flapping.")
    extra = tmp_path / "dmesg.txt"
    extra.write_text("mlx5_core: link down\n")
    provider.attach(name, [extra], "dmesg after the reseat.")
    provider.resolve_case(name, "Host replaced.")
    provider.reopen_case(name, "Flapping again.")
    posts = arm.calls("PUT", "/communications/")
    assert len(posts) == 4
    assert {p["body"]["properties"].get("sender") for p in posts} == {"ops@fabric.example"}
    assert {c["properties"]["sender"] for c in arm.state.communications[name]} == {"ops@fabric.example"}


def test_the_sdk_model_carries_sender():
    from azure.mgmt.support import models

    body = models.CommunicationDetails(subject="s", body="b", sender="ops@fabric.example").serialize()
    assert body["properties"]["sender"] == "ops@fabric.example"


def test_a_phone_contact_without_a_number_is_a_config_error_naming_the_key(tmp_path, arm, tls):
    home = tmp_path / "home"
    write_config(home, arm, tls[0], contact=False, extra=CONTACT + 'method = "phone"\n')
    with pytest.raises(ConfigError, match=r"\[providers.azure.contact\] phone is required") as caught:
        AzureProvider(Paths(data=home, config=home), credential=FakeCredential())
    assert "\n" not in caught.value.message and str(home / "config.toml") in str(caught.value.where)
    write_config(home, arm, tls[0], contact=False, extra=CONTACT + 'method = "fax"\n')
    with pytest.raises(ConfigError, match="method must be one of email, phone"):
        AzureProvider(Paths(data=home, config=home), credential=FakeCredential())


def test_a_phone_contact_sends_its_number(tmp_path, arm, tls):
    home = tmp_path / "home"
    number = f"+1 206 555 {int(tmp_path.stat().st_ino) % 10000:04d}"
    write_config(home, arm, tls[0], contact=False, extra=CONTACT + f'method = "phone"\nphone = "{number}"\n')
    name = _file(_provider(Paths(data=home, config=home)))
    contact = arm.state.tickets[name]["properties"]["contactDetails"]
    assert contact["preferredContactMethod"] == "phone" and contact["phoneNumber"] == number


def test_an_email_contact_sends_no_phone_number(paths, arm):
    name = _file(_provider(paths))
    assert "phoneNumber" not in arm.state.tickets[name]["properties"]["contactDetails"]


def test_the_same_text_posted_twice_is_two_messages(paths, arm):
    provider = _provider(paths)
    name = _file(provider)
    provider.comment(name, "Still flapping.")
    provider.comment(name, "Still flapping.")  # a second update with the same words, later
    bodies = [c["properties"]["body"] for c in arm.state.communications[name]]
    assert bodies == ["Still flapping.", "Still flapping."]
    names = [c["name"] for c in arm.state.communications[name]]
    assert len(set(names)) == 2 and all(re.fullmatch(r"fabricase-20261130T0100\d{8}Z-[0-9a-f]{16}", n) for n in names)


def test_a_retried_post_is_one_message(paths, arm):
    provider = _provider(paths)
    name = _file(provider)
    arm.fail("PUT", r"/communications/", 503, after=True)  # posted, but the answer is lost: the call retries
    provider.comment(name, "Reseated.")
    posts = arm.calls("PUT", "/communications/")
    assert len(posts) == 2 and posts[0]["path"] == posts[1]["path"]
    assert [c["properties"]["body"] for c in arm.state.communications[name]] == ["Reseated."]


def test_communication_name_is_time_and_text():
    at = dt.datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=dt.UTC)
    assert communication_name("t", "x", at) == communication_name("t", "x", at)
    assert communication_name("t", "x", at) != communication_name("t", "x", at + dt.timedelta(microseconds=1))
    assert communication_name("t", "x", at).startswith("fabricase-20261130T010203456789Z-")


def _report_inputs(arm):
    """The placement and its HostReport (fabricase.faulty)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from faulty_fleet import host_report

    rid = arm.add_vm("gpu002", fault_domain=1)
    placement = Placement(host="gpu002", provider="azure", instance_id=rid, region="eastus2",
                          extra={"physical_host_name": "GGBB002"})
    findings = [Finding(kind="rdma-link-flap", severity=Severity.MAJOR, host="gpu002", component="rdma:mlx5_0/1",
                        summary="link_downed +2 in 5 s", evidence=[Evidence("link.down_events.delta", 2, "events")])]
    return placement, host_report(placement, findings)


def test_each_report_attempt_has_its_own_impact_name(paths, arm):
    provider = _provider(paths)
    placement, findings = _report_inputs(arm)
    first = provider.report_faulty_host(placement, findings)
    again = provider.report_faulty_host(placement, findings)  # the same host reported again: a new report
    assert first.reference != again.reference
    assert set(arm.state.impacts) == {first.reference, again.reference}
    assert first.raw_status == again.raw_status == "Succeeded"


def test_a_retried_report_is_one_impact(paths, arm):
    provider = _provider(paths)
    placement, findings = _report_inputs(arm)
    arm.fail("PUT", r"/workloadImpacts/", 503, after=True)  # created, answer lost; the retry meets 409
    report = provider.report_faulty_host(placement, findings)
    puts = arm.calls("PUT", "/workloadImpacts/")
    assert len(puts) == 2 and puts[0]["path"] == puts[1]["path"]
    assert list(arm.state.impacts) == [report.reference] and report.raw_status == "Succeeded"


def _floor(requirements: list[str], package: str) -> tuple[int, ...]:
    (spec,) = [r for r in requirements if re.match(rf"{re.escape(package)}\s*[><=~]", r)]
    found = re.search(r">=\s*([0-9][0-9.]*)", spec)
    assert found, f"{spec}: no >= floor"
    return tuple(int(x) for x in found.group(1).split("."))


def test_the_azure_mgmt_compute_floor_has_the_attributes_read():
    from azure.mgmt.compute import models

    assert hasattr(models.VirtualMachine(location="eastus2"), "interconnect_block_profile")
    assert hasattr(models.VirtualMachineInstanceView(), "interconnect_instance_view")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lists = [project["optional-dependencies"]["azure"]]
    lists += [v for k, v in project["optional-dependencies"].items() if k != "azure" and any(
        r.startswith("azure-mgmt-compute") for r in v)]
    for requirements in lists:
        assert _floor(requirements, "azure-mgmt-compute") >= COMPUTE_FLOOR, requirements
