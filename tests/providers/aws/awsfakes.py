"""Fakes for the AWS provider tests: an operation-selective Stubber, the provider's clients with a Stubber each,
a local stand-in for presigned upload URLs, config.toml, and stubbed answers for the support codes and uploads."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path
from typing import Any

from botocore.stub import Stubber

from fabricase.providers.aws_client import make_client, settings_from

REGION = "us-east-1"


class OpStubber(Stubber):
    """A Stubber for some operations only: those named in `operations` take their queued responses (checked
    against the model as Stubber does); every other operation goes over HTTP to the endpoint (moto)."""

    def __init__(self, client: Any, operations: set[str]) -> None:
        super().__init__(client)
        self.operations = operations

    def _assert_expected_params(self, model: Any, params: Any, context: Any, **kwargs: Any) -> None:
        if model.name in self.operations:
            super()._assert_expected_params(model, params, context, **kwargs)

    def _get_response_handler(self, model: Any, params: Any, context: Any, **kwargs: Any) -> Any:
        if model.name in self.operations:
            return super()._get_response_handler(model, params, context, **kwargs)
        return None


# What moto 5.2.5 does not implement: these go to the Stubber.
STUBBED = {
    "ec2": {"DescribeInstanceTopology", "DescribeCapacityBlockStatus", "ReportInstanceStatus"},
    "support": {"DescribeServices", "DescribeSeverityLevels", "AddAttachmentsToSet", "GetAttachmentUploadLinks",
                "CompleteAttachmentUpload", "DescribeAttachmentUploadStatus", "AddCommunicationToCase",
                "DescribeCommunications"},
    "sts": set(),
}


class Clients:
    """The provider's boto3 clients, built by its own make_client from config.toml, with a Stubber each."""

    def __init__(self, profile: dict[str, Any]) -> None:
        settings = settings_from(profile)
        self.clients = {
            "ec2": make_client("ec2", settings, REGION),
            "support": make_client("support", settings, settings.support_region),
            "sts": make_client("sts", settings, REGION),
        }
        self.stubbers = {name: OpStubber(client, set(STUBBED[name])) for name, client in self.clients.items()}
        for stubber in self.stubbers.values():
            stubber.activate()

    def stub(self, service: str) -> OpStubber:
        return self.stubbers[service]

    def factory(self, service: str, settings: Any, region: str | None) -> Any:
        return self.clients[service]

    def assert_no_pending(self) -> None:
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()


def write_config(home: Path, moto_url: str, **extra: Any) -> dict[str, Any]:
    profile = {"region": REGION, "endpoint_url": moto_url, **extra}
    lines = ["[providers.aws]"] + [f"{key} = {json.dumps(value)}" for key, value in profile.items()
                                   if not isinstance(value, dict)]
    for key, value in profile.items():
        if isinstance(value, dict):
            lines += [f"[providers.aws.{key}]"] + [f"{k} = {json.dumps(v)}" for k, v in value.items()]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    return profile


class UploadServer:
    """Stands in for the presigned S3 upload URLs: takes PUTs, keeps each body, answers an ETag (MD5, quoted,
    as S3 does). `fail` answers that many PUTs with the given status first."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.fail: list[int] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if outer.fail:
                    self.send_response(outer.fail.pop(0))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.bodies[self.path] = body
                self.send_response(200)
                self.send_header("ETag", '"' + hashlib.md5(body).hexdigest() + '"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


SERVICES = {"services": [{"code": "amazon-elastic-compute-cloud-linux", "name": "EC2 (Linux)", "categories": [
    {"code": "general-guidance", "name": "General Guidance"}, {"code": "instance-issue", "name": "Instance Issue"},
    {"code": "other", "name": "Other"}]}]}
SEVERITIES = {"severityLevels": [{"code": c, "name": c} for c in ("low", "normal", "high", "urgent")]}


def stub_codes(clients: Clients) -> None:
    """DescribeServices and DescribeSeverityLevels as a Business plan answers (no `critical`)."""
    stub = clients.stub("support")
    stub.add_response("describe_services", SERVICES,
                      {"serviceCodeList": ["amazon-elastic-compute-cloud-linux"], "language": "en"})
    stub.add_response("describe_severity_levels", SEVERITIES, {"language": "en"})


def stub_upload_links(clients: Clients, uploads: UploadServer, *, name: str, size: int, part_bytes: int,
                      upload_id: str = "upl-1", per_call: int = 10) -> None:
    """GetAttachmentUploadLinks (in calls of at most `per_call` links), then CompleteAttachmentUpload with the
    ETags the upload server will give, then one DescribeAttachmentUploadStatus poll."""
    stub = clients.stub("support")
    total = -(-size // part_bytes)
    for start in range(1, total + 1, per_call):
        stop = min(start + per_call, total + 1)
        response = {"uploadId": upload_id, "partSizeBytes": part_bytes, "totalParts": total,
                    "uploadUrls": [{"url": f"{uploads.url}/{upload_id}/part{i}", "partIndex": i,
                                    "expiryDate": "2026-12-01T00:00:00Z"} for i in range(start, stop)]}
        if stop <= total:
            response["nextIndex"] = stop
        expected = ({"fileName": name, "fileSizeBytes": size} if start == 1
                    else {"fileName": name, "uploadId": upload_id, "uploadRange": {"startIndex": start}})
        stub.add_response("get_attachment_upload_links", response, expected)
    stub.add_response("complete_attachment_upload", {"uploadStatus": "attachment-not-ready"}, None)
    stub.add_response("describe_attachment_upload_status",
                      {"uploadStatus": "attachment-ready", "fileName": name,
                       "uploadProgress": {"totalParts": total, "completedPartsCount": total}},
                      {"uploadId": upload_id})


def capture_params(client: Any, operation: str) -> list[dict[str, Any]]:
    """Every request's parameters for one operation of this client, as the SDK sends them (botocore's public
    provide-client-params event), in order."""
    seen: list[dict[str, Any]] = []

    def keep(params: dict[str, Any], **kwargs: Any) -> None:
        seen.append(dict(params))

    client.meta.events.register(f"provide-client-params.{client.meta.service_model.service_id.hyphenize()}"
                                f".{operation}", keep)
    return seen


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **kwargs: Any) -> Any:
        yield self.body


def answer_once(client: Any, operation: str, status: int, body: dict[str, Any] | str, *, times: int = 1,
                before: Any = None) -> list[int]:
    """The next `times` requests of `operation` are answered with this HTTP status and JSON body (a str: an HTML
    page, as a proxy or an endpoint without the operation answers) instead of being sent (botocore's public
    before-send event); `before()` runs first (a side effect the lost answer had). Returns a list that grows by
    one per answered request."""
    from botocore.awsrequest import AWSResponse

    answered: list[int] = []

    def send(request: Any, **kwargs: Any) -> Any:
        if len(answered) >= times or operation not in (request.headers.get("X-Amz-Target") or b"").decode():
            return None
        answered.append(status)
        if before is not None:
            before()
        if isinstance(body, str):
            return AWSResponse(request.url, status, {"Content-Type": "text/html; charset=utf-8"},
                               _Raw(body.encode()))
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "fake-request"}
        return AWSResponse(request.url, status, headers, _Raw(json.dumps(body).encode()))

    client.meta.events.register_first(f"before-send.{client.meta.service_model.service_id.hyphenize()}", send)
    return answered


def write_ec2_capture(root: Path, instances: dict[str, str | None], bad: set[str]) -> Path:
    """A capture directory (format 2, the harness's stream writer) of EC2 hosts: DMI identity as Nitro shows it
    (board_asset_tag = the instance id) and one InfiniBand/EFA-style RDMA port each; the hosts in `bad` take 40
    symbol errors in the interval."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
    import fleetgen

    from fabricase.capturedir import host_capture_from_stream, write_capture_meta, write_host
    from fabricase.collectors import select_collectors
    from fabricase.collectors.framing import parse_stream
    from fabricase.collectors.plan import CapturePlan
    from fabricase.models import HostStatus

    plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "identity"])), interval_s=fleetgen.INTERVAL_S)
    root.mkdir(parents=True)
    write_capture_meta(root, plan=plan, targets={"nodeset": ",".join(instances)}, hosts=list(instances),
                       created_at="2026-11-30T00:00:00Z")
    for host, instance_id in instances.items():
        counters = {name: (10, 10) for name in (*fleetgen.COUNTERS, *fleetgen.HW)}
        counters["port_rcv_data"] = counters["port_xmit_data"] = (10**9, 2 * 10**9)
        if host in bad:
            counters["symbol_error"] = (10, 50)
        raw = fleetgen._stream([{"dev": "mlx5_0", "counters": counters, "rate": "400 Gb/sec (4X NDR)"}])
        dmi = {"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge", "board_asset_tag": instance_id}
        items = b"".join(
            f"@@FC1 I identity file 0 0 {len(value) + 1} 0 - - /sys/class/dmi/id/{name}\n".encode()
            + value.encode() + b"\n\n"
            for name, value in dmi.items() if value)
        raw = raw.replace(b"@@FC1 END\n", items + b"@@FC1 END\n")
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "test"
        write_host(root, hc, raw)
    return root


def record_wire(client: Any) -> list[bytes]:
    """Every request this client makes, as bytes, in order: each operation's serialized request (a stubbed one
    too, which never reaches a socket; botocore's public before-call event) and, for each that goes over HTTP
    to moto, the prepared request as sent (before-send). Each entry is `METHOD URL` and a newline, then the body;
    a query-protocol body (EC2) is form-encoded as botocore's AWSRequest encodes it."""
    from urllib.parse import urlencode

    wire: list[bytes] = []

    def as_bytes(body: Any) -> bytes:
        if isinstance(body, dict):
            body = urlencode(body, doseq=True)
        if isinstance(body, str):
            return body.encode()
        return body if isinstance(body, bytes | bytearray) else b""

    def serialized(params: dict[str, Any], **kwargs: Any) -> None:
        wire.append(f"{params.get('method')} {params.get('url')}\n".encode() + as_bytes(params.get("body")))

    def sent(request: Any, **kwargs: Any) -> None:
        wire.append(f"{request.method} {request.url}\n".encode() + as_bytes(request.body))

    client.meta.events.register_first("before-call.*.*", serialized)
    client.meta.events.register_first("before-send.*", sent)
    return wire
