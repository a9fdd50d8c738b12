"""Azure VMs of a capture's hosts: which hosts can be Azure VMs (their DMI), which VM of the subscription each
is (by name or computer name), and the placement a VM and its instance view give. Pure: the provider
(providers/azure.py) makes the Resource Manager calls."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from fabricase.models import Placement
from fabricase.providers.identity import AZURE_CHASSIS_ASSET_TAG

__all__ = ["LOCATE_WORKERS", "MICROSOFT", "is_azure_vm", "last_segment", "match_vms", "placement_of",
           "resource_group"]

MICROSOFT = "Microsoft Corporation"
LOCATE_WORKERS = 8  # instance views read at once


def is_azure_vm(identity: dict[str, Any]) -> bool:
    """Whether the captured DMI can be an Azure VM. Nothing captured (an unreachable host): maybe, so the
    host is still looked up by name; on-premises Hyper-V (Microsoft, another asset tag) is not."""
    vendor, tag = identity.get("sys_vendor"), identity.get("chassis_asset_tag")
    if vendor is not None and vendor != MICROSOFT:
        return False
    return tag is None or tag == AZURE_CHASSIS_ASSET_TAG


def _short(name: str | None) -> str:
    return (name or "").split(".")[0].lower()


def last_segment(resource_id: str | None) -> str | None:
    return resource_id.rstrip("/").rsplit("/", 1)[-1] if resource_id else None


def resource_group(resource_id: str | None) -> str | None:
    m = re.search(r"/resourceGroups/([^/]+)", resource_id or "", re.IGNORECASE)
    return m.group(1) if m else None


def match_vms(hosts: list[dict[str, Any]], vms: Iterable[Any]) -> dict[str, Any]:
    """host -> its VM, for the hosts that can be Azure VMs: the VM whose name or computer name is the host's
    short name (or the short name of the hostname it reported)."""
    by_name: dict[str, Any] = {}
    for vm in vms:
        computer = getattr(getattr(vm, "os_profile", None), "computer_name", None)
        for key in {_short(vm.name), _short(computer)} - {""}:
            by_name.setdefault(key, vm)
    matched: dict[str, Any] = {}
    for h in hosts:
        identity = h.get("identity") or {}
        # A Kubernetes node's providerID says Azure (and names the VM) where DMI was not read.
        if not (is_azure_vm(identity) or identity.get("k8s_cloud") == "azure"):
            continue
        vm = (by_name.get(_short(h["host"])) or by_name.get(_short(identity.get("hostname")))
              or by_name.get(_short(identity.get("k8s_name"))))
        if vm is not None:
            matched[h["host"]] = vm
    return matched


def placement_of(provider: str, host: dict[str, Any], vm: Any, view: Any) -> Placement:
    """The host's placement from its VM and instance view (None, None: only what the guest told)."""
    physical = (host.get("identity") or {}).get("physical_host_name")
    if vm is None:
        extra = {"physical_host_name": physical} if physical else {}
        return Placement(host=host["host"], provider=provider, extra=extra,
                         topology=[f"physical-host:{physical}"] if physical else [])
    scale_set = last_segment(getattr(vm.virtual_machine_scale_set, "id", None))
    ppg = last_segment(getattr(vm.proximity_placement_group, "id", None))
    # interconnect_block_profile: azure-mgmt-compute 39 and later (the floor declared in pyproject.toml)
    block = last_segment(getattr(getattr(getattr(vm, "interconnect_block_profile", None), "interconnect_block",
                                         None), "id", None))
    subgroup = getattr(getattr(view, "interconnect_instance_view", None), "interconnect_subgroup_id", None)
    fault = getattr(view, "platform_fault_domain", None)
    power = next((s.code for s in (getattr(view, "statuses", None) or []) if (s.code or "").startswith(
        "PowerState/")), None)
    extra = {
        "resource_id": vm.id,
        "name": vm.name,
        "vm_id": vm.vm_id,
        "resource_group": resource_group(vm.id),
        "physical_host_name": physical,
        "fault_domain": fault if fault is not None else vm.platform_fault_domain,
        "update_domain": getattr(view, "platform_update_domain", None),
        "scale_set": scale_set,
        "proximity_placement_group": ppg,
        "availability_set": last_segment(getattr(vm.availability_set, "id", None)),
        "dedicated_host": last_segment(getattr(vm.host, "id", None)),
        "interconnect_block": block,
        "interconnect_subgroup_id": subgroup,
        "power_state": power,
    }
    topology = [f"interconnect-block:{block}" if block else None,
                f"interconnect-subgroup:{subgroup}" if subgroup else None,
                f"physical-host:{physical}" if physical else None]
    return Placement(
        host=host["host"], provider=provider, instance_id=vm.id,
        instance_type=getattr(vm.hardware_profile, "vm_size", None), region=vm.location,
        zone=(vm.zones or [None])[0], placement_group=scale_set or ppg,
        topology=[t for t in topology if t], extra={k: v for k, v in extra.items() if v is not None},
    )
