"""The faulty-host channel (ec2 ReportInstanceStatus, Stubber: moto lacks it) and `providers check`."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from awsfakes import SEVERITIES, capture_params

from fabricase.errors import ProviderError
from fabricase.models import Evidence, Finding, Placement, Severity
from fabricase.providers.aws import AwsProvider
from fabricase.providers.aws_ec2 import reason_codes

sys.path.insert(0, str(Path(__file__).parents[1]))
from faulty_fleet import FAULTY, XID_AT, host_report, instance_id, record_escalation, write_fleet  # noqa: E402

PLACEMENT = Placement(host="gpu001", provider="aws", instance_id="i-0123456789abcdef0", region="us-east-1",
                      topology=["network-node:nn-top", "network-node:nn-mid", "network-node:nn-a"])


def finding(kind: str, component: str, severity: Severity = Severity.MAJOR, host: str | None = "gpu001") -> Finding:
    return Finding(kind=kind, severity=severity, host=host, component=component, summary=f"{component}: {kind}",
                   evidence=[Evidence("x.delta", 1, "events")])


def test_reason_codes_come_from_the_model_enum():
    assert reason_codes([finding("rdma-symbol-errors", "rdma:mlx5_0/1"), finding("nvidia-xid", "gpu:3"),
                         finding("link-flap", "netdev:eth2")]) == ["performance-network", "performance-other"]
    assert reason_codes([finding("host-unreachable", "host")]) == ["unresponsive"]
    assert reason_codes([finding("config-drift", "fabric-manager")]) == ["performance-other"]
    assert reason_codes([finding("something-new", "thing:1")]) == ["other"]


def test_report_sends_impaired_with_the_hosts_own_reason_codes_start_and_case(provider, clients):
    findings = [
        finding("nvidia-xid", "gpu:3", Severity.CRITICAL),
        finding("rdma-symbol-errors", "rdma:mlx5_0/1"),
        finding("rdma-symbol-errors", "rdma:mlx5_1/1", host="gpu002"),  # another host's: not in this report
    ]
    report = host_report(PLACEMENT, findings)
    clients.stub("ec2").add_response("report_instance_status", {}, {
        "Instances": ["i-0123456789abcdef0"], "Status": "impaired", "StartTime": XID_AT,
        "ReasonCodes": ["performance-other", "performance-network"], "Description": report.description})
    sent = capture_params(clients.clients["ec2"], "ReportInstanceStatus")
    result = provider.report_faulty_host(PLACEMENT, report)
    clients.assert_no_pending()  # the Stubber checked every parameter against botocore's ec2 model
    [params] = sent
    lines = params["Description"].splitlines()
    assert lines[0] == "fabricase FC-1, support case case-4711: 2 suspects on gpu001"
    assert lines[1].startswith("critical: gpu001 ") and not any("mlx5_1" in line for line in lines)
    assert (result.channel, result.reference) == ("ec2:ReportInstanceStatus", "i-0123456789abcdef0")


def test_report_without_an_instance_or_a_suspect_is_refused(provider, clients):
    report = host_report(PLACEMENT, [finding("rdma-symbol-errors", "rdma:mlx5_0/1")])
    with pytest.raises(ProviderError, match="gpu001: no provider-owned major or critical suspect to report"):
        provider.report_faulty_host(PLACEMENT, dataclasses.replace(report, suspects=()))
    with pytest.raises(ProviderError, match="host gpu009 has no EC2 instance id to report"):
        provider.report_faulty_host(Placement(host="gpu009", provider="aws"), report)
    clients.assert_no_pending()


def test_report_faulty_sends_each_host_once(home, profile, clients, tmp_path):
    """`fabricase report-faulty FC-n` against the Stubber (moto lacks ReportInstanceStatus): one request per
    faulty host, each checked against the model; run again, nothing is sent (the Stubber has no answer left)."""
    import json

    from click.testing import CliRunner

    from fabricase.cli import cli
    from fabricase.config import Paths

    capture = write_fleet(tmp_path / "capture", "aws")
    esc_id = record_escalation(Paths(data=home, config=home), "aws", capture)
    for _ in FAULTY:
        clients.stub("ec2").add_response("report_instance_status", {}, None)
    sent = capture_params(clients.clients["ec2"], "ReportInstanceStatus")
    first = CliRunner().invoke(cli, ["report-faulty", esc_id, "--json"], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    clients.assert_no_pending()
    again = CliRunner().invoke(cli, ["report-faulty", esc_id, "--json"], catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert sorted(p["Instances"][0] for p in sent) == sorted(instance_id("aws", h) for h in FAULTY)
    assert [r["status"] for r in json.loads(first.stdout)["reports"]] == ["sent"] * 3
    assert [r["status"] for r in json.loads(again.stdout)["reports"]] == ["already reported"] * 3
    shown = json.loads(CliRunner().invoke(cli, ["show", esc_id, "--json"]).stdout)
    assert len([e for e in shown["events"] if e["kind"] == "faulty-report"]) == 3


def _dry_run_ok(stub, method):
    stub.add_client_error(method, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)


def test_check_reports_credentials_plan_and_permissions(provider, clients):
    ec2, support = clients.stub("ec2"), clients.stub("support")
    support.operations |= {"CreateCase", "DescribeCases"}  # moto ignores dryRun: it would open a case
    support.add_response("describe_severity_levels", SEVERITIES, {"language": "en"})
    _dry_run_ok(ec2, "describe_instance_topology")
    ec2.add_client_error("report_instance_status", "UnauthorizedOperation", "You are not authorized.", 403)
    for method in ("describe_cases", "create_case", "add_attachments_to_set", "get_attachment_upload_links"):
        support.add_client_error(method, "DryRunOperationException", "dry run", 400)
    results = {r.check: r for r in provider.check()}
    clients.assert_no_pending()
    assert results["credentials"].ok and "123456789012" in results["credentials"].detail
    assert results["support plan"].ok and "low, normal, high, urgent" in results["support plan"].detail
    assert results["ec2:DescribeInstances"].ok  # moto's own dry run
    assert results["ec2:DescribeInstanceTopology"].ok
    assert not results["ec2:ReportInstanceStatus"].ok
    assert "permission denied (UnauthorizedOperation)" in results["ec2:ReportInstanceStatus"].detail
    assert all(results[f"support:{op}"].ok for op in ("DescribeCases", "CreateCase", "AddAttachmentsToSet",
                                                      "GetAttachmentUploadLinks"))


def test_check_without_a_support_plan_skips_the_support_permissions(provider, clients):
    ec2, support = clients.stub("ec2"), clients.stub("support")
    support.add_client_error("describe_severity_levels", "SubscriptionRequiredException", "required", 400)
    _dry_run_ok(ec2, "describe_instance_topology")
    _dry_run_ok(ec2, "report_instance_status")
    results = {r.check: r for r in provider.check()}
    assert not results["support plan"].ok and "no AWS support plan" in results["support plan"].detail
    assert not any(name.startswith("support:") for name in results)


def test_check_without_credentials_stops_at_credentials(paths, moto, monkeypatch):
    from awsfakes import write_config

    write_config(paths.config, moto)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    [result] = AwsProvider(paths, sleep=lambda s: None).check()
    assert (result.check, result.ok) == ("credentials", False)
    assert result.detail.startswith("GetCallerIdentity: no AWS credentials found")
