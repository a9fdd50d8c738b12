"""GCP Compute Engine: where each host's VM sits (instances.get, or an aggregated lookup by name), the health of
its reservation block and sub-block and its placement policy; and the faulty-host channels
(instances.reportHostAsFaulty, reservationSubBlocks.reportFaulty)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from google.cloud import compute_v1

from fabricase.errors import ProviderError
from fabricase.models import Placement
from fabricase.providers.base import FaultyHostReport
from fabricase.providers.gcp_api import GcpApi, as_dict, not_found
from fabricase.providers.gcp_topology import (
    InstanceRef,
    fault_report,
    instance_ref,
    placement_from_instance,
    with_health,
)
from fabricase.providers.identity import cloud_of

__all__ = ["GcpCompute"]


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
                    project=project, zone=ref.zone, instance=ref.name, **self._kw())), "compute")
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
            for _zone, scoped in client.aggregated_list(request=request, **self._kw()):
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
                    project=project, zone=zone, reservation=res, reservation_block=blk, **self._kw()),
                "compute").resource)))
            if sub:
                subs = self._compute("ReservationSubBlocksClient")
                out.append((("sub_block", project, zone, res, blk, sub), lambda: as_dict(self._call(
                    "compute.reservationSubBlocks.get", lambda: subs.get(
                        project=project, zone=zone, parent_name=f"reservations/{res}/reservationBlocks/{blk}",
                        reservation_sub_block=sub, **self._kw()), "compute").resource)))
        if p.region and x.get("project"):
            policies = self._compute("ResourcePoliciesClient")
            for name in x.get("resource_policies", []):
                out.append((("policy", x["project"], p.region, name), lambda name=name: as_dict(self._call(
                    "compute.resourcePolicies.get", lambda: policies.get(
                        project=x["project"], region=p.region, resource_policy=name, **self._kw()), "compute"))))
        return out

    def report_faulty_host(self, placement: Placement, findings: list[Any]) -> FaultyHostReport:
        """Report the host (instances.reportHostAsFaulty: the VM is stopped and restarted on another host), or,
        for an NVLink switch fault of a rack-scale machine or a fault shared by a sub-block, the reservation
        sub-block (reservationSubBlocks.reportFaulty). A request id derived from the report makes a retry safe."""
        report = fault_report(placement, findings)
        if report is None:
            raise ProviderError(f"no finding concerns {placement.host}: nothing to report", where=self.name)
        x = placement.extra
        name, project, zone = x.get("instance_name"), x.get("project"), placement.zone
        if not (name and project and zone):
            raise ProviderError(f"{placement.host} was not located on Compute Engine (no project, zone and instance "
                                "name): locate it first", where=self.name)
        request_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fabricase:gcp:{project}/{zone}/{name}:{report}"))
        if report.channel == "host":
            client = self._compute("InstancesClient")
            body = compute_v1.InstancesReportHostAsFaultyRequest(disruption_schedule="IMMEDIATE", fault_reasons=[
                compute_v1.InstancesReportHostAsFaultyRequestFaultReason(behavior=b, description=d)
                for b, d in report.reasons])
            channel = "compute.instances.reportHostAsFaulty"
            request = compute_v1.ReportHostAsFaultyInstanceRequest(
                project=project, zone=zone, instance=name, instances_report_host_as_faulty_request_resource=body,
                request_id=request_id)
            op = self._call(channel, lambda: client.report_host_as_faulty_unary(request=request, **self._kw()),
                            "faulty")
        else:
            client = self._compute("ReservationSubBlocksClient")
            parent = f"reservations/{x['reservation']}/reservationBlocks/{x['reservation_block']}"
            body = compute_v1.ReservationSubBlocksReportFaultyRequest(
                disruption_schedule="IMMEDIATE", failure_component=report.failure_component, fault_reasons=[
                    compute_v1.ReservationSubBlocksReportFaultyRequestFaultReason(behavior=b, description=d)
                    for b, d in report.reasons])
            channel = "compute.reservationSubBlocks.reportFaulty"
            request = compute_v1.ReportFaultyReservationSubBlockRequest(
                project=x.get("reservation_project") or project, zone=x.get("reservation_zone") or zone,
                parent_name=parent, reservation_sub_block=x["reservation_sub_block"],
                reservation_sub_blocks_report_faulty_request_resource=body, request_id=request_id)
            op = self._call(channel, lambda: client.report_faulty_unary(request=request, **self._kw()), "faulty")
        op = as_dict(op)
        return FaultyHostReport(channel=channel, reference=op.get("name") or None, raw_status=str(op.get("status")))

