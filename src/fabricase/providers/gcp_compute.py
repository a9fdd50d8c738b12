"""GCP Compute Engine: where each host's VM sits (instances.get, or an aggregated lookup by name), the health of
its reservation block and sub-block and its placement policy; and the faulty-host channels
(instances.reportHostAsFaulty, reservationSubBlocks.reportFaulty)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from google.cloud import compute_v1

from fabricase.diagnosis import finding_id
from fabricase.errors import ProviderError
from fabricase.faulty import HostReport, ReportRequest, describe, suspect_line
from fabricase.models import Finding, Placement
from fabricase.providers.base import FaultyHostReport, PlannedRequest
from fabricase.providers.gcp_api import GcpApi, as_dict, not_found
from fabricase.providers.gcp_topology import (
    InstanceRef,
    fault_report,
    instance_ref,
    placement_from_instance,
    with_health,
)
from fabricase.providers.identity import cloud_of

if TYPE_CHECKING:
    from fabricase.diagnosis import Suspect

__all__ = ["HOST_CHANNEL", "SUB_BLOCK_CHANNEL", "GcpCompute", "planned_report", "report_category", "report_request"]


class GcpCompute(GcpApi):
    """locate and report_faulty_host of the GCP provider."""

    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        """Each host's VM from `instances.get` (or an aggregated lookup by name when the zone is unknown), then
        the reservation block and sub-block health and the placement policy, each read once."""
        placements: list[Placement | None] = [None] * len(hosts)
        todo: list[tuple[int, InstanceRef]] = []
        for i, entry in enumerate(hosts):
            cloud, _ = cloud_of(entry.get("identity"))
            if cloud not in (None, self.name):  # DMI names another cloud: no GCE call for it
                placements[i] = Placement(host=entry["host"], provider=self.name,
                                          extra={"locate_note": f"not a Compute Engine VM (DMI says {cloud})"})
            else:
                todo.append((i, instance_ref(entry, self.profile)))
        if todo:
            workers = max(1, min(int(self.profile.get("locate_workers", 8)), len(todo)))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for (i, _), placement in zip(todo, pool.map(self._locate_one, [r for _, r in todo]), strict=True):
                    placements[i] = placement
            placements = self._enrich([p for p in placements if p is not None])
        return [p for p in placements if p is not None]

    def _locate_one(self, ref: InstanceRef) -> Placement:
        project = self._project(ref.project)
        try:
            if ref.zone:
                client = self._compute("InstancesClient")
                found = self._call("compute.instances.get", lambda: as_dict(client.get(
                    project=project, zone=ref.zone, instance=ref.name, **self._read_kw())), "compute")
            else:
                found = self._find_instance(project, ref.name)
        except ProviderError as exc:
            if not not_found(exc):
                raise
            found = None
        if found is None:
            where = f"{project}/{ref.zone or '*'}"
            return Placement(host=ref.host, provider=self.name,
                             extra={"project": project, "locate_note": f"no instance {ref.name!r} in {where}"})
        return placement_from_instance(ref.host, found, project=project)

    def _find_instance(self, project: str, name: str) -> dict[str, Any] | None:
        client = self._compute("InstancesClient")
        request = compute_v1.AggregatedListInstancesRequest(project=project, filter=f'name = "{name}"')

        def lookup() -> dict[str, Any] | None:
            for _zone, scoped in client.aggregated_list(request=request, **self._read_kw()):
                for inst in scoped.instances:
                    if inst.name == name:
                        return as_dict(inst)
            return None

        return self._call("compute.instances.aggregatedList", lookup, "compute")

    def _enrich(self, placements: list[Placement]) -> list[Placement]:
        """Block and sub-block health and placement policies; one read per distinct resource. An enrichment the
        caller may not read (403) or that is gone (404) leaves the placement as it was."""
        wanted: dict[tuple, Callable[[], Any]] = {}
        for p in placements:
            for key, fetch in self._enrichments(p):
                wanted.setdefault(key, fetch)
        workers = max(1, min(int(self.profile.get("locate_workers", 8)), len(wanted) or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = dict(zip(wanted, pool.map(self._optional, wanted.values()), strict=True))
        out = []
        for p in placements:
            got = {key[0]: results.get(key) for key, _ in self._enrichments(p)}
            policies = [results.get(key) for key, _ in self._enrichments(p) if key[0] == "policy"]
            policy = next((x for x in policies if x and (x.get("group_placement_policy") or x.get("workload_policy"))),
                          None)
            out.append(with_health(p, block=got.get("block"), sub_block=got.get("sub_block"), policy=policy))
        return out

    def _optional(self, fetch: Callable[[], Any]) -> Any:
        try:
            return fetch()
        except ProviderError:
            return None

    def _enrichments(self, p: Placement) -> list[tuple[tuple, Callable[[], Any]]]:
        x = p.extra
        out: list[tuple[tuple, Callable[[], Any]]] = []
        project, zone = x.get("reservation_project") or x.get("project"), x.get("reservation_zone") or p.zone
        if x.get("reservation") and x.get("reservation_block") and project and zone:
            res, blk, sub = x["reservation"], x["reservation_block"], x.get("reservation_sub_block")
            blocks = self._compute("ReservationBlocksClient")
            out.append((("block", project, zone, res, blk), lambda: as_dict(self._call(
                "compute.reservationBlocks.get", lambda: blocks.get(
                    project=project, zone=zone, reservation=res, reservation_block=blk, **self._read_kw()),
                "compute").resource)))
            if sub:
                subs = self._compute("ReservationSubBlocksClient")
                out.append((("sub_block", project, zone, res, blk, sub), lambda: as_dict(self._call(
                    "compute.reservationSubBlocks.get", lambda: subs.get(
                        project=project, zone=zone, parent_name=f"reservations/{res}/reservationBlocks/{blk}",
                        reservation_sub_block=sub, **self._read_kw()), "compute").resource)))
        if p.region and x.get("project"):
            policies = self._compute("ResourcePoliciesClient")
            for name in x.get("resource_policies", []):
                out.append((("policy", x["project"], p.region, name), lambda name=name: as_dict(self._call(
                    "compute.resourcePolicies.get", lambda: policies.get(
                        project=x["project"], region=p.region, resource_policy=name, **self._read_kw()), "compute"))))
        return out

    def report_faulty_host(self, placement: Placement, report: HostReport, *,
                           disruption: str = "future") -> FaultyHostReport:
        """Report the host (instances.reportHostAsFaulty) or, for an NVLink switch fault of a rack-scale machine
        with `disruption="immediate"`, its reservation sub-block (reservationSubBlocks.reportFaulty): exactly the
        request `report-faulty --dry-run` prints (report_request). Its request id is derived from the report, so
        a retry of the same report is the same request."""
        channel, request = report_request(placement, report, disruption)
        if channel == HOST_CHANNEL:
            client = self._compute("InstancesClient")
            op = self._call(channel, lambda: client.report_host_as_faulty_unary(request=request, **self._kw()),
                            "faulty")
        else:
            client = self._compute("ReservationSubBlocksClient")
            op = self._call(channel, lambda: client.report_faulty_unary(request=request, **self._kw()), "faulty")
        op = as_dict(op)
        return FaultyHostReport(channel=channel, reference=op.get("name") or None, raw_status=str(op.get("status")))


# -- the faulty-host requests (pure: what report_faulty_host sends and a dry run prints) --------------------------

HOST_CHANNEL = "compute.instances.reportHostAsFaulty"
SUB_BLOCK_CHANNEL = "compute.reservationSubBlocks.reportFaulty"
# fabricase.faulty.DISRUPTIONS -> the API's DisruptionSchedule. The sub-block channel knows IMMEDIATE only.
_SCHEDULES = {"future": "FUTURE", "immediate": "IMMEDIATE"}


def _belongs(f: Finding, s: Suspect) -> bool:
    return any(fid.split("#", 1)[0] == finding_id(f) for fid in s.findings)


def _host_only(placement: Placement) -> Placement:
    """The placement without its sub-block: what fault_report reports the host itself for."""
    extra = {k: v for k, v in placement.extra.items() if k != "reservation_sub_block"}
    return dataclasses.replace(placement, extra=extra)


def report_category(placement: Placement, findings: Sequence[Finding]) -> str:
    """The behavior of the host's worst finding on the host channel: a report's category on Compute Engine."""
    report = fault_report(_host_only(placement), findings)
    return report.reasons[0][0] if report and report.reasons else "PERFORMANCE"


def _reasons(placement: Placement, report: HostReport, channel: str) -> list[tuple[str, str]]:
    """(behavior, description) per behavior of the report's suspects on `channel` ("host" or "sub-block"): each
    description names the escalation and the case, then the suspects of that behavior."""
    grouped: dict[str, list[str]] = {}
    for s in report.suspects:
        got = fault_report(placement, [f for f in report.findings if _belongs(f, s)])
        behaviors = [b for b, _ in got.reasons] if got is not None and got.channel == channel else []
        for behavior in behaviors or (["PERFORMANCE"] if channel == "host" else []):
            grouped.setdefault(behavior, []).append(suspect_line(s))
    return [(behavior, describe(report.header, lines)) for behavior, lines in grouped.items()]


def report_request(placement: Placement, report: HostReport, disruption: str) -> tuple[str, Any]:
    """(channel, the compute_v1 request) for one host's report. The host channel unless the report is an NVLink
    switch fault of a rack-scale machine and `disruption` is "immediate" (reportFaulty has no FUTURE schedule,
    so a sub-block, every VM in it, is reported only when asked to act now). ProviderError when the host has
    nothing to report or was not located on Compute Engine."""
    if disruption not in _SCHEDULES:
        raise ProviderError(f"unknown disruption schedule {disruption!r} (allowed: {', '.join(_SCHEDULES)})",
                            where="gcp")
    if not report.suspects or not report.findings:
        raise ProviderError(f"{placement.host}: no provider-owned major or critical suspect to report", where="gcp")
    x = placement.extra
    name, project, zone = x.get("instance_name"), x.get("project"), placement.zone
    if not (name and project and zone):
        raise ProviderError(f"{placement.host} was not located on Compute Engine (no project, zone and instance "
                            "name): locate it first", where="gcp")
    whole = fault_report(placement, report.findings)
    sub_block = whole is not None and whole.channel == "sub-block" and disruption == "immediate"
    target = placement if sub_block else _host_only(placement)
    reasons = _reasons(target, report, "sub-block" if sub_block else "host")
    seed = json.dumps([project, zone, name, sub_block, disruption, report.escalation, reasons])
    request_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fabricase:gcp:{seed}"))
    if not sub_block:
        body = compute_v1.InstancesReportHostAsFaultyRequest(disruption_schedule=_SCHEDULES[disruption], fault_reasons=[
            compute_v1.InstancesReportHostAsFaultyRequestFaultReason(behavior=b, description=d) for b, d in reasons])
        return HOST_CHANNEL, compute_v1.ReportHostAsFaultyInstanceRequest(
            project=project, zone=zone, instance=name, instances_report_host_as_faulty_request_resource=body,
            request_id=request_id)
    body = compute_v1.ReservationSubBlocksReportFaultyRequest(
        disruption_schedule="IMMEDIATE", failure_component=whole.failure_component, fault_reasons=[
            compute_v1.ReservationSubBlocksReportFaultyRequestFaultReason(behavior=b, description=d)
            for b, d in reasons])
    return SUB_BLOCK_CHANNEL, compute_v1.ReportFaultyReservationSubBlockRequest(
        project=x.get("reservation_project") or project, zone=x.get("reservation_zone") or zone,
        parent_name=f"reservations/{x['reservation']}/reservationBlocks/{x['reservation_block']}",
        reservation_sub_block=x["reservation_sub_block"],
        reservation_sub_blocks_report_faulty_request_resource=body, request_id=request_id)


def planned_report(placement: Placement, report: HostReport, *, disruption: str = "future") -> ReportRequest:
    """The request report_faulty_host sends for this report, as a dry run prints it: the compute_v1 request's
    fields (snake_case, enums by name), which `compute_v1.<Request>(payload)` reads back."""
    channel, request = report_request(placement, report, disruption)
    operation = channel.removeprefix("compute.")
    return ReportRequest(channel, PlannedRequest("compute", operation, as_dict(request)))
