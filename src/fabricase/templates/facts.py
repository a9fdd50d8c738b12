"""Where each affected host sits, in every provider's terms, as flat facts a template can lay out.

A Placement holds the common fields (instance id, zone, ...), the topology as shared-component names
(`network-node:<id>`, `block:<id>`, `subblock:<id>`, `switch:<name>`, `rack:<name>`, outermost first) and
the provider's own fields in `extra`. `PLACEMENT_EXTRA` names the `extra` keys the templates read (the first
one present wins), so a provider module knows what to fill in; docs/tickets.md lists them.
"""

from __future__ import annotations

from typing import Any

from fabricase.models import Placement

__all__ = ["PLACEMENT_EXTRA", "TOPOLOGY_LEVELS", "host_facts"]

# fact -> the Placement.extra keys it is read from, first present wins
PLACEMENT_EXTRA: dict[str, tuple[str, ...]] = {
    "az_id": ("az_id", "zone_id", "availability_zone_id"),  # AWS: use1-az4; the AZ name differs per account
    "instance_name": ("instance_name", "name"),  # GCP: the instance's name (instance_id may be the number)
    "project": ("project",),  # GCP project id
    "capacity_block": ("capacity_block_id",),  # AWS CapacityBlockId
    "cluster": ("cluster",),  # GCP physical_host_topology.cluster (or a `cluster:<id>` topology entry)
    "topology_host": ("host",),  # GCP physical_host_topology.host
    "physical_host": ("physical_host", "physical_host_name"),  # GCP physical_host, Azure KVP PhysicalHostName
    "resource_id": ("resource_id",),  # Azure VM ARM id: /subscriptions/.../virtualMachines/<name>
    "fault_domain": ("fault_domain", "platform_fault_domain"),  # Azure
    "update_domain": ("update_domain", "platform_update_domain"),  # Azure
    "interconnect_subgroup": ("interconnect_subgroup_id",),  # Azure interconnect_instance_view
}
# fact -> the topology prefix it is read from
TOPOLOGY_LEVELS: dict[str, str] = {
    "network_nodes": "network-node",
    "cluster": "cluster",
    "block": "block",
    "subblock": "subblock",
    "switch": "switch",
    "rack": "rack",
}
_PLACEMENT_FIELDS = ("instance_id", "instance_type", "region", "zone", "placement_group")


def host_facts(host: str, status: str | None, placement: Placement | None) -> dict[str, Any]:
    """Every fact a ticket template may show about one host; None where unknown."""
    p = placement or Placement(host=host, provider="unknown")
    facts: dict[str, Any] = {"host": host, "status": status, "provider": placement and placement.provider}
    facts.update({name: getattr(p, name) for name in _PLACEMENT_FIELDS})
    facts["topology"] = " > ".join(p.topology) or None
    for fact, prefix in TOPOLOGY_LEVELS.items():
        ids = [t.split(":", 1)[1] for t in p.topology if t.startswith(prefix + ":")]
        facts[fact] = " > ".join(ids) or None
    for fact, keys in PLACEMENT_EXTRA.items():
        found = next((p.extra[k] for k in keys if p.extra.get(k) not in (None, "")), None)
        facts[fact] = found if found is not None else facts.get(fact)
    if facts["instance_name"] is None:
        facts["instance_name"] = p.instance_id
    if facts["resource_id"] is None and (p.instance_id or "").startswith("/subscriptions/"):
        facts["resource_id"] = p.instance_id
    return facts
