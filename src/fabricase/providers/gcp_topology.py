"""GCP, pure part: which instance a captured host is, where an instance sits (cluster > block > sub-block > host),
and what the faulty-host channels are told. No SDK, no I/O: instances arrive as the dicts the SDK's `to_dict`
gives (snake_case field names, string enums), so every rule here is table-tested without a server.

Sources: ../shared/reference/cloud-apis.md 2.1; google-cloud-compute 1.57.0 `types/compute.py`
(`ResourceStatus.physical_host` is "blockId/subBlockId/hostId"; `physical_host_topology` has cluster, block,
subblock and host; `InstancesReportHostAsFaultyRequestFaultReason.Behavior`,
`ReservationSubBlocksReportFaultyRequest.FailureComponent` and its `FaultReason.Behavior`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fabricase.models import Finding, Placement
from fabricase.redact import gate

__all__ = [
    "HOST_BEHAVIORS", "SUBBLOCK_BEHAVIORS", "FaultReport", "InstanceRef", "fault_report",
    "instance_ref", "last_segment", "placement_from_instance", "reservation_parts", "with_health",
]  # fmt: skip

# The guest's FQDN: NAME.ZONE.c.PROJECT.internal (zonal DNS) or NAME.c.PROJECT.internal (global DNS).
_GCE_FQDN = re.compile(
    r"(?P<name>[a-z][-a-z0-9]*)(?:\.(?P<zone>[a-z]+-[a-z]+\d+-[a-z]))?\.c\.(?P<project>[a-z][-a-z0-9]*)\.internal\.?"
)
_RESERVATION = re.compile(
    r"(?:projects/(?P<project>[^/]+)/)?(?:zones/(?P<zone>[^/]+)/)?reservations/(?P<reservation>[^/]+)"
    r"(?:/reservationBlocks/(?P<block>[^/]+))?(?:/reservationSubBlocks/(?P<sub_block>[^/]+))?$"
)

# Behaviors each channel takes (the SDK's enums, less the UNDEFINED/UNSPECIFIED values).
HOST_BEHAVIORS = ("CHIP_ERROR", "PERFORMANCE", "SILENT_DATA_CORRUPTION", "UNRECOVERABLE_GPU_ERROR")
SUBBLOCK_BEHAVIORS = (
    "GPU_ERROR", "NVSWITCH_FAULT_CONTROLLER_ERROR", "NVSWITCH_FAULT_DEGRADED_BANDWIDTH", "NVSWITCH_FAULT_SWITCH_ERROR",
    "PERFORMANCE", "SILENT_DATA_CORRUPTION", "SWITCH_FAILURE",
)  # fmt: skip
# Machine families whose NVLink domain spans a rack (GB200/GB300 NVL72): their NVLink switches belong to the
# reservation sub-block, not to one host, so a switch fault goes to the sub-block's channel.
_RACK_NVLINK_FAMILIES = ("a4x",)
_SWITCH_KINDS = {"nvswitch-sxid": "NVSWITCH_FAULT_SWITCH_ERROR", "nvswitch-fm-errors": "NVSWITCH_FAULT_SWITCH_ERROR"}
# Host channel: an Xid the catalog calls critical is "unrecoverable GPU error identified by an XID"; a GPU that
# cannot be used is a chip error; everything else (links, NICs, PCIe, NVLink counters) is performance.
_CHIP_KINDS = {"gpu-memory-remap", "gpu-fabric-unhealthy", "dcgm-health", "gpu-pcie-downgraded"}
DESCRIPTION_MAX = 1000  # not documented; the reason is one line of evidence, the case has the rest


@dataclass(frozen=True)
class InstanceRef:
    """The instance a host is, as far as the capture and the profile say. zone/project None: unknown yet."""

    host: str
    name: str
    zone: str | None
    project: str | None


def last_segment(value: str | None) -> str | None:
    """`.../zones/us-central1-b` -> `us-central1-b`; None stays None."""
    return value.rstrip("/").rsplit("/", 1)[-1] if value else None


def instance_ref(entry: Mapping[str, Any], profile: Mapping[str, Any]) -> InstanceRef:
    """The instance a host summary names: the hostname (else the host name) gives the instance name, and its
    FQDN the zone and project; the profile's `zone` and `project` win over what the name says."""
    identity = entry.get("identity") or {}
    hostname = str(identity.get("hostname") or entry["host"]).strip().lower()
    match = _GCE_FQDN.fullmatch(hostname)
    name = match["name"] if match else hostname.split(".", 1)[0]
    zone = profile.get("zone") or identity.get("zone") or (match and match["zone"]) or None
    project = profile.get("project") or (match and match["project"]) or identity.get("k8s_project") or None
    return InstanceRef(host=entry["host"], name=name, zone=zone, project=project)


def reservation_parts(name: str | None) -> dict[str, str] | None:
    """A reservation, block or sub-block resource name as its parts (project, zone, reservation, block,
    sub_block: those present), or None when it is not one."""
    if not name:
        return None
    match = _RESERVATION.search(name.strip())
    if not match:
        return None
    return {k: v for k, v in match.groupdict().items() if v}


def _topology_levels(resource_status: Mapping[str, Any]) -> dict[str, str | None]:
    topo = resource_status.get("physical_host_topology") or {}
    levels = {k: topo.get(k) or None for k in ("cluster", "block", "subblock", "host")}
    physical = resource_status.get("physical_host") or ""
    parts = [p for p in physical.split("/") if p]
    if not any(levels.values()) and len(parts) == 3:  # older VMs: physical_host alone, blockId/subBlockId/hostId
        levels.update(block=parts[0], subblock=parts[1], host=parts[2])
    return levels


def placement_from_instance(host: str, instance: Mapping[str, Any], *, project: str) -> Placement:
    """A Placement from an `Instance` (as a dict): topology `cluster:`, `block:`, `subblock:` outermost first;
    the physical host, reservation, policies and accelerator topology in `extra`."""
    status = instance.get("resource_status") or {}
    levels = _topology_levels(status)
    zone = last_segment(instance.get("zone"))
    policies = [last_segment(p) for p in instance.get("resource_policies") or []]
    consumed = status.get("reservation_consumption_info") or {}
    reservation = (reservation_parts(consumed.get("consumed_reservation_sub_block"))
                   or reservation_parts(consumed.get("consumed_reservation_block"))
                   or reservation_parts(consumed.get("consumed_reservation")) or {})
    accel = ((status.get("physical_host_topology") or {}).get("additional_attributes") or {}).get(
        "accelerator_topology_ids") or {}
    extra: dict[str, Any] = {
        "project": project,
        "instance_name": instance.get("name"),
        "status": instance.get("status"),
        "physical_host": status.get("physical_host"),
        "cluster": levels["cluster"],
        "host": levels["host"],
        "resource_policies": policies,
        "reservation": reservation.get("reservation"),
        "reservation_block": reservation.get("block"),
        "reservation_sub_block": reservation.get("sub_block"),
        "reservation_project": reservation.get("project"),
        "reservation_zone": reservation.get("zone"),
        "accelerator_topology_ids": dict(accel),
    }
    return Placement(
        host=host,
        provider="gcp",
        instance_id=str(instance["id"]) if instance.get("id") not in (None, "") else instance.get("name"),
        instance_type=last_segment(instance.get("machine_type")),
        region=zone.rsplit("-", 1)[0] if zone and "-" in zone else None,
        zone=zone,
        placement_group=policies[0] if policies else None,
        topology=[f"{level}:{levels[level]}" for level in ("cluster", "block", "subblock") if levels[level]],
        extra={k: v for k, v in extra.items() if v not in (None, "", [], {})},
    )


def _health_line(health: Mapping[str, Any], counts: tuple[str, ...]) -> str | None:
    status = health.get("health_status")
    if not status:
        return None
    numbers = ", ".join(f"{k.replace('_count', '').replace('_', ' ')} {health[k]}" for k in counts
                        if health.get(k) is not None)
    return f"{status} ({numbers})" if numbers else str(status)


def with_health(placement: Placement, *, block: Mapping[str, Any] | None = None,
                sub_block: Mapping[str, Any] | None = None, policy: Mapping[str, Any] | None = None) -> Placement:
    """The placement with what the reservation block, sub-block and placement policy say (dicts of
    `ReservationBlock`, `ReservationSubBlock`, `ResourcePolicy`), in `extra` and `placement_group`."""
    extra = dict(placement.extra)
    group = placement.placement_group
    if block:
        line = _health_line(block.get("health_info") or {}, ("healthy_sub_block_count", "degraded_sub_block_count"))
        if line:
            extra["reservation_block_health"] = line
    if sub_block:
        line = _health_line(sub_block.get("health_info") or {}, (
            "healthy_host_count", "degraded_host_count", "healthy_infra_count", "degraded_infra_count"))
        if line:
            extra["reservation_sub_block_health"] = line
    if policy:
        rules = {**(policy.get("group_placement_policy") or {}), **(policy.get("workload_policy") or {})}
        if rules:
            group = policy.get("name") or group
            extra["placement_policy"] = {k.rstrip("_"): v for k, v in sorted(rules.items())}
    return dataclasses.replace(placement, placement_group=group, extra=extra)


@dataclass(frozen=True)
class FaultReport:
    """What a faulty-host channel is told: `channel` "host" (instances.reportHostAsFaulty) or "sub-block"
    (reservationSubBlocks.reportFaulty, with `failure_component`), and (behavior, description) reasons."""

    channel: str
    reasons: tuple[tuple[str, str], ...]
    failure_component: str | None = None


def _relevant(placement: Placement, findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.host == placement.host or (f.host is None and f.component in placement.topology)]


def _host_behavior(f: Finding) -> str:
    if f.kind == "nvidia-xid" and str(f.severity) == "critical":
        return "UNRECOVERABLE_GPU_ERROR"
    if f.kind in _CHIP_KINDS:
        return "CHIP_ERROR"
    return "PERFORMANCE"


def _reasons(pairs: list[tuple[str, Finding]]) -> tuple[tuple[str, str], ...]:
    grouped: dict[str, list[str]] = {}
    for behavior, f in pairs:
        grouped.setdefault(behavior, []).append(f"{f.component}: {f.summary}")
    out = []
    for behavior, lines in grouped.items():
        text = gate.text("; ".join(lines))  # the joined text: a key spread over findings is one key again
        out.append((behavior, text if len(text) <= DESCRIPTION_MAX else text[: DESCRIPTION_MAX - 3] + "..."))
    return tuple(out)


def fault_report(placement: Placement, findings: Iterable[Finding]) -> FaultReport | None:
    """The report for this host's findings, or None when no finding concerns it. NVSwitch faults on a rack-scale
    NVLink machine (A4X) and a fault shared by a sub-block's hosts go to the sub-block (NVLINK_SWITCH, or
    MULTIPLE_FAULTY_HOSTS); everything else reports the host."""
    ordered = sorted(_relevant(placement, findings), key=lambda f: f.sort_key)
    if not ordered:
        return None
    rack_nvlink = (placement.instance_type or "").startswith(_RACK_NVLINK_FAMILIES)
    switch = [(_SWITCH_KINDS[f.kind], f) for f in ordered if f.kind in _SWITCH_KINDS]
    if rack_nvlink and switch and placement.extra.get("reservation_sub_block"):
        return FaultReport("sub-block", _reasons(switch), failure_component="NVLINK_SWITCH")
    shared = [("PERFORMANCE", f) for f in ordered if f.host is None and f.component.startswith("subblock:")]
    if shared and placement.extra.get("reservation_sub_block"):
        return FaultReport("sub-block", _reasons(shared), failure_component="MULTIPLE_FAULTY_HOSTS")
    own = [(_host_behavior(f), f) for f in ordered if f.host == placement.host]
    if not own:
        return None
    return FaultReport("host", _reasons(own))
