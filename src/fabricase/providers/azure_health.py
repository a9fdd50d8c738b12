"""Azure Guest Health Reporting (`Microsoft.Impact/workloadImpacts`): telling Azure that a GPU/InfiniBand
node is bad, so that it is taken out and repaired. No SDK exists for it: a PUT through httpx.

    PUT {arm}/subscriptions/{sub}/providers/Microsoft.Impact/workloadImpacts/{name}?api-version=2025-01-01-preview
    {"properties": {"startDateTime", "impactCategory", "impactDescription", "impactedResourceId",
                    "additionalProperties": {"PhysicalHostName", ...}}}

Field names are case-sensitive (camelCase outside, PascalCase inside additionalProperties); PhysicalHostName
is required. The category is chosen from the host's own worst finding (IMPACT_CATEGORIES), the text and start
time come from its fabricase.faulty.HostReport. Source:
../shared/reference/cloud-apis.md section 3.1 (MicrosoftDocs azure-impact-reporting guest-health-*.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from fabricase.errors import ProviderError
from fabricase.faulty import HostReport, ReportRequest
from fabricase.models import Finding, Placement
from fabricase.providers.base import PlannedRequest

__all__ = [
    "CHANNEL",
    "GENERIC_CATEGORY",
    "IMPACT_API_VERSION",
    "IMPACT_CATEGORIES",
    "impact_body",
    "impact_category",
    "impact_name",
    "impact_path",
    "planned_report",
    "report_category",
]

IMPACT_API_VERSION = "2025-01-01-preview"
CHANNEL = "Microsoft.Impact/workloadImpacts"
_UNHEALTHY = "Resource.Hpc.Unhealthy."
GENERIC_CATEGORY = _UNHEALTHY + "HpcGenericFailure"
DESCRIPTION_MAX = 1000  # kept short: the support ticket carries the full text

# finding kind -> category (the documented Resource.Hpc.Unhealthy.* list); Xid codes are refined below
IMPACT_CATEGORIES: dict[str, str] = {
    "rdma-link-flap": _UNHEALTHY + "IBPortFlapping",
    "kernel-link-down": _UNHEALTHY + "IBPortFlapping",
    "rdma-port-down": _UNHEALTHY + "IBPortDown",
    "rdma-symbol-errors": _UNHEALTHY + "IBPerformance",
    "rdma-port-errors": _UNHEALTHY + "IBPerformance",
    "rdma-speed-downshift": _UNHEALTHY + "IBPerformance",
    "rdma-bw-low": _UNHEALTHY + "IBPerformance",
    "rdma-bw-outlier": _UNHEALTHY + "IBPerformance",
    "nccl-nic-errors": _UNHEALTHY + "IBPerformance",
    "nvlink-inactive": _UNHEALTHY + "NvLink",
    "nvlink-errors": _UNHEALTHY + "NvLink",
    "gpu-fabric-unhealthy": _UNHEALTHY + "NvLink",
    "nvswitch-sxid": _UNHEALTHY + "NvLink",
    "nvswitch-fm-errors": _UNHEALTHY + "NvLink",
    "gpu-memory-remap": _UNHEALTHY + "HpcRowRemapFailure",
    "dcgm-health": _UNHEALTHY + "HpcGpuDcgmDiagFailure",
    "nvidia-xid": _UNHEALTHY + "GpuXIDError",
}
# Xid code -> its own category; 74 and 144-150 are NVLink errors (docs/findings.md, nvidia-xid)
_XID_CATEGORIES: dict[int, str] = {
    79: _UNHEALTHY + "XID79FallenOffBus",
    48: _UNHEALTHY + "XID48DoubleBitECC",
    94: _UNHEALTHY + "XID94ContainedECCError",
    95: _UNHEALTHY + "XID95UncontainedECCError",
    74: _UNHEALTHY + "NvLink",
    **{code: _UNHEALTHY + "NvLink" for code in range(144, 151)},
}
_XID_METRIC = re.compile(r"xid_(\d+)$")
# a link or port finding on an RDMA component is an InfiniBand fault on ND-series VMs (their fabric is IB)
_IB_BY_COMPONENT = {"fleet-outlier": _UNHEALTHY + "IBPerformance", "perf-test-failed": _UNHEALTHY + "IBPerformance"}


def _xid_category(finding: Finding) -> str:
    codes = [int(m.group(1)) for e in finding.evidence if (m := _XID_METRIC.match(e.metric or ""))]
    for code in sorted(codes, key=lambda c: (c not in _XID_CATEGORIES, c)):
        if code in _XID_CATEGORIES:
            return _XID_CATEGORIES[code]
    return IMPACT_CATEGORIES["nvidia-xid"]


def _category(finding: Finding) -> str | None:
    if finding.kind == "nvidia-xid":
        return _xid_category(finding)
    if finding.kind in IMPACT_CATEGORIES:
        return IMPACT_CATEGORIES[finding.kind]
    if finding.component.startswith("rdma:"):
        return _IB_BY_COMPONENT.get(finding.kind)
    return None


def impact_category(findings: Sequence[Finding]) -> str:
    """The category of the worst finding that has one (findings ranked by Finding.sort_key);
    Resource.Hpc.Unhealthy.HpcGenericFailure when none does."""
    for finding in sorted(findings, key=lambda f: f.sort_key):
        category = _category(finding)
        if category is not None:
            return category
    return GENERIC_CATEGORY


def impact_name(resource_id: str, category: str, findings: Sequence[Finding], *, attempt: str) -> str:
    """The name of one report attempt. Azure wants impact names unique (a reused name is refused), so each
    attempt gets its own: `attempt` is a fresh random token per call of report_faulty_host, kept across that
    call's transport retries (a retried PUT is the same report). Reporting the same host again is a new report;
    not reporting it twice is the tracker's record's job, not the name's."""
    digest = hashlib.sha256("\n".join([resource_id.lower(), category, *sorted(
        f"{f.kind}|{f.component}|{f.summary}" for f in findings)]).encode()).hexdigest()
    token = re.sub(r"[^A-Za-z0-9]", "", attempt)[:16]
    if not token:
        raise ValueError("impact_name needs an attempt token")
    return f"fabricase-{digest[:16]}-{token}"


def impact_path(subscription: str, name: str) -> str:
    return f"/subscriptions/{subscription}/providers/Microsoft.Impact/workloadImpacts/{name}"


def report_category(placement: Placement, findings: Sequence[Finding]) -> str:
    """A report's category on Azure: the impact category of the host's own worst finding."""
    return impact_category(findings)


def impact_body(placement: Placement, report: HostReport, *, physical_host: str) -> dict[str, Any]:
    """The workloadImpacts PUT body for one host's report (placement.instance_id: its ARM resource id): the
    report's category (from THIS host's suspects), its first error as startDateTime, and its description, which
    names the escalation and the support case. ProviderError when there is nothing to report or the VM is not
    known well enough to be reported."""
    if not report.suspects:
        raise ProviderError(f"{placement.host}: no provider-owned major or critical suspect to report; Guest Health "
                            "Reporting takes the node out of service, so nothing is sent", where="azure")
    if not placement.instance_id or not physical_host:
        need = "its ARM resource id (locate it first)" if not placement.instance_id else (
            "its PhysicalHostName (Hyper-V KVP pool 3 in the capture)")
        raise ProviderError(f"Guest Health Reporting needs {need}", where=placement.host)
    additional: dict[str, Any] = {"PhysicalHostName": physical_host}
    if placement.region:
        additional["Location"] = placement.region
    return {
        "properties": {
            "startDateTime": report.start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "impactCategory": report.category,
            "impactDescription": report.description[:DESCRIPTION_MAX],
            "impactedResourceId": placement.instance_id,
            "additionalProperties": additional,
        }
    }


def planned_report(placement: Placement, report: HostReport, *, disruption: str = "future") -> ReportRequest:
    """The PUT report_faulty_host sends for this report, as a dry run prints it. The impact name shown ends in
    "dryrun": a real report names each attempt afresh (impact_name). Azure has no disruption schedule."""
    body = impact_body(placement, report, physical_host=placement.extra.get("physical_host_name") or "")
    name = impact_name(placement.instance_id or "", report.category, report.findings, attempt="dryrun")
    return ReportRequest(CHANNEL, PlannedRequest("Microsoft.Impact", f"PUT workloadImpacts/{name}", body))
