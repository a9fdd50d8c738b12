"""Where each affected host sits, in every provider's terms, as flat facts a template can lay out.

A Placement holds the common fields (instance id, zone, ...), the topology as shared-component names
(`network-node:<id>`, `block:<id>`, `subblock:<id>`, `switch:<name>`, `rack:<name>`, outermost first) and
the provider's own fields in `extra`. `PLACEMENT_EXTRA` names the `extra` keys the templates read (the first
one present wins), so a provider module knows what to fill in; docs/tickets.md lists them.

`provider_view` says, in a few words per host, what the provider's own APIs reported about it when fabricase
located it: the AWS Capacity Block's interconnect status, the GCP reservation block and sub-block health, the
Azure physical host, an instance that is not running, a lookup that found nothing. A support engineer reads the
provider's view beside our evidence, so a "healthy" where we see errors is said too.
"""

from __future__ import annotations

from typing import Any

from fabricase.models import Placement

__all__ = ["PLACEMENT_EXTRA", "TOPOLOGY_LEVELS", "host_facts", "provider_view"]

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
    # What the provider said of the host (provider_view):
    "interconnect_status": ("capacity_block_interconnect",),  # AWS DescribeCapacityBlockStatus InterconnectStatus
    "interconnect_unread": ("capacity_block_status_unavailable",),  # AWS: why that status could not be read
    "reservation_block": ("reservation_block",),  # GCP: the reservation block the VM consumes
    "reservation_sub_block": ("reservation_sub_block",),
    "block_health": ("reservation_block_health",),  # GCP ReservationBlock.health_info, as one line
    "sub_block_health": ("reservation_sub_block_health",),  # GCP ReservationSubBlock.health_info
    "instance_state": ("state", "status", "power_state"),  # AWS State.Name, GCP status, Azure PowerState/...
    "locate_note": ("locate_note",),  # why the provider's lookup found no instance
}
# Instance states that say nothing a support engineer must read (provider_view leaves them out).
_RUNNING = frozenset({"running", "RUNNING", "PowerState/running"})
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
    facts["provider_view"] = provider_view(facts)
    return facts


def provider_view(facts: dict[str, Any]) -> list[str]:
    """What the provider's APIs said of one host (its host_facts), as short phrases; [] when they said nothing
    beyond where it is."""
    said = []
    status = facts.get("interconnect_status")
    block = facts.get("capacity_block")
    if status:
        said.append(f"Capacity Block {block or '(id unknown)'} interconnect: {status}")
    elif block and facts.get("interconnect_unread"):
        said.append(f"Capacity Block {block} interconnect status not read: {facts['interconnect_unread']}")
    for level, name, health in (("reservation block", "reservation_block", "block_health"),
                                ("sub-block", "reservation_sub_block", "sub_block_health")):
        if facts.get(health):
            said.append(f"{level} {facts.get(name) or '(id unknown)'} health: {facts[health]}")
    if facts.get("provider") == "azure" and facts.get("physical_host"):
        said.append(f"physical host {facts['physical_host']}")
    state = facts.get("instance_state")
    if state and str(state) not in _RUNNING:
        said.append(f"instance state: {str(state).removeprefix('PowerState/')}")
    if facts.get("locate_note"):
        said.append(f"not located: {facts['locate_note']}")
    return said
