"""`fabricase open --replay <64-host capture> --provider aws` against local test endpoints, start to a filed,
recorded case with the bundle attached, and where the time goes (capture excluded).

    python benchmarks/bench_open.py [--hosts 64] [--runs 3]

The capture is the evaluation harness's fleet (8 InfiniBand ports, a dual-port RoCE NIC with its `ethtool -S`,
8 GPUs x 6 NVLinks and a kernel log per host; one port with symbol errors) with Nitro DMI identity added, so
each host maps to an EC2 instance. EC2 and Support run in moto (server mode, on 127.0.0.1); what moto lacks
(instance topology, support codes, attachment upload links) is answered by botocore's Stubber, exactly as in
tests/providers/aws; the bundle is PUT to a local upload server. Nothing leaves this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests"), str(ROOT / "tests" / "providers" / "aws")]

import boto3  # noqa: E402
import fleetgen  # noqa: E402
import httpx  # noqa: E402
from awsfakes import REGION, Clients, UploadServer, stub_codes, write_config  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from fabricase.capturedir import host_capture_from_stream, write_host  # noqa: E402
from fabricase.cli import cli  # noqa: E402
from fabricase.collectors.framing import parse_stream  # noqa: E402
from fabricase.models import HostStatus  # noqa: E402
from fabricase.providers import aws  # noqa: E402
from loopback import moto_server, random_aws_keys  # noqa: E402


def _fake_env(nowhere: Path) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    key_id, secret = random_aws_keys()  # made at run time, never a committed literal
    os.environ.update({"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
                       "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": str(nowhere / "c"),
                       "AWS_CONFIG_FILE": str(nowhere / "f")})


def _ec2_capture(root: Path, moto: str, n: int) -> list[str]:
    """The harness fleet at `root`, each host given the DMI identity of one moto EC2 instance."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto)
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ids = [i["InstanceId"] for i in ec2.run_instances(ImageId=ami, MinCount=n, MaxCount=n,
                                                      InstanceType="p5.48xlarge")["Instances"]]
    scenario = next(s for s in fleetgen.scenarios(n, 1, 0) if s.kind == "symbol-errors")
    fleetgen.build(scenario, root, seed=1)
    from fabricase.capturedir import load_capture

    plan_capture = load_capture(root, verify=False)
    for hc, iid in zip(plan_capture.hosts, ids, strict=True):
        stream = root / "hosts" / hc.host / "stream.fc1"
        raw = stream.read_bytes()
        dmi = {"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge", "board_asset_tag": iid}
        items = b"".join(f"@@FC1 I identity file 0 0 {len(v) + 1} 0 - - /sys/class/dmi/id/{k}\n".encode()
                         + v.encode() + b"\n\n" for k, v in dmi.items())
        raw = raw.replace(b"@@FC1 END\n", items + b"@@FC1 END\n")
        from fabricase.collectors import select_collectors
        from fabricase.collectors.plan import CapturePlan

        plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "ethtool", "identity"])),
                           interval_s=fleetgen.INTERVAL_S)
        new = host_capture_from_stream(hc.host, parse_stream(raw), plan)
        new.status, new.transport = HostStatus.OK, "harness"
        write_host(root, new, raw)
    return ids


def _stubs(clients: Clients, ids: list[str], uploads: UploadServer) -> None:
    clients.stub("ec2").add_response("describe_instance_topology", {"Instances": [
        {"InstanceId": iid, "InstanceType": "p5.48xlarge", "NetworkNodes": ["nn-spine", f"nn-agg{k // 32}",
                                                                             f"nn-leaf{k // 16}"],
         "AvailabilityZone": "us-east-1a", "ZoneId": "use1-az4"} for k, iid in enumerate(ids)]}, None)
    stub_codes(clients)
    stub = clients.stub("support")
    stub.add_response("get_attachment_upload_links", {
        "uploadId": "upl-bench", "partSizeBytes": 104_857_600, "totalParts": 1,
        "uploadUrls": [{"url": f"{uploads.url}/upl-bench/part1", "partIndex": 1,
                        "expiryDate": "2026-12-01T00:00:00Z"}]}, None)
    stub.add_response("complete_attachment_upload", {"uploadStatus": "attachment-ready"}, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    walls, phases = [], []
    with moto_server() as moto:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="fabricase-bench-open-") as tmp:
                tmp = Path(tmp)
                _fake_env(tmp)
                httpx.post(f"{moto}/moto-api/reset").raise_for_status()
                home = tmp / "home"
                os.environ["FABRICASE_HOME"] = str(home)
                profile = write_config(home, moto, attachments="upload-links")
                ids = _ec2_capture(tmp / "capture", moto, args.hosts)
                uploads = UploadServer()
                clients = Clients(profile)
                aws.make_client = clients.factory
                _stubs(clients, ids, uploads)
                t0 = time.perf_counter()
                result = CliRunner().invoke(cli, ["open", "--replay", str(tmp / "capture"), "--provider", "aws",
                                                  "--symptom", "allreduce busbw fell 40%", "--json"])
                wall = time.perf_counter() - t0
                uploads.close()
                if result.exit_code != 0:
                    raise SystemExit(f"open failed: {result.output[-400:]}")
                out = json.loads(result.stdout)
                size = Path(out["bundle_path"]).stat().st_size
                walls.append(wall)
                phases.append(out["timings_s"])
                print(f"run {run + 1}: {wall:.2f} s, case {out['provider_case_id']}, bundle {size:,} bytes, "
                      f"{len(out['findings'])} findings")
    print(f"\n{args.hosts} hosts, median of {args.runs} runs: {statistics.median(walls):.2f} s from start to a filed, "
          "recorded case with the bundle attached")
    for phase in ("locate", "analyze", "render", "bundle", "record", "file"):
        print(f"  {phase:<8} {statistics.median(p.get(phase, 0.0) for p in phases):6.2f} s")


if __name__ == "__main__":
    main()
