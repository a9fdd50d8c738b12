"""A local stand-in for Compute Engine, Cloud Support v2 (and its media upload) and Google's OAuth token endpoint:
one ThreadingHTTPServer on 127.0.0.1 answering with the documented JSON payloads and status codes. The real SDKs
talk to it over REST (`api_endpoint`, `transport="rest"`); nothing here patches the SDKs.

The metadata server is pointed at an unused loopback port before google.auth is imported, so that the
credential chain never reaches 169.254.169.254.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from loopback import free_port

NO_METADATA = f"127.0.0.1:{free_port()}"
os.environ["GCE_METADATA_HOST"] = NO_METADATA
os.environ["GCE_METADATA_IP"] = NO_METADATA
os.environ.setdefault("GCE_METADATA_DETECT_RETRIES", "1")

PROJECT = "fc-test-project"
ZONE = "us-central1-b"
TOKEN = "ya29.fake-token-for-tests"
CLASSIFICATION_GPU = "100H41Q3DTMN0TBKCKD0SGRVNRFACSGJE1ICDKSMGLDN2"
PRIORITIES = ["PRIORITY_UNSPECIFIED", "P0", "P1", "P2", "P3", "P4"]  # the REST client sends enums as ints
STATES = ["STATE_UNSPECIFIED", "NEW", "IN_PROGRESS_GOOGLE_SUPPORT", "ACTION_REQUIRED", "SOLUTION_PROVIDED", "CLOSED"]


def instance(name: str, *, block: str = "blk-a", subblock: str = "sb-1", host: str = "h01", machine="a3-ultragpu-8g",
             reservation: str | None = "res-a3u", zone: str = ZONE, policies=("wp-highthroughput",)) -> dict:
    """An Instance as Compute Engine's REST API returns it (camelCase JSON)."""
    region = zone.rsplit("-", 1)[0]
    status: dict[str, Any] = {
        "physicalHost": f"/{block}/{subblock}/{host}",
        "physicalHostTopology": {"cluster": "us-central1-cluster-jfhb", "block": block, "subblock": subblock,
                                 "host": host},
    }
    if reservation:
        status["reservationConsumptionInfo"] = {
            "consumedReservation": f"projects/{PROJECT}/zones/{zone}/reservations/{reservation}",
            "consumedReservationBlock": f"projects/{PROJECT}/zones/{zone}/reservations/{reservation}"
                                        f"/reservationBlocks/{block}",
            "consumedReservationSubBlock": f"projects/{PROJECT}/zones/{zone}/reservations/{reservation}"
                                           f"/reservationBlocks/{block}/reservationSubBlocks/{subblock}",
        }
    return {
        "kind": "compute#instance", "id": str(abs(hash(name)) % 10**18), "name": name, "status": "RUNNING",
        "zone": f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}",
        "machineType": f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}/machineTypes/{machine}",
        "resourcePolicies": [f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/regions/{region}"
                             f"/resourcePolicies/{p}" for p in policies],
        "resourceStatus": status,
    }


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass
class FakeGoogle:
    """State of the fake APIs, and what they were asked."""

    base: str = ""
    instances: dict[tuple[str, str], dict] = field(default_factory=dict)  # (zone, name) -> Instance JSON
    cases: dict[str, dict] = field(default_factory=dict)  # case name -> Case JSON
    comments: dict[str, list[dict]] = field(default_factory=dict)
    attachments: dict[str, list[dict]] = field(default_factory=dict)
    uploads: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (case, filename) -> bytes
    requests: list[Seen] = field(default_factory=list)
    wire: list[bytes] = field(default_factory=list)  # every request as it arrived: method and target, then the body
    faults: list[list] = field(default_factory=list)  # [method, path regex, status, message, times left, after, html]
    search_lags: bool = False  # cases:search does not see cases yet (the index lags)
    classification_queries: list[str] = field(default_factory=list)
    tokens_issued: int = 0
    clock: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tick(self) -> str:
        """The next timestamp: every case and comment is later than the one before."""
        self.clock += 1
        return f"2026-12-01T09:{self.clock // 60:02d}:{self.clock % 60:02d}Z"

    def add(self, inst: dict, zone: str = ZONE) -> None:
        self.instances[(zone, inst["name"])] = inst

    def fail(self, method: str, path: str, status: int, message: str = "injected", times: int = 1, *,
             after: bool = False, html: bool = False) -> None:
        """Answer the next `times` matching requests with `status`. after: the request is carried out first (a
        case created, then its answer lost: a gateway's 504); html: the answer is an HTML page, not the API's
        JSON error (an endpoint or proxy without the operation)."""
        self.faults.append([method, re.compile(path), status, message, times, after, html])

    def seen(self, method: str, pattern: str) -> list[Seen]:
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    def google_comment(self, case: str, body: str) -> None:
        """A comment written by Google's support engineer."""
        items = self.comments.setdefault(case, [])
        items.append({"name": f"{case}/comments/{len(items) + 1}", "createTime": self.tick(),
                      "creator": {"displayName": "Google Support", "googleSupport": True}, "body": body})


CLASSIFICATIONS = [
    {"id": "ZXXX", "displayName": "Technical Issue > Compute > Compute Engine > Instances"},
    {"id": CLASSIFICATION_GPU, "displayName": "Technical Issue > Compute > Compute Engine > GPU"},
    {"id": "ZBILL", "displayName": "Billing > Invoices"},
]
# caseClassifications:search `query`: empty (everything), or FIELD:"VALUE" on displayName or id. A VALUE without
# `*` must equal the whole field (the hierarchy "A > B > C"), `*` matches any run of characters: cloud-apis.md 2.2
# and its probe, where `display_name:"*Compute Engine*"` found "Technical Issue > Compute > Compute Engine > GPU".
_CLASSIFICATION_QUERY = re.compile(r'\s*(display_name|displayName|id)\s*:\s*"([^"]*)"\s*')
# cases:search `query` (google-cloud-support 0.5.4 SearchCasesRequest): a quoted global restriction, or
# state=, priority=, creator.email=, update_time> restrictions joined by AND / OR.
_TERM = r'(?:"[^"]*"|state=(?:OPEN|CLOSED)|priority=P[0-4]|creator\.email="[^"]+"|update_time>"[^"]+")'
SEARCH_QUERY = re.compile(rf"(?:{_TERM}(?:\s+(?:AND|OR)\s+\(?{_TERM}\)?)*)?")
# Case fields cases.create refuses without (the Case proto's documented use; cloud-apis.md 2.2).
CASE_REQUIRED = ("displayName", "description", "classification")


def classification_filter(query: str):
    """A predicate for one classification, or ValueError for a query the API would refuse."""
    if not query.strip():
        return lambda c: True
    m = _CLASSIFICATION_QUERY.fullmatch(query)
    if m is None:
        raise ValueError(f"invalid query: {query}")
    key = "id" if m[1] == "id" else "displayName"
    pattern = re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", m[2])),
                         re.IGNORECASE)
    return lambda c: pattern.fullmatch(c[key]) is not None


def case_problem(case: dict) -> str | None:
    """What cases.create would refuse in this Case, or None."""
    missing = [k for k in CASE_REQUIRED if not case.get(k)]
    if missing:
        return f"missing required field(s): {', '.join(missing)}"
    if (case["classification"] or {}).get("id") not in {c["id"] for c in CLASSIFICATIONS}:
        return f"unknown classification id {case['classification'].get('id')!r}"
    if "name" in case:
        return "name is assigned by the server: a new case must not carry one"
    priority = case.get("priority", 0)
    if priority not in (1, 2, 3, 4, 5) and priority not in PRIORITIES[1:]:
        return f"invalid priority {priority!r}"
    return None


def _error(status: int, message: str) -> dict:
    names = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
             429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
    return {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}


def _routes(g: FakeGoogle):
    P = r"projects/(?P<project>[^/]+)"
    Z = rf"/compute/v1/{P}/zones/(?P<zone>[^/]+)"
    RB = rf"{Z}/reservations/(?P<res>[^/]+)/reservationBlocks/(?P<blk>[^/]+)"
    C = rf"/v2/{P}/cases/(?P<case>[^/:]+)"

    def case_name(m):
        return f"projects/{m['project']}/cases/{m['case']}"

    def get_instance(m, q, body):
        inst = g.instances.get((m["zone"], m["name"]))
        if inst is None:
            return 404, _error(404, f"The resource 'projects/{m['project']}/zones/{m['zone']}/instances/"
                                    f"{m['name']}' was not found")
        return 200, inst

    def aggregated(m, q, body):
        wanted = re.fullmatch(r'name = "([^"]+)"', q.get("filter", [""])[0])
        items: dict[str, dict] = {}
        for (zone, name), inst in g.instances.items():
            if wanted is None or wanted[1] == name:
                items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(inst)
        return 200, {"kind": "compute#instanceAggregatedList", "items": items}

    def operation(kind):
        def answer(m, q, body):
            return 200, {"kind": "compute#operation", "name": f"operation-{kind}-1", "operationType": kind,
                         "status": "RUNNING", "progress": 0, "zone": m.get("zone")}
        return answer

    def block(m, q, body):
        return 200, {"resource": {"name": m["blk"], "healthInfo": {
            "healthStatus": "HEALTHY", "healthySubBlockCount": 4, "degradedSubBlockCount": 0}}}

    def sub_block(m, q, body):
        return 200, {"resource": {"name": m["sb"], "physicalTopology": {"block": m["blk"], "subBlock": m["sb"]},
                                  "healthInfo": {"healthStatus": "DEGRADED", "healthyHostCount": 17,
                                                 "degradedHostCount": 1, "healthyInfraCount": 3,
                                                 "degradedInfraCount": 1}}}

    def policy(m, q, body):
        return 200, {"name": m["pol"], "workloadPolicy": {"type": "HIGH_THROUGHPUT", "maxTopologyDistance": "BLOCK"}}

    def classifications(m, q, body):
        try:
            matches = classification_filter(q.get("query", [""])[0])
        except ValueError as exc:
            return 400, _error(400, str(exc))
        g.classification_queries.append(q.get("query", [""])[0])
        return 200, {"caseClassifications": [c for c in CLASSIFICATIONS if matches(c)]}

    def create_case(m, q, body):
        problem = case_problem(body)
        if problem:
            return 400, _error(400, problem)
        with g.lock:
            number = str(40000000 + len(g.cases))
            name = f"projects/{m['project']}/cases/{number}"
            case = dict(body)
            priority = case.get("priority", 0)
            case.update(name=name, state="NEW", createTime=g.tick(),
                        priority=PRIORITIES[priority] if isinstance(priority, int) else priority, escalated=False)
            g.cases[name] = case
        return 200, case

    def list_cases(m, q, body):
        return 200, {"cases": list(reversed(g.cases.values()))}  # newest first

    def search_cases(m, q, body):
        if not SEARCH_QUERY.fullmatch(q.get("query", [""])[0]):
            return 400, _error(400, f"invalid query: {q.get('query', [''])[0]}")
        query = q.get("query", [""])[0].strip('"')
        hits = [] if g.search_lags else [c for c in g.cases.values()
                                         if query in c.get("displayName", "") + c.get("description", "")]
        return 200, {"cases": hits}

    def get_case(m, q, body):
        case = g.cases.get(case_name(m))
        return (200, case) if case else (404, _error(404, "case not found"))

    def set_case(**changes):
        def answer(m, q, body):
            case = g.cases.get(case_name(m))
            if case is None:
                return 404, _error(404, "case not found")
            case.update(changes)
            return 200, case
        return answer

    def create_comment(m, q, body):
        items = g.comments.setdefault(case_name(m), [])
        item = {"name": f"{case_name(m)}/comments/{len(items) + 1}", "body": body["body"],
                "createTime": g.tick(), "creator": {"displayName": "fabricase",
                                                                               "googleSupport": False}}
        items.append(item)
        return 200, item

    def list_comments(m, q, body):
        return 200, {"comments": list(reversed(g.comments.get(case_name(m), [])))}  # newest first

    def list_attachments(m, q, body):
        return 200, {"attachments": g.attachments.get(case_name(m), [])}

    def upload(m, q, raw):
        name = case_name(m)
        if name not in g.cases:
            return 404, _error(404, "case not found")
        filename = q["attachment.filename"][0]
        g.uploads[(name, filename)] = raw
        att = {"name": f"{name}/attachments/{len(g.attachments.get(name, [])) + 1}", "filename": filename,
               "sizeBytes": str(len(raw)), "mimeType": "application/octet-stream"}
        g.attachments.setdefault(name, []).append(att)
        return 200, att

    def token(m, q, raw):
        g.tokens_issued += 1
        return 200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}

    return [
        ("POST", r"/token", token, "raw"),
        ("GET", rf"/compute/v1/{P}", lambda m, q, b: (200, {"name": m["project"], "id": "1234"}), "json"),
        ("GET", rf"{Z}/instances/(?P<name>[^/]+)", get_instance, "json"),
        ("GET", rf"/compute/v1/{P}/aggregated/instances", aggregated, "json"),
        ("POST", rf"{Z}/instances/(?P<name>[^/]+)/reportHostAsFaulty", operation("reportHostAsFaulty"), "json"),
        ("GET", RB, block, "json"),
        ("GET", rf"{RB}/reservationSubBlocks/(?P<sb>[^/]+)", sub_block, "json"),
        ("POST", rf"{RB}/reservationSubBlocks/(?P<sb>[^/]+)/reportFaulty", operation("reportFaulty"), "json"),
        ("GET", rf"/compute/v1/{P}/regions/(?P<region>[^/]+)/resourcePolicies/(?P<pol>[^/]+)", policy, "json"),
        ("GET", r"/v2/caseClassifications:search", classifications, "json"),
        ("POST", rf"/v2/{P}/cases", create_case, "json"),
        ("GET", rf"/v2/{P}/cases", list_cases, "json"),
        ("GET", rf"/v2/{P}/cases:search", search_cases, "json"),
        ("GET", C, get_case, "json"),
        ("POST", rf"{C}:close", set_case(state="CLOSED"), "json"),
        ("POST", rf"{C}:escalate", set_case(escalated=True), "json"),
        ("POST", rf"{C}/comments", create_comment, "json"),
        ("GET", rf"{C}/comments", list_comments, "json"),
        ("GET", rf"{C}/attachments", list_attachments, "json"),
        ("POST", rf"/upload/v2/{P}/cases/(?P<case>[^/:]+)/attachments", upload, "raw"),
    ]


def handler(g: FakeGoogle):
    routes = [(method, re.compile(pattern), fn, kind) for method, pattern, fn, kind in _routes(g)]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, payload: dict | str) -> None:
            html = isinstance(payload, str)
            data = payload.encode() if html else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8" if html else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            query = parse_qs(url.query)
            fault = None
            with g.lock:
                g.wire.append(f"{self.command} {self.path}\n".encode() + body)
                g.requests.append(Seen(self.command, url.path, query, body,
                                    {k.lower(): v for k, v in self.headers.items()}))
                for candidate in g.faults:
                    if candidate[4] > 0 and candidate[0] == self.command and candidate[1].search(url.path):
                        candidate[4] -= 1
                        fault = candidate
                        break
            if fault is not None:
                if fault[5]:
                    self._route(url, query, body)  # carried out; only its answer is lost
                page = f"<!DOCTYPE html><html><body><h1>{fault[2]}</h1><p>{fault[3]}</p></body></html>"
                return self._answer(fault[2], page if fault[6] else _error(fault[2], fault[3]))
            status, answer = self._route(url, query, body)
            return self._answer(status, answer)

        def _route(self, url, query, body) -> tuple[int, dict]:
            for method, pattern, fn, kind in routes:
                m = pattern.fullmatch(url.path)
                if m and method == self.command:
                    if kind == "json":
                        payload = json.loads(body or b"{}")
                        if self.command == "POST" and url.path.endswith("/comments"):
                            payload = payload if "body" in payload else payload.get("comment", payload)
                    else:
                        payload = body
                    return fn(m.groupdict(), query, payload)
            return 404, _error(404, f"no route for {self.command} {url.path}")

        do_GET = do_POST = do_PATCH = _serve

    return Handler




def write_profile(config_dir: Path, base: str, **extra: Any) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    lines = ["[providers.gcp]", f'project = "{PROJECT}"']
    for key, value in extra.items():
        lines.append(f"{key} = {json.dumps(value)}")
    lines.append(f'endpoints = {{compute = "{base}", support = "{base}"}}')
    (config_dir / "config.toml").write_text("\n".join(lines) + "\n")


@contextmanager
def serving() -> Iterator[FakeGoogle]:
    """A FakeGoogle answering on a loopback port (its `base` URL) for the duration of the `with`."""
    from http.server import ThreadingHTTPServer

    g = FakeGoogle()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(g))
    server.daemon_threads = True
    g.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield g
    finally:
        server.shutdown()
        server.server_close()
