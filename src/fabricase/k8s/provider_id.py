"""A node's `spec.providerID` as (provider, instance id, zone): how `locate` finds a Kubernetes node's VM
without reading DMI in the guest. Pure.

The forms the clouds' cloud-controller-managers write (cloud-provider-aws, cloud-provider-gcp,
cloud-provider-azure):

- AWS: `aws:///us-east-1a/i-0123456789abcdef0` (zone, then the EC2 instance id); EKS Fargate and old
  clusters also write `aws:///i-0123...` without the zone.
- GCE: `gce://my-project/us-central1-a/gke-pool-abcd-1234` (project, zone, VM name: GCE's id for `locate`).
- Azure: `azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/NAME`, or a
  scale-set instance `.../virtualMachineScaleSets/SET/virtualMachines/3`. The instance id is the ARM resource
  id without the scheme (what Azure's locate and Impact Reporting take); the resource group is lower-cased by
  some AKS versions, so it is kept as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ProviderId", "parse_provider_id"]

# The zone may be a Local Zone or Wavelength zone (us-west-2-lax-1a, us-east-1-wl1-bos-wlz-1): any one segment.
_AWS = re.compile(r"aws://(?:/(?P<zone>[a-z0-9-]+))?/(?P<id>i-(?:[0-9a-f]{8}|[0-9a-f]{17}))")
_GCE = re.compile(r"gce://(?P<project>[^/]+)/(?P<zone>[a-z]+-[a-z]+\d+-[a-z])/(?P<name>[a-z0-9][a-z0-9-]{0,62})")
_AZURE = re.compile(
    r"azure://(?P<id>/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"(?:virtualMachineScaleSets/(?P<vmss>[^/]+)/virtualMachines/(?P<index>\d+)|virtualMachines/(?P<name>[^/]+)))",
    re.IGNORECASE)


@dataclass(frozen=True)
class ProviderId:
    """What a providerID names. `extra` keeps the cloud's own parts (project, resource group, scale set)."""

    provider: str  # "aws", "gcp", "azure"
    instance_id: str
    zone: str | None = None
    name: str | None = None  # the VM name where the cloud addresses VMs by name (GCE, Azure)
    extra: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, str]:
        out = {"provider": self.provider, "instance_id": self.instance_id}
        if self.zone:
            out["zone"] = self.zone
        if self.name:
            out["name"] = self.name
        return {**out, **dict(self.extra)}


def parse_provider_id(value: str | None) -> ProviderId | None:
    """The provider, instance id and zone a node's providerID names; None for an empty or unknown form
    (kind, k3s, bare metal, another cloud): absence, not an error."""
    text = (value or "").strip()
    if m := _AWS.fullmatch(text):
        return ProviderId("aws", m["id"], zone=m["zone"])
    if m := _GCE.fullmatch(text):
        return ProviderId("gcp", m["name"], zone=m["zone"], name=m["name"], extra=(("project", m["project"]),))
    if m := _AZURE.fullmatch(text):
        extra = [("subscription", m["sub"]), ("resource_group", m["rg"])]
        if m["vmss"]:
            extra += [("scale_set", m["vmss"]), ("scale_set_instance", m["index"])]
        return ProviderId("azure", m["id"], name=m["name"] or f"{m['vmss']}_{m['index']}", extra=tuple(extra))
    return None
