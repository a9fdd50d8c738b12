"""AWS: EC2 instances and their network topology, AWS Support cases, and the EC2 faulty-instance report.

Configuration: `[providers.aws]` of config.toml (docs/providers/aws.md lists every key). Credentials only through
boto3's own chain (environment, AWS_PROFILE / `profile`, ~/.aws, SSO, an instance role); fabricase stores none.
Every call goes through providers.retry: throttling and 5xx are retried with backoff, anything else is one line
naming the operation. Nothing is retried inside botocore, so a CreateCase is never sent twice without first
looking for the case it may have opened (its subject carries case_marker).
The Support case desk (codes, attachments, the case itself) is the AwsCases mixin of aws_cases.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import boto3
import botocore.exceptions

from fabricase.bundler.limits import MB, DeskLimits
from fabricase.config import Paths, provider_profile
from fabricase.errors import ProviderError
from fabricase.faulty import HostReport
from fabricase.models import Placement, Severity
from fabricase.providers import aws_ec2 as ec2api
from fabricase.providers.aws_cases import AwsCases
from fabricase.providers.aws_client import (
    AwsSettings,
    describe_error,
    error_code,
    is_transient,
    make_client,
    settings_from,
)
from fabricase.providers.base import CheckResult, FaultyHostReport, Provider
from fabricase.providers.retry import call_with_retries
from fabricase.templates.severity import Level, Scale

__all__ = ["AwsProvider"]

T = TypeVar("T")
_DRY_RUN_OK = frozenset({"DryRunOperation", "DryRunOperationException"})


# --- the provider ------------------------------------------------------------------------------------------

class AwsProvider(AwsCases, Provider):
    """EC2 placements and topology, AWS Support cases, and ReportInstanceStatus as the faulty-host channel."""

    name = "aws"
    unsupported = {}
    sdk_modules = ("boto3",)
    extra = "aws"
    template = "ticket_aws.md.j2"
    # ../shared/reference/cloud-apis.md, by line
    limits = DeskLimits(
        "aws",
        body_max_chars=8000,  # :105 create_case `communicationBody` (1-8000 chars); :787
        attachment_max_bytes=5 * MB,  # :110 add_attachments_to_set "Up to 3 attachments per set, 5 MB each"; :785
        large_upload_max_bytes=157_286_400,  # :111 get_attachment_upload_links `fileSizeBytes` 1-157,286,400; :786
        max_attachments=3,  # :110 per attachment set (the upload-link path takes 10 `uploadIds`, :105 and :127)
        file_name_max=None,  # not documented
    )
    # cloud-apis.md 1.1, describe_severity_levels; `critical` needs Enterprise On-Ramp or Enterprise
    scale = Scale(
        "aws",
        "severityCode",
        (
            Level("low", "General guidance"),
            Level("normal", "System impaired"),
            Level("high", "Production system impaired"),
            Level("urgent", "Production system down"),
            Level("critical", "Business-critical system down",
                  plans=frozenset({"enterprise-on-ramp", "enterprise", "unified-operations"})),
        ),
        {Severity.CRITICAL: "critical", Severity.MAJOR: "high", Severity.MINOR: "normal", Severity.INFO: "low"},
    )

    def __init__(self, paths: Paths, *, sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], datetime] | None = None) -> None:
        super().__init__(paths)
        self._sleep = sleep
        self._now = now or (lambda: datetime.now(UTC))
        self._settings: AwsSettings | None = None
        self._clients: dict[tuple[str, str | None], Any] = {}

    # plumbing

    @property
    def settings(self) -> AwsSettings:
        if self._settings is None:
            self._settings = settings_from(provider_profile(self.paths, "aws"),
                                           where=str(self.paths.config / "config.toml"))
        return self._settings

    def _client(self, service: str, region: str | None = None) -> Any:
        key = (service, region)
        if key not in self._clients:
            self._clients[key] = make_client(service, self.settings, region)
        return self._clients[key]

    def _support(self) -> Any:
        return self._client("support", self.settings.support_region)

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        return call_with_retries(fn, provider=self.name, operation=operation, transient=is_transient,
                                 describe=describe_error, sleep=self._sleep)

    def _regions(self) -> tuple[str, ...]:
        if self.settings.regions:
            return self.settings.regions
        try:
            region = boto3.session.Session(profile_name=self.settings.profile).region_name
        except botocore.exceptions.ProfileNotFound as exc:
            raise ProviderError(f"AWS profile {self.settings.profile!r} not found", where=self.name) from exc
        if not region:
            raise ProviderError("no AWS region: set region in [providers.aws] or AWS_DEFAULT_REGION", where="aws")
        return (region,)

    # locate

    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        """Each host's instance (from DMI board_asset_tag), looked up region by region, with its network nodes
        and, for a Capacity Block, the block's interconnect status. A host with no instance id, or one no
        region knows, gets an empty placement."""
        ids = {h["host"]: ec2api.instance_id_of(h.get("identity")) for h in hosts}
        wanted = sorted({i for i in ids.values() if i})
        records: dict[str, dict[str, Any]] = {}
        topology: dict[str, dict[str, Any]] = {}
        region_of: dict[str, str] = {}
        notes: dict[str, dict[str, str]] = {}
        blocks: dict[str, str] = {}
        for region in self._regions() if wanted else ():
            missing = [i for i in wanted if i not in records]
            if not missing:
                break
            ec2 = self._client("ec2", region)
            found = ec2api.describe_instances(self._call, ec2, missing)
            records.update(found)
            region_of.update(dict.fromkeys(found, region))
            if not found:
                continue
            try:
                topology.update(ec2api.describe_topology(self._call, ec2, sorted(found)))
            except ProviderError as exc:  # topology is a bonus: the placement stands without it
                notes.update({i: {"topology_unavailable": exc.message} for i in found})
            block_ids = sorted({b for i in found if (b := found[i].get("CapacityBlockId")
                                                     or topology.get(i, {}).get("CapacityBlockId"))})
            if block_ids:
                try:
                    blocks.update(ec2api.describe_capacity_blocks(self._call, ec2, block_ids))
                except ProviderError as exc:
                    notes.update({i: {**notes.get(i, {}), "capacity_block_status_unavailable": exc.message}
                                  for i in found})
        placements = []
        for h in hosts:
            iid = ids[h["host"]]
            if iid is None:
                placements.append(Placement(host=h["host"], provider=self.name))
                continue
            placements.append(ec2api.placement_of(h["host"], iid, records.get(iid), topology.get(iid),
                                                  region_of.get(iid), blocks, notes.get(iid)))
        return placements

    # faulty host

    def report_faulty_host(self, placement: Placement, report: HostReport, *,
                           disruption: str = "future") -> FaultyHostReport:
        """ReportInstanceStatus `impaired` for the host's instance: the reason codes of its own suspects'
        findings, StartTime from its first error, and the report's description, which names the support case
        (aws_ec2.report_params: exactly what `report-faulty --dry-run` prints). EC2 has no disruption schedule."""
        params = ec2api.report_params(placement, report)
        ec2 = self._client("ec2", placement.region or self._regions()[0])
        self._call("ReportInstanceStatus", lambda: ec2.report_instance_status(**params))
        return FaultyHostReport(channel=ec2api.CHANNEL, reference=params["Instances"][0],
                                raw_status="impaired: " + ",".join(params["ReasonCodes"]))

    # check

    def _dry_run(self, label: str, operation: str, fn: Callable[[], Any]) -> CheckResult:
        try:
            self._call(operation, fn)
        except ProviderError as exc:
            code = error_code(exc.__cause__)
            if code in _DRY_RUN_OK:
                return CheckResult(label, True, "allowed (dry run)")
            return CheckResult(label, False, exc.message)
        return CheckResult(label, True, "allowed")

    def check(self) -> list[CheckResult]:
        """Credentials (sts GetCallerIdentity), the support plan (DescribeSeverityLevels), and the permissions
        fabricase needs, each by a dry run: nothing is filed, reported or uploaded."""
        try:
            region = self._regions()[0]
        except ProviderError as exc:
            return [CheckResult("region", False, exc.message)]
        sts = self._client("sts", region)
        try:
            who = self._call("GetCallerIdentity", sts.get_caller_identity)
        except ProviderError as exc:
            return [CheckResult("credentials", False, exc.message)]
        results = [CheckResult("credentials", True, f"account {who.get('Account')} as {who.get('Arn')}")]
        support, ec2 = self._support(), self._client("ec2", region)
        try:
            levels = self._call("DescribeSeverityLevels", lambda: support.describe_severity_levels(
                language=self.settings.language))
            codes = ", ".join(lv.get("code", "?") for lv in levels.get("severityLevels", []))
            results.append(CheckResult("support plan", True, f"Support API available; severities: {codes}"))
            plan_ok = True
        except ProviderError as exc:
            results.append(CheckResult("support plan", False, exc.message))
            plan_ok = False
        checks: list[tuple[str, str, Callable[[], Any]]] = [
            ("ec2:DescribeInstances", "DescribeInstances", lambda: ec2.describe_instances(DryRun=True)),
            ("ec2:DescribeInstanceTopology", "DescribeInstanceTopology",
             lambda: ec2.describe_instance_topology(DryRun=True)),
            ("ec2:ReportInstanceStatus", "ReportInstanceStatus", lambda: ec2.report_instance_status(
                DryRun=True, Instances=["i-00000000000000000"], Status="impaired", ReasonCodes=["other"])),
        ]
        if plan_ok:
            checks += [
                ("support:DescribeCases", "DescribeCases", lambda: support.describe_cases(dryRun=True)),
                ("support:CreateCase", "CreateCase", lambda: support.create_case(
                    subject="fabricase permission check", communicationBody="dry run", dryRun=True)),
                ("support:AddAttachmentsToSet", "AddAttachmentsToSet", lambda: support.add_attachments_to_set(
                    attachments=[{"fileName": "check.txt", "data": b"dry run"}], dryRun=True)),
                ("support:GetAttachmentUploadLinks", "GetAttachmentUploadLinks",
                 lambda: support.get_attachment_upload_links(fileName="check.txt", fileSizeBytes=1, dryRun=True)),
            ]
        results += [self._dry_run(label, operation, fn) for label, operation, fn in checks]
        return results
