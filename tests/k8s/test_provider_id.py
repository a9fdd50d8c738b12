"""providerID parsing (table) and the identity fallback that lets locate work without DMI."""

from __future__ import annotations

import pytest

from fabricase.k8s.provider_id import parse_provider_id
from fabricase.providers.aws_ec2 import instance_id_of
from fabricase.providers.identity import cloud_of, with_kubernetes_node

SUB = "0b1f6471-1bf0-4dda-aec3-cb9272f09590"

CASES = [
    ("aws:///us-east-1a/i-0123456789abcdef0", "aws", "i-0123456789abcdef0", "us-east-1a", None),
    ("aws:///eu-west-2b/i-0a1b2c3d", "aws", "i-0a1b2c3d", "eu-west-2b", None),
    ("aws:///us-west-2-lax-1a/i-0123456789abcdef0", "aws", "i-0123456789abcdef0", "us-west-2-lax-1a", None),
    ("aws:///i-0123456789abcdef0", "aws", "i-0123456789abcdef0", None, None),
    ("gce://my-proj-123/us-central1-a/gke-train-pool-1-abcd1234-x9z2", "gcp", "gke-train-pool-1-abcd1234-x9z2",
     "us-central1-a", "gke-train-pool-1-abcd1234-x9z2"),
    (f"azure:///subscriptions/{SUB}/resourceGroups/mc_rg_aks_eastus/providers/Microsoft.Compute/"
     "virtualMachines/gpu-vm-7", "azure",
     f"/subscriptions/{SUB}/resourceGroups/mc_rg_aks_eastus/providers/Microsoft.Compute/virtualMachines/gpu-vm-7",
     None, "gpu-vm-7"),
    (f"azure:///subscriptions/{SUB}/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/"
     "aks-gpu-12345678-vmss/virtualMachines/3", "azure",
     f"/subscriptions/{SUB}/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/"
     "aks-gpu-12345678-vmss/virtualMachines/3", None, "aks-gpu-12345678-vmss_3"),
]


@pytest.mark.parametrize(("value", "provider", "instance", "zone", "name"), CASES)
def test_provider_ids_of_each_cloud(value: str, provider: str, instance: str, zone: str | None,
                                    name: str | None) -> None:
    parsed = parse_provider_id(value)
    assert parsed is not None
    assert (parsed.provider, parsed.instance_id, parsed.zone, parsed.name) == (provider, instance, zone, name)


def test_azure_scale_set_parts_are_kept() -> None:
    parsed = parse_provider_id(CASES[-1][0])
    assert parsed is not None
    assert dict(parsed.extra) == {"subscription": SUB, "resource_group": "MC_rg",
                                  "scale_set": "aks-gpu-12345678-vmss", "scale_set_instance": "3"}


def test_gce_project_is_kept() -> None:
    parsed = parse_provider_id(CASES[4][0])
    assert parsed is not None and dict(parsed.extra) == {"project": "my-proj-123"}


@pytest.mark.parametrize("value", [None, "", "kind://docker/kind/kind-worker", "k3s://node-1",
                                   "aws:///us-east-1a/not-an-instance", "gce://only/two",
                                   "azure:///subscriptions/x/resourceGroups/y/providers/Other/thing/z",
                                   "openstack:///4b5e1a2c-0000-4000-8000-000000000000"])
def test_unknown_or_malformed_forms_are_absent_not_errors(value: str | None) -> None:
    assert parse_provider_id(value) is None


def test_no_dmi_locates_by_provider_id() -> None:
    """A node whose guest said nothing of its cloud: the cluster's record names provider, id, zone, type."""
    node = {"node": "ip-10-0-1-7.ec2.internal", "provider_id": CASES[0][0], "zone": "us-east-1a",
            "instance_type": "p5.48xlarge"}
    identity = with_kubernetes_node({"hostname": "ip-10-0-1-7"}, node)
    assert cloud_of(identity) == ("aws", "i-0123456789abcdef0")
    assert instance_id_of(identity) == "i-0123456789abcdef0"
    assert (identity["zone"], identity["instance_type"], identity["hostname"]) == (
        "us-east-1a", "p5.48xlarge", "ip-10-0-1-7")


def test_dmi_wins_over_the_cluster_record() -> None:
    dmi = {"sys_vendor": "Amazon EC2", "board_asset_tag": "i-0fedcba9876543210", "instance_type": "p4d.24xlarge"}
    identity = with_kubernetes_node(dmi, {"node": "n", "provider_id": CASES[0][0], "instance_type": "p5.48xlarge"})
    assert cloud_of(identity) == ("aws", "i-0fedcba9876543210")
    assert identity["instance_type"] == "p4d.24xlarge"
    assert identity["k8s_instance_type"] == "p5.48xlarge"  # kept beside it, for the ticket to show a mismatch


def test_gce_and_azure_get_an_instance_from_the_provider_id() -> None:
    gce_dmi = {"sys_vendor": "Google", "product_name": "Google Compute Engine"}
    assert cloud_of(gce_dmi) == ("gcp", None)
    identity = with_kubernetes_node(gce_dmi, {"node": "gke-x", "provider_id": CASES[4][0]})
    assert cloud_of(identity) == ("gcp", "gke-train-pool-1-abcd1234-x9z2")
    assert (identity["zone"], identity["k8s_project"]) == ("us-central1-a", "my-proj-123")
    azure = with_kubernetes_node({}, {"node": "aks-gpu-vmss000003", "provider_id": CASES[-1][0]})
    assert cloud_of(azure) == ("azure", CASES[-1][2])
    assert azure["k8s_scale_set"] == "aks-gpu-12345678-vmss"


def test_no_record_and_unknown_provider_change_nothing() -> None:
    assert with_kubernetes_node({"hostname": "h"}, None) == {"hostname": "h"}
    kind = with_kubernetes_node({}, {"node": "kind-worker", "provider_id": "kind://docker/kind/kind-worker"})
    assert cloud_of(kind) == (None, None)
    assert kind == {"k8s_node": "kind-worker", "k8s_provider_id": "kind://docker/kind/kind-worker"}
