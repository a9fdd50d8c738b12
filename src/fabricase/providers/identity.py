"""Which cloud a host runs in, and its instance id, from what the capture read on the host: no network, no
metadata service. Pure.

What each cloud writes into the guest (../shared/reference/cloud-apis.md 1.3 and 3.1; cloud-init's and
ds-identify's platform checks read the same strings):

- AWS Nitro: `sys_vendor` "Amazon EC2", `product_name` the instance type; the instance id in `board_asset_tag`
  (`i-0af01c0123456789a`).
- AWS Xen (older types): `sys_vendor` "Xen", `bios_version` "4.11.amazon" (`bios_vendor` "Amazon"); no id in DMI.
- GCE: `sys_vendor` "Google", `product_name` "Google Compute Engine", `bios_vendor` "Google"; no id in DMI (the
  VM name is the hostname).
- Azure: `sys_vendor` "Microsoft Corporation", `product_name` "Virtual Machine", `chassis_asset_tag`
  7783-7084-3265-9085-8269-3286-77; no id in DMI; the physical host is `PhysicalHostName` in Hyper-V KVP pool 3.

Plain Hyper-V has the same vendor and product as Azure but another chassis asset tag: it is not Azure.

A Kubernetes node also has what its cluster says of it: `spec.providerID` (fabricase.k8s.provider_id), its
zone and instance type labels, recorded by the k8s transport in the capture's kubernetes.json.
`with_kubernetes_node` adds them to the identity where the guest said nothing, and `cloud_of` falls back to
them, so that `locate` works on nodes whose DMI was not read (or says nothing, as on GCE and Azure).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["AZURE_CHASSIS_ASSET_TAG", "EC2_INSTANCE_ID", "azure_physical_host", "cloud_of", "with_kubernetes_node"]

AZURE_CHASSIS_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"  # "MSFT AZURE VM" in ASCII codes
EC2_INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")


def _field(identity: Mapping[str, Any], name: str) -> str:
    value = identity.get(name)
    return value.strip() if isinstance(value, str) else ""


def _is_aws(identity: Mapping[str, Any]) -> bool:
    vendor = _field(identity, "sys_vendor").lower()
    bios = f"{_field(identity, 'bios_vendor')} {_field(identity, 'bios_version')}".lower()
    return vendor.startswith("amazon") or (vendor == "xen" and "amazon" in bios)


def _is_gcp(identity: Mapping[str, Any]) -> bool:
    return (_field(identity, "product_name") == "Google Compute Engine"
            or _field(identity, "sys_vendor") == "Google" or _field(identity, "bios_vendor") == "Google")


def _is_azure(identity: Mapping[str, Any]) -> bool:
    return _field(identity, "chassis_asset_tag") == AZURE_CHASSIS_ASSET_TAG


def cloud_of(identity: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(provider, instance id) from a host's identity record (parsers.identity.host_identity): provider is
    "aws", "gcp", "azure" or None (on-premises, another cloud, nothing captured); the instance id is the one
    the host itself shows (EC2 Nitro's `board_asset_tag`), else None."""
    if not identity:
        return None, None
    k8s_cloud, k8s_id = _field(identity, "k8s_cloud") or None, _field(identity, "k8s_instance_id") or None
    if _is_aws(identity):
        tag = _field(identity, "board_asset_tag")
        if EC2_INSTANCE_ID.fullmatch(tag):
            return "aws", tag
        return "aws", k8s_id if k8s_cloud == "aws" else None
    if _is_azure(identity):
        return "azure", k8s_id if k8s_cloud == "azure" else None
    if _is_gcp(identity):
        return "gcp", k8s_id if k8s_cloud == "gcp" else None
    return (k8s_cloud, k8s_id) if k8s_cloud else (None, None)


def with_kubernetes_node(identity: Mapping[str, Any] | None, node: Mapping[str, Any] | None) -> dict[str, Any]:
    """The identity plus what the cluster says of the node (a kubernetes.json record: node, provider_id, zone,
    instance_type). What the guest itself said is never overwritten; the providerID's parts are added under
    k8s_* keys, and as `instance_id`, `zone`, `instance_type` (the keys locate reads) where those are absent."""
    from fabricase.k8s.provider_id import parse_provider_id

    out = dict(identity or {})
    if not node:
        return out
    out.setdefault("k8s_node", node.get("node"))
    for key in ("provider_id", "zone", "instance_type"):
        if node.get(key):
            out.setdefault(f"k8s_{key}", node[key])
    parsed = parse_provider_id(node.get("provider_id"))
    if parsed is not None:
        out.setdefault("k8s_cloud", parsed.provider)
        out.setdefault("k8s_instance_id", parsed.instance_id)
        for key, value in parsed.to_dict().items():
            if key not in ("provider", "instance_id"):
                out.setdefault(f"k8s_{key}", value)
        out.setdefault("instance_id", parsed.instance_id)
    zone = node.get("zone") or (parsed.zone if parsed else None)
    if zone:
        out.setdefault("zone", zone)
    if node.get("instance_type"):
        out.setdefault("instance_type", node["instance_type"])
    return out


def azure_physical_host(identity: Mapping[str, Any] | None) -> str | None:
    """The Azure physical host name (`PhysicalHostName` of Hyper-V KVP pool 3), when the identity holds it as
    `physical_host_name` (parsers.kvp.parse_kvp_pool reads the pool file); None otherwise."""
    value = (identity or {}).get("physical_host_name")
    return (value.strip() or None) if isinstance(value, str) else None
