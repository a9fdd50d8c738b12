"""Issue 15, item 4: `fabricase report-faulty FC-n --dry-run` on a 16-host capture with suspects on 3 hosts lists
exactly those 3 hosts on each cloud, and each request is one the cloud's SDK model takes: botocore's ec2
ReportInstanceStatus (required members and enums), the compute_v1 request types, and the fields the Azure fake
(and Guest Health Reporting) require. Only provider-owned major or critical suspects are reported, each host with
its own; the text names the support case; GCE's schedule is FUTURE unless asked; nothing is sent twice."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase.cli import cli
from fabricase.config import Paths
from fabricase.diagnosis import Diagnosis, Suspect
from fabricase.errors import ProviderError
from fabricase.faulty import EVENT_KIND, Intent, plan_reports, send_reports
from fabricase.models import Evidence, Finding, Severity
from fabricase.providers.base import FaultyHostReport, Feature, Provider

sys.path.insert(0, str(Path(__file__).parent))
import faulty_fleet as ff  # noqa: E402

CLOUDS = ("aws", "gcp", "azure")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Paths:
    h = tmp_path / "home"
    monkeypatch.setenv("FABRICASE_HOME", str(h))
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "FABRICASE_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return Paths(data=h, config=h).ensure()


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def dry_run(home: Paths, tmp_path: Path, cloud: str, *extra: str) -> tuple[str, dict]:
    capture = ff.write_fleet(tmp_path / f"capture-{cloud}", cloud)
    esc_id = ff.record_escalation(home, cloud, capture)
    result = invoke("report-faulty", esc_id, "--dry-run", "--json", *extra)
    assert result.exit_code == 0, result.output
    return esc_id, json.loads(result.stdout)


def _check_aws(payload: dict) -> None:
    import botocore.session
    from botocore.validate import ParamValidator

    shape = botocore.session.get_session().get_service_model("ec2").operation_model("ReportInstanceStatus").input_shape
    report = ParamValidator().validate(payload, shape)
    assert not report.has_errors(), report.generate_report()
    assert set(shape.required_members) <= set(payload)
    assert payload["Status"] in shape.members["Status"].enum
    assert set(payload["ReasonCodes"]) <= set(shape.members["ReasonCodes"].member.enum)


def _check_gcp(payload: dict) -> None:
    from google.cloud import compute_v1

    request = compute_v1.ReportHostAsFaultyInstanceRequest(payload)  # unknown fields or enum names raise
    body = request.instances_report_host_as_faulty_request_resource
    assert request.project and request.zone and request.instance and request.request_id
    # compute_v1 keeps these enums as strings: the name must be one of the type's enum's
    assert body.disruption_schedule == "FUTURE"
    assert body.disruption_schedule in compute_v1.InstancesReportHostAsFaultyRequest.DisruptionSchedule.__members__
    behaviors = compute_v1.InstancesReportHostAsFaultyRequestFaultReason.Behavior.__members__
    assert body.fault_reasons and all(r.behavior in behaviors and r.description for r in body.fault_reasons)


def _check_azure(payload: dict) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "azure"))
    from azure_fake_arm import impact_problem

    assert impact_problem(payload) is None
    assert payload["properties"]["impactCategory"].startswith("Resource.Hpc.Unhealthy.")


@pytest.mark.parametrize("cloud", CLOUDS)
def test_dry_run_lists_exactly_the_three_faulty_hosts_with_requests_the_sdk_takes(home, tmp_path, cloud):
    esc_id, out = dry_run(home, tmp_path, cloud)
    reports = out["reports"]
    assert [r["host"] for r in reports] == sorted(ff.FAULTY)
    assert {r["status"] for r in reports} == {"would send"}
    for r in reports:
        assert r["instance"] == ff.instance_id(cloud, r["host"]) and r["case"] == "case-4711"
        assert {"aws": _check_aws, "gcp": _check_gcp, "azure": _check_azure}[cloud](r["request"]["payload"]) is None
        sent = json.dumps(r["request"]["payload"])
        assert "case-4711" in sent and esc_id in sent  # the text names the support case and the escalation
        others = ff.FAULTY - {r["host"]}
        assert not any(other in sent for other in others)  # each host with its own suspects only
    starts = {r["host"]: r["start"] for r in reports}
    assert starts[ff.XID79] == f"{ff.XID_AT:%Y-%m-%dT%H:%M:%SZ}"  # the kernel log's own time of the Xid
    assert starts[ff.SYMBOL] == f"{ff.SNAPSHOT_0:%Y-%m-%dT%H:%M:%SZ}"  # the start of the interval it rose in
    from fabricase.tracker.store import Tracker

    with Tracker.open(home) as tracker:
        assert not [e for e in tracker.get(esc_id).events if e.kind == EVENT_KIND]  # a dry run records nothing


def test_azure_each_host_has_its_own_impact_category(home, tmp_path):
    _, out = dry_run(home, tmp_path, "azure")
    categories = {r["host"]: r["request"]["payload"]["properties"]["impactCategory"] for r in out["reports"]}
    assert categories == {ff.XID79: "Resource.Hpc.Unhealthy.XID79FallenOffBus",
                          ff.FLAP: "Resource.Hpc.Unhealthy.IBPortFlapping",
                          ff.SYMBOL: "Resource.Hpc.Unhealthy.IBPerformance"}


def test_gcp_disruption_is_future_by_default_and_immediate_only_when_asked(home, tmp_path):
    _, out = dry_run(home, tmp_path, "gcp", ff.XID79)
    (report,) = out["reports"]
    body = report["request"]["payload"]["instances_report_host_as_faulty_request_resource"]
    assert body["disruption_schedule"] == "FUTURE"
    assert body["fault_reasons"][0]["behavior"] == "UNRECOVERABLE_GPU_ERROR"
    result = invoke("report-faulty", out["escalation_id"], ff.XID79, "--dry-run", "--json", "--disruption",
                    "immediate")
    (report,) = json.loads(result.stdout)["reports"]
    assert report["request"]["payload"]["instances_report_host_as_faulty_request_resource"][
        "disruption_schedule"] == "IMMEDIATE"
    shown = " ".join(invoke("report-faulty", "--help").output.split())
    assert "immediate: Compute Engine STOPS THE VM NOW and restarts it on another host" in shown


def test_the_dry_run_fits_80_columns(home, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    capture = ff.write_fleet(tmp_path / "capture", "azure")
    esc_id = ff.record_escalation(home, "azure", capture)
    result = invoke("report-faulty", esc_id, "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 80
    assert [line.split(":")[0] for line in lines if line.startswith("gpu")] == sorted(ff.FAULTY)


def test_nothing_to_report_and_a_host_without_a_suspect_are_refused_in_one_line(home, tmp_path):
    capture = ff.write_fleet(tmp_path / "capture", "aws")
    esc_id = ff.record_escalation(home, "aws", capture)
    result = CliRunner().invoke(cli, ["report-faulty", esc_id, "gpu0001", "--dry-run"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"fabricase: error: {esc_id}: gpu0001: no provider-owned suspect of major or critical severity to report"]
    clean = tmp_path / "clean"
    import shutil

    shutil.copytree(capture, clean)
    for host in ff.FAULTY:  # the faulty hosts' evidence replaced by a healthy host's
        shutil.rmtree(clean / "hosts" / host)
        shutil.copytree(clean / "hosts" / "gpu0001", clean / "hosts" / host)
    result = CliRunner().invoke(cli, ["report-faulty", esc_id, "--capture", str(clean), "--dry-run"])
    assert result.exit_code == 1 and "nothing to report" in result.output and len(result.output.splitlines()) == 1


def _suspect(host: str, severity: Severity, owner: str = "provider", fid: str = "") -> Suspect:
    return Suspect(id=f"S-{host}-{severity}-{owner}", host=host, unit="nic-port", components=["rdma:mlx5_0/1"],
                   verdict="bad-link", verdict_text="bad link", severity=severity, confidence=0.9, q_value=None,
                   owner=owner, action="fix", evidence=[], identity={}, findings=[fid] if fid else [])


def test_minor_info_operator_and_shared_suspects_are_never_reported():
    findings = [Finding("rdma-symbol-errors", Severity.MAJOR, "h1", "rdma:mlx5_0/1", "errors",
                        [Evidence("symbol_error.delta", 40, "errors", 0, "/sys/x", 1)]),
                Finding("rdma-port-errors", Severity.MINOR, "h1", "rdma:mlx5_0/1", "a few errors")]
    major = _suspect("h1", Severity.MAJOR)
    major.findings = ["rdma-symbol-errors@h1/rdma:mlx5_0/1", "rdma-port-errors@h1/rdma:mlx5_0/1"]
    diagnosis = Diagnosis([major, _suspect("h2", Severity.MINOR), _suspect("h3", Severity.INFO),
                           _suspect("h4", Severity.CRITICAL, owner="operator"),
                           Suspect(id="S-shared", host=None, unit="shared", components=["switch:leaf-1"],
                                   verdict="switch-fault", verdict_text="switch", severity=Severity.CRITICAL,
                                   confidence=0.9, q_value=None, owner="provider", action="fix", evidence=[],
                                   identity={}, findings=[], hosts=["h5"])], [], [])
    placements = [ff.placement("gcp", ff.HOSTS[0])]
    from datetime import UTC, datetime

    at = datetime(2026, 11, 30, tzinfo=UTC)
    (report,) = plan_reports(diagnosis, placements, Intent("FC-9", "case-1"), provider="gcp", findings=findings,
                             first_errors={}, captured_at=at)
    assert report.host == "h1" and [f.severity for f in report.findings] == [Severity.MAJOR]  # the minor one: no
    assert report.start == at and report.description.startswith("fabricase FC-9, support case case-1: ")
    assert plan_reports(Diagnosis(diagnosis.suspects[1:], [], []), placements, Intent("FC-9"), provider="gcp",
                        findings=findings, first_errors={}, captured_at=at) == []


class Recording(Provider):
    """A provider whose faulty-host channel records what it is given (the planner is AWS's)."""

    name = "aws"
    sent: list[str] = []

    def locate(self, hosts):
        return []

    def file_case(self, *, escalation_id, draft, bundle_path):
        raise NotImplementedError

    def resolve_case(self, case_id, note):
        raise NotImplementedError

    def report_faulty_host(self, placement, report, *, disruption="future"):
        self.sent.append(placement.host)
        return FaultyHostReport("ec2:ReportInstanceStatus", placement.instance_id, "impaired")


def test_sending_twice_sends_once_and_records_each_host(home, tmp_path):
    from fabricase.tracker.store import Tracker

    capture = ff.write_fleet(tmp_path / "capture", "aws")
    esc_id = ff.record_escalation(home, "aws", capture)
    provider = Recording(home)
    provider.sent = []
    reports = [ff.host_report(ff.placement("aws", h), [Finding("rdma-symbol-errors", Severity.MAJOR, h,
                                                               "rdma:mlx5_0/1", "errors")])
               for h in sorted(ff.FAULTY)]
    with Tracker.open(home) as tracker:
        esc = tracker.get(esc_id)
        first = send_reports(tracker, provider, esc, reports, dry_run=False)
        again = send_reports(tracker, provider, esc, reports, dry_run=False)
        events = [e for e in tracker.get(esc_id).events if e.kind == EVENT_KIND]
    assert provider.sent == sorted(ff.FAULTY)
    assert [o.status for o in first] == ["sent"] * 3 and [o.status for o in again] == ["already reported"] * 3
    assert [(e.data["host"], e.data["channel"]) for e in events] == [(h, "ec2:ReportInstanceStatus")
                                                                     for h in sorted(ff.FAULTY)]
    assert all(len(e.data["request_sha256"]) == 64 and e.data["reference"] for e in events)


def test_a_provider_without_the_channel_refuses_before_anything(home):
    class NoChannel(Recording):
        unsupported = {Feature.FAULTY_HOST_REPORT: "no faulty-host API here"}

    with pytest.raises(ProviderError, match="faulty-host-report is not supported: no faulty-host API here"):
        send_reports(None, NoChannel(home), Intent("FC-1"), [], dry_run=True)


class _Crash(BaseException):
    """A run killed while the request was on its way (not an Exception: nothing handles it)."""


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_a_run_killed_while_sending_is_not_reported_twice_where_a_repeat_is_a_second_record(home, tmp_path, cloud):
    """Azure names each impact anew: a report whose run died after its intent may have been filed, so the next run
    says so and does not send it again. On EC2 (a status) and GCE (a request id) the report is sent again."""
    from fabricase.tracker.store import Tracker

    class Dying(Recording):
        name = cloud
        crash = True

        def report_faulty_host(self, placement, report, *, disruption="future"):
            if self.crash:
                self.crash = False
                raise _Crash(placement.host)
            self.sent.append(placement.host)
            return FaultyHostReport("channel", placement.instance_id, "reported")

    capture = ff.write_fleet(tmp_path / "capture", cloud)
    esc_id = ff.record_escalation(home, cloud, capture)
    provider = Dying(home)
    provider.sent = []
    hosts = sorted(ff.FAULTY)
    reports = [ff.host_report(ff.placement(cloud, h), [Finding("rdma-symbol-errors", Severity.MAJOR, h,
                                                               "rdma:mlx5_0/1", "errors")]) for h in hosts]
    with Tracker.open(home) as tracker:
        esc = tracker.get(esc_id)
        with pytest.raises(_Crash):
            send_reports(tracker, provider, esc, reports, dry_run=False)
        again = send_reports(tracker, provider, esc, reports, dry_run=False)
    first = "maybe reported" if cloud == "azure" else "sent"
    assert [o.status for o in again] == [first, "sent", "sent"]
    assert provider.sent == (hosts[1:] if cloud == "azure" else hosts)
