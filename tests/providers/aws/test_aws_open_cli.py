"""Acceptance: `fabricase open --replay <capture of EC2 hosts> --provider aws` against the test endpoints files one
case with the network nodes in its body and the bundle attached through the upload-links path; a filing that
fails records nothing as filed."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from awsfakes import REGION, capture_params, stub_codes, write_config, write_ec2_capture
from click.testing import CliRunner

from fabricase.cli import cli


def ec2_fleet(moto: str, tmp_path: Path, n: int = 4) -> tuple[Path, list[str]]:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto)
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ids = [i["InstanceId"] for i in ec2.run_instances(ImageId=ami, MinCount=n, MaxCount=n,
                                                      InstanceType="p5.48xlarge")["Instances"]]
    hosts = {f"gpu{k + 1:03d}": iid for k, iid in enumerate(ids)}
    return write_ec2_capture(tmp_path / "capture", hosts, bad={"gpu002"}), ids


def stub_topology(clients, ids: list[str]) -> None:
    clients.stub("ec2").add_response("describe_instance_topology", {"Instances": [
        {"InstanceId": iid, "InstanceType": "p5.48xlarge", "NetworkNodes": ["nn-7f3a", "nn-21c0", f"nn-leaf{k // 2}"],
         "AvailabilityZone": "us-east-1a", "ZoneId": "use1-az4"} for k, iid in enumerate(ids)]},
        {"InstanceIds": sorted(ids)})


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_open_replay_files_one_case_with_topology_and_the_bundle_by_upload_links(home, moto, clients, uploads,
                                                                                 tmp_path):
    write_config(home, moto, attachments="upload-links")
    capture, ids = ec2_fleet(moto, tmp_path)
    stub_topology(clients, ids)
    stub_codes(clients)
    stub = clients.stub("support")
    # one link for the whole bundle (parts of up to 100 MB): its size is only known once it is built
    stub.add_response("get_attachment_upload_links", {
        "uploadId": "upl-cli", "partSizeBytes": 104_857_600, "totalParts": 1,
        "uploadUrls": [{"url": f"{uploads.url}/upl-cli/part1", "partIndex": 1, "expiryDate": "2026-12-01T00:00:00Z"}]},
        None)
    stub.add_response("complete_attachment_upload", {"uploadStatus": "attachment-ready"}, None)
    created = capture_params(clients.clients["support"], "CreateCase")

    result = invoke("open", "--replay", str(capture), "--provider", "aws", "--symptom", "allreduce busbw fell 40%",
                    "--json")

    assert result.exit_code == 0, result.output
    opened = json.loads(result.stdout)
    clients.assert_no_pending()
    [sent] = created
    support = boto3.client("support", region_name=REGION, endpoint_url=moto)
    [case] = support.describe_cases(includeResolvedCases=True)["cases"]
    assert opened["provider_case_id"] == case["caseId"] and opened["state"] == "filed"
    assert case["subject"].startswith(opened["case_marker"] + " ")
    body = sent["communicationBody"]
    assert "nn-7f3a" in body and "nn-21c0" in body and "nn-leaf0" in body  # the network nodes, in the body
    assert ids[1] in body and "use1-az4" in body  # the instance at fault and its AZ id
    assert sent["uploadIds"] == ["upl-cli"]
    assert uploads.bodies["/upl-cli/part1"] == Path(opened["bundle_path"]).read_bytes()  # the bundle, attached
    placements = json.loads((capture / "placements.json").read_text())["placements"]
    assert {p["instance_id"]: p["topology"][0] for p in placements} == dict.fromkeys(ids, "network-node:nn-7f3a")

    shown = json.loads(invoke("show", opened["escalation_id"], "--json").stdout)
    assert shown["provider_case_id"] == case["caseId"]


def test_open_without_a_support_plan_exits_1_in_one_line_and_files_nothing(home, moto, clients, tmp_path):
    write_config(home, moto)
    capture, ids = ec2_fleet(moto, tmp_path, n=2)
    stub_topology(clients, ids)
    clients.stub("support").add_client_error("describe_services", "SubscriptionRequiredException",
                                             "AWS Premium Support Subscription is required", 400)
    result = invoke("open", "--replay", str(capture), "--provider", "aws", "--symptom", "x")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "fabricase: error: aws: DescribeServices: no AWS support plan with API access (Business, Enterprise On-Ramp or "
        "Enterprise, or their successors)"]
    listed = json.loads(invoke("list", "--state", "all", "--json").stdout)
    assert [e.get("provider_case_id") for e in listed] in ([], [None])
    assert all(e["state"] != "filed" for e in listed)


def _open_json(capture, *extra):
    return invoke("open", "--replay", str(capture), "--provider", "aws", "--symptom", "allreduce busbw fell 40%",
                  "--json", *extra)


def test_the_body_says_the_severity_the_case_is_filed_at(home, moto, clients, tmp_path):
    """major maps to critical here, which a Business plan does not offer: the case goes at urgent, and the body
    says urgent. Before, make_draft never saw the plan: the body said one level and the field another."""
    write_config(home, moto, attachments="attachment-set", severity={"major": "critical"})
    capture, ids = ec2_fleet(moto, tmp_path)
    stub_topology(clients, ids)
    stub_codes(clients)
    clients.stub("support").add_response("add_attachments_to_set", {"attachmentSetId": "as-1"}, None)
    created = capture_params(clients.clients["support"], "CreateCase")

    result = _open_json(capture)

    assert result.exit_code == 0, result.output
    [sent] = created
    assert sent["severityCode"] == "urgent"
    [line] = [ln for ln in sent["communicationBody"].splitlines() if ln.startswith("Severity:")]
    assert line.startswith("Severity: urgent (")
    assert "capped from critical by the severity levels this account's support plan offers" in " ".join(
        sent["communicationBody"].split())


def test_no_host_found_as_an_instance_is_refused_and_filed_only_with_force(home, moto, clients, tmp_path):
    """Hosts whose instances are in no configured region: before, a case naming no instance was filed anyway,
    without a word. Now open refuses in one line; --force files it with the warning first in the body."""
    write_config(home, moto, attachments="attachment-set")
    hosts = {f"gpu{k:03d}": f"i-0{k:016x}" for k in range(1, 5)}  # ids moto does not know
    capture = write_ec2_capture(tmp_path / "capture", hosts, bad={"gpu002"})
    clients.stub("ec2").add_response("describe_instance_topology", {"Instances": []}, None)

    refused = _open_json(capture)

    assert refused.exit_code == 1
    assert "not filed: no AWS instance i-0" in refused.stderr and "--force" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert boto3.client("support", region_name=REGION, endpoint_url=moto).describe_cases()["cases"] == []

    stub_codes(clients)
    clients.stub("support").add_response("add_attachments_to_set", {"attachmentSetId": "as-1"}, None)
    created = capture_params(clients.clients["support"], "CreateCase")
    forced = _open_json(capture, "--force")
    assert forced.exit_code == 0, forced.output
    [sent] = created
    assert sent["communicationBody"].startswith("Warning: filed with --force although no AWS instance i-0")


def test_open_report_faulty_files_the_case_then_reports_only_the_faulty_host(home, moto, clients, tmp_path):
    """`open --report-faulty`: after the case is filed, EC2 ReportInstanceStatus for gpu002 only (the one host with
    a provider-owned suspect), naming the case; the report is recorded on the escalation."""
    write_config(home, moto, attachments="attachment-set")
    capture, ids = ec2_fleet(moto, tmp_path)
    stub_topology(clients, ids)
    stub_codes(clients)
    clients.stub("support").add_response("add_attachments_to_set", {"attachmentSetId": "as-1"}, None)
    clients.stub("ec2").add_response("report_instance_status", {}, None)
    reported = capture_params(clients.clients["ec2"], "ReportInstanceStatus")

    result = _open_json(capture, "--report-faulty")

    assert result.exit_code == 0, result.output
    opened = json.loads(result.stdout)
    [report] = reported
    assert report["Instances"] == [ids[1]] and report["Status"] == "impaired"
    assert opened["provider_case_id"] in report["Description"]
    assert [(r["host"], r["status"]) for r in opened["faulty_reports"]] == [("gpu002", "sent")]
    shown = json.loads(invoke("show", opened["escalation_id"], "--json").stdout)
    assert [e["data"]["host"] for e in shown["events"] if e["kind"] == "faulty-report"] == ["gpu002"]
