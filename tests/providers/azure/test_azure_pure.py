"""The Azure provider's pure parts: KVP pool, who is an Azure VM, names the desk takes, states, categories."""

from __future__ import annotations

import pytest
from azure_capture import kvp_record

from fabricase.models import EscalationState, Evidence, Finding, Severity
from fabricase.parsers.kvp import parse_kvp_pool
from fabricase.providers.azure_health import GENERIC_CATEGORY, impact_category, impact_name
from fabricase.providers.azure_locate import is_azure_vm
from fabricase.providers.azure_ticket import CHUNK_BYTES, ticket_name, ticket_state, upload_chunks, upload_name
from fabricase.providers.base import CaseComment
from fabricase.providers.identity import AZURE_CHASSIS_ASSET_TAG


def test_kvp_pool_records_are_read_and_a_torn_tail_is_ignored():
    data = kvp_record("HostName", "GGBB90904476") + kvp_record("PhysicalHostName", "GGBB90904476")
    data += kvp_record("", "orphan") + kvp_record("PhysicalHostName", "GGBB90904477") + b"Phys"
    assert parse_kvp_pool(data) == {"HostName": "GGBB90904476", "PhysicalHostName": "GGBB90904477"}
    assert parse_kvp_pool(data.decode()) == parse_kvp_pool(data)  # as HostCapture.text gives it
    assert parse_kvp_pool(None) == {} and parse_kvp_pool(b"short") == {}


@pytest.mark.parametrize("identity, azure", [
    ({"sys_vendor": "Microsoft Corporation", "chassis_asset_tag": AZURE_CHASSIS_ASSET_TAG}, True),
    ({"sys_vendor": "Microsoft Corporation", "chassis_asset_tag": "1234-5678"}, False),  # on-premises Hyper-V
    ({"sys_vendor": "Amazon EC2", "chassis_asset_tag": None}, False),
    ({}, True),  # nothing captured (unreachable): looked up by name
])
def test_is_azure_vm(identity, azure):
    assert is_azure_vm(identity) is azure


def test_names_the_desk_takes():
    assert upload_name("report.html") == "report.html.txt"
    assert upload_name("FC-1-fleet.tar.gz") == "FC-1-fleet.tar.gz"
    long = "FC-12-" + "x" * 120 + ".tar.gz.part001-of-003"
    cut = upload_name(long)
    assert len(cut) == 110 and cut.endswith(".tar.gz.part001-of-003") and cut != upload_name(long.replace("x", "y"))
    assert ticket_name("FC-7", "ab" * 32) == "fabricase-FC-7-abababababab"
    assert ticket_name("FC 7/x", None) == "fabricase-FC-7-x"


def test_chunks_stay_within_two_of_two_and_a_half_megabytes():
    assert upload_chunks(10) == (10, 1)
    assert upload_chunks(5_242_880) == (CHUNK_BYTES, 2) and CHUNK_BYTES == 2_621_440
    assert upload_chunks(CHUNK_BYTES + 1) == (CHUNK_BYTES, 2)


def _c(from_provider: bool) -> CaseComment:
    return CaseComment(at="2026-11-30T01:00:00Z", author="x", body="y", from_provider=from_provider)


@pytest.mark.parametrize("raw, comments, state", [
    ("Open", (), EscalationState.WAITING_PROVIDER),
    ("Open", (_c(False), _c(True)), EscalationState.WAITING_US),
    ("Open", (_c(True), _c(False)), EscalationState.WAITING_PROVIDER),
    ("Closed", (_c(True),), EscalationState.CLOSED),
])
def test_ticket_state(raw, comments, state):
    assert ticket_state(raw, comments) == state


def _f(kind: str, component: str, severity=Severity.MAJOR, evidence=()) -> Finding:
    return Finding(kind=kind, severity=severity, host="gpu001", component=component, summary=kind,
                   evidence=list(evidence), confidence=0.9)


def test_impact_category_follows_the_worst_finding_and_xid_codes():
    flap = _f("rdma-link-flap", "rdma:mlx5_0/1")
    xid = _f("nvidia-xid", "gpu:3", Severity.CRITICAL,
             [Evidence("xid_13", 1, "events"), Evidence("xid_79", 2, "events")])
    assert impact_category([flap]) == "Resource.Hpc.Unhealthy.IBPortFlapping"
    assert impact_category([flap, xid]) == "Resource.Hpc.Unhealthy.XID79FallenOffBus"
    assert impact_category([_f("nvlink-errors", "nvlink:0/3")]) == "Resource.Hpc.Unhealthy.NvLink"
    assert impact_category([_f("nvidia-xid", "gpu:0", evidence=[Evidence("xid_74", 1, "events")])]) == (
        "Resource.Hpc.Unhealthy.NvLink")
    assert impact_category([_f("fleet-outlier", "rdma:mlx5_2/1")]) == "Resource.Hpc.Unhealthy.IBPerformance"
    assert impact_category([_f("config-drift", "host")]) == GENERIC_CATEGORY
    one = impact_name("/s/VM", "c", [flap], attempt="a1")
    assert one == impact_name("/s/vm", "c", [flap], attempt="a1") != impact_name("/s/vm", "c", [xid], attempt="a1")
    assert one != impact_name("/s/VM", "c", [flap], attempt="a2")  # another attempt: another name


def test_profile_checks_poll_interval_and_endpoint():
    from fabricase.errors import ConfigError
    from fabricase.providers.azure_sdk import AzureProfile

    with pytest.raises(ConfigError, match="poll_interval_s must be a number"):
        AzureProfile.from_dict({"poll_interval_s": "soon"}, "config.toml")
    profile = AzureProfile.from_dict({"endpoint": "https://arm.example/", "ca_bundle": "/ca.pem"}, "config.toml")
    options = profile.client_options()
    assert type(options.pop("retry_policy")).__name__ == "ReadRetryPolicy"  # reads retry in azure-core
    assert options == {"base_url": "https://arm.example", "connection_verify": "/ca.pem"}
    assert set(AzureProfile().client_options()) == {"retry_policy"}
