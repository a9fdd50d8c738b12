"""EC2 side of the AWS provider: host -> instance -> placement and network topology, and the faulty-host report.

Pure helpers (instance ids, batching, placement building, reason codes, the ReportInstanceStatus request of a
fabricase.faulty.HostReport) and thin API walkers that take a `call`
(the provider's retrying wrapper) and a boto3 EC2 client. Field names are botocore's ec2 model (see
../shared/reference/cloud-apis.md section 1.2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from fabricase.errors import ProviderError
from fabricase.faulty import HostReport, ReportRequest
from fabricase.models import Finding, Placement
from fabricase.providers.base import PlannedRequest
from fabricase.providers.identity import EC2_INSTANCE_ID

__all__ = [
    "BATCH", "CHANNEL", "IDENTITY_KEYS", "REASON_CODES", "describe_capacity_blocks", "describe_instances",
    "describe_topology", "instance_id_of", "placement_of", "planned_report", "reason_codes", "report_category",
    "report_params", "require_instance",
]  # fmt: skip

# describe_instances (instance-id filter), describe_instance_topology (InstanceIds: "Maximum 100 explicitly
# specified instance IDs") and describe_capacity_block_status are all asked about at most this many ids at once.
BATCH = 100
# Where a host's identity names its instance: the parser's DMI board_asset_tag (EC2 Nitro puts the instance id
# there), or an instance id a capture recorded directly.
IDENTITY_KEYS = ("instance_id", "ec2_instance_id", "board_asset_tag")

Call = Callable[[str, Callable[[], Any]], Any]


def instance_id_of(identity: Mapping[str, Any] | None) -> str | None:
    """The EC2 instance id a host's identity names, or None (a placeholder asset tag is not an id)."""
    for key in IDENTITY_KEYS:
        value = (identity or {}).get(key)
        if isinstance(value, str) and EC2_INSTANCE_ID.fullmatch(value.strip()):
            return value.strip()
    return None


def _batches(items: list[str], size: int = BATCH) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def describe_instances(call: Call, ec2: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    """instance id -> its DescribeInstances record. A filter, not InstanceIds: an id that is not in this
    region (or no longer exists) is simply absent instead of failing the whole batch."""
    found: dict[str, dict[str, Any]] = {}
    for batch in _batches(ids):
        pages = call("DescribeInstances", lambda batch=batch: list(ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-id", "Values": batch}])))
        for page in pages:
            for reservation in page.get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    found[inst["InstanceId"]] = inst
    return found


def describe_topology(call: Call, ec2: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    """instance id -> its DescribeInstanceTopology record. Unsupported instance types (and instances not
    running) are left out by the API or come back with no NetworkNodes: they simply have no topology."""
    found: dict[str, dict[str, Any]] = {}
    for batch in _batches(ids):
        # InstanceIds cannot be combined with MaxResults: the paginator follows NextToken alone
        pages = call("DescribeInstanceTopology", lambda batch=batch: list(
            ec2.get_paginator("describe_instance_topology").paginate(InstanceIds=batch)))
        for page in pages:
            for inst in page.get("Instances", []):
                found[inst["InstanceId"]] = inst
    return found


def describe_capacity_blocks(call: Call, ec2: Any, block_ids: list[str]) -> dict[str, str]:
    """Capacity Block id -> its InterconnectStatus (ok | impaired | insufficient-data)."""
    status: dict[str, str] = {}
    for batch in _batches(block_ids):
        pages = call("DescribeCapacityBlockStatus", lambda batch=batch: list(
            ec2.get_paginator("describe_capacity_block_status").paginate(CapacityBlockIds=batch)))
        for page in pages:
            for block in page.get("CapacityBlockStatuses", []):
                if block.get("CapacityBlockId") and block.get("InterconnectStatus"):
                    status[block["CapacityBlockId"]] = block["InterconnectStatus"]
    return status


def _efa_count(inst: Mapping[str, Any]) -> int | None:
    nics = inst.get("NetworkInterfaces")
    if not nics:
        return None
    return sum(1 for nic in nics if nic.get("InterfaceType") in ("efa", "efa-only"))


def placement_of(host: str, instance_id: str, inst: Mapping[str, Any] | None, topo: Mapping[str, Any] | None,
                 region: str | None, block_status: Mapping[str, str],
                 notes: Mapping[str, str] | None = None) -> Placement:
    """One host's Placement from its DescribeInstances and DescribeInstanceTopology records (either may be
    missing). Topology: the network nodes, outermost first, as `network-node:<id>`. Raw fields go in extra under
    the keys templates.facts.PLACEMENT_EXTRA reads (az_id, capacity_block_id)."""
    inst, topo = inst or {}, topo or {}
    where = inst.get("Placement") or {}
    block = inst.get("CapacityBlockId") or topo.get("CapacityBlockId")
    extra = {
        "az_id": where.get("AvailabilityZoneId") or topo.get("ZoneId"),
        "partition": where.get("PartitionNumber"),
        "placement_group_id": where.get("GroupId"),
        "host_id": where.get("HostId"),
        "capacity_reservation_id": inst.get("CapacityReservationId"),
        "capacity_block_id": block,
        "capacity_block_interconnect": block_status.get(block) if block else None,
        "state": (inst.get("State") or {}).get("Name"),
        "efa_interfaces": _efa_count(inst),
        **(notes or {}),
    }
    return Placement(
        host=host,
        provider="aws",
        instance_id=instance_id,
        instance_type=inst.get("InstanceType") or topo.get("InstanceType"),
        region=region if (inst or topo) else None,
        zone=where.get("AvailabilityZone") or topo.get("AvailabilityZone"),
        placement_group=where.get("GroupName") or topo.get("GroupName") or None,
        topology=[f"network-node:{node}" for node in topo.get("NetworkNodes") or []],
        extra={key: value for key, value in extra.items() if value not in (None, "")},
    )


# Finding component (its prefix before ":") -> ec2 ReportInstanceStatus reason code (botocore ec2 model enum:
# instance-stuck-in-state, unresponsive, not-accepting-credentials, password-not-available, performance-network,
# performance-instance-store, performance-ebs-volume, performance-other, other). There is no hardware code:
# a GPU, NVLink or PCIe fault is "performance-other", described in Description.
REASON_CODES: dict[str, str] = {
    "rdma": "performance-network",
    "netdev": "performance-network",
    "network-node": "performance-network",
    "switch": "performance-network",
    "gpu": "performance-other",
    "nvlink": "performance-other",
    "nvswitch": "performance-other",
    "pcie": "performance-other",
    "fabric-manager": "performance-other",
    "imex": "performance-other",
}
_KIND_CODES = {"host-unreachable": "unresponsive"}
CHANNEL = "ec2:ReportInstanceStatus"


def reason_codes(findings: Iterable[Finding]) -> list[str]:
    """The reason codes for these findings, each once, in the order first met; "other" when none maps."""
    codes: list[str] = []
    for f in findings:
        code = _KIND_CODES.get(f.kind) or REASON_CODES.get(f.component.split(":", 1)[0], "other")
        if code not in codes:
            codes.append(code)
    return codes or ["other"]


def report_category(placement: Placement, findings: Sequence[Finding]) -> str:
    """The reason code of the host's worst finding: a report's category on EC2."""
    return reason_codes(sorted(findings, key=lambda f: f.sort_key))[0]


def report_params(placement: Placement, report: HostReport) -> dict[str, Any]:
    """The ReportInstanceStatus parameters for one host's report: `impaired`, the reason codes of its own
    findings (worst first), StartTime from its first error and the report's description (which names the case).
    ProviderError when the host has no instance id or nothing to report."""
    instance_id = require_instance(placement)
    if not report.suspects:
        raise ProviderError(f"{placement.host}: no provider-owned major or critical suspect to report", where="aws")
    codes = reason_codes(report.findings)
    if report.category in codes:  # the category first: it is what the report is about
        codes.remove(report.category)
        codes.insert(0, report.category)
    return {"Instances": [instance_id], "Status": "impaired", "StartTime": report.start, "ReasonCodes": codes,
            "Description": report.description[:DESCRIPTION_MAX]}


def planned_report(placement: Placement, report: HostReport, *, disruption: str = "future") -> ReportRequest:
    """The request report_faulty_host sends for this report, as a dry run prints it (StartTime in ISO 8601).
    EC2 has no disruption schedule: a status report takes nothing out of service by itself."""
    params = report_params(placement, report)
    payload = {**params, "StartTime": params["StartTime"].strftime("%Y-%m-%dT%H:%M:%SZ")}
    return ReportRequest(CHANNEL, PlannedRequest("ec2", "ReportInstanceStatus", payload))


DESCRIPTION_MAX = 1000  # not documented in the ec2 model; kept short enough for any console view


def require_instance(placement: Placement) -> str:
    if not placement.instance_id or not EC2_INSTANCE_ID.fullmatch(placement.instance_id):
        raise ProviderError(f"host {placement.host} has no EC2 instance id to report", where="aws")
    return placement.instance_id
