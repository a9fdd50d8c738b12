"""A local HTTPS stand-in for Azure Resource Manager: Microsoft.Compute VMs, Microsoft.Support tickets, files
and communications, and Microsoft.Impact workload impacts, answering the documented payloads with the exact
status codes the SDKs accept (201 workspace and file PUT, 204 upload, 202 + Azure-AsyncOperation for the
long-running ticket and communication PUTs). It checks what the real service would refuse (a missing bearer
token, file limits, blocked extensions, required ticket fields, a phone contact without a number, a message
without the `sender` a service principal must give, a communication or impact name used again) and records
every request. Sources: ../shared/reference/cloud-apis.md 3.1 and 3.2, azure-mgmt-support 7.0.0's models."""

from __future__ import annotations

import base64
import itertools
import json
import re
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "fake-token-not-real"
SUB = "00000000-0000-0000-0000-0000000fab1c"
FILE_MAX = 5_242_880
CHUNK_MAX = 2_621_440
BLOCKED = (".html", ".htm", ".exe", ".js", ".svg")
TICKET_REQUIRED = ("title", "description", "serviceId", "problemClassificationId", "severity",
                   "advancedDiagnosticConsent", "contactDetails")
CONTACT_REQUIRED = ("firstName", "lastName", "preferredContactMethod", "primaryEmailAddress", "preferredTimeZone",
                    "country", "preferredSupportLanguage")  # ContactProfile._validation, azure-mgmt-support 7.0.0
SERVICE = {"id": "/providers/Microsoft.Support/services/cddd3eb5-1830-b494-44fd-782f691479dc",
           "name": "cddd3eb5-1830-b494-44fd-782f691479dc", "type": "Microsoft.Support/services",
           "properties": {"displayName": "Virtual Machine running Linux",
                          "resourceTypes": ["MICROSOFT.COMPUTE/VIRTUALMACHINES"]}}
PROBLEMS = [
    {"id": f"{SERVICE['id']}/problemClassifications/pc-connect", "name": "pc-connect",
     "properties": {"displayName": "Cannot connect to my VM / Connection timeout"}},
    {"id": f"{SERVICE['id']}/problemClassifications/pc-gpu", "name": "pc-gpu",
     "properties": {"displayName": "GPU and InfiniBand / Hardware failure or degradation"}},
]


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: dict[str, Any] | None
    times: int
    after: bool = False  # the request is carried out, then the answer is lost (the caller sees `status`)


@dataclass
class ArmState:
    vms: dict[str, dict[str, Any]] = field(default_factory=dict)  # resource id -> VM json
    views: dict[str, dict[str, Any]] = field(default_factory=dict)  # resource id -> instance view json
    tickets: dict[str, dict[str, Any]] = field(default_factory=dict)
    communications: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    workspaces: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # ws -> file -> details
    impacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)  # async operation id -> polls left
    requests: list[dict[str, Any]] = field(default_factory=list)
    wire: list[bytes] = field(default_factory=list)  # every request as it arrived: method and target, then the body
    faults: list[Fault] = field(default_factory=list)
    page_size: int = 2


def error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


class FakeArm:
    def __init__(self, cert: str, key: str) -> None:
        self.state = ArmState()
        self._ids = itertools.count(1)
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"arm": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeArm:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- set-up helpers for tests ------------------------------------------------------------------------

    def add_vm(self, name: str, *, rg: str = "rg-train", computer: str | None = None, fault_domain: int = 0,
               update_domain: int = 0, scale_set: str | None = "vmss-ib", subgroup: str | None = None,
               block: str | None = None, zone: str = "2") -> str:
        rid = f"/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}"
        props: dict[str, Any] = {
            "vmId": f"0b8c0c52-0000-4000-8000-{len(self.state.vms):012d}",
            "hardwareProfile": {"vmSize": "Standard_ND96isr_H100_v5"},
            "osProfile": {"computerName": computer or name, "adminUsername": "azureuser"},
            "proximityPlacementGroup": {"id": f"/subscriptions/{SUB}/resourceGroups/{rg}/providers/"
                                              "Microsoft.Compute/proximityPlacementGroups/ppg-train"},
            "provisioningState": "Succeeded",
        }
        if scale_set:
            props["virtualMachineScaleSet"] = {"id": f"/subscriptions/{SUB}/resourceGroups/{rg}/providers/"
                                                     f"Microsoft.Compute/virtualMachineScaleSets/{scale_set}"}
        if block:
            props["interconnectBlockProfile"] = {"interconnectBlock": {"id": f"/subscriptions/{SUB}/resourceGroups/"
                                                 f"{rg}/providers/Microsoft.Compute/interconnectBlocks/{block}"}}
        self.state.vms[rid] = {"id": rid, "name": name, "type": "Microsoft.Compute/virtualMachines",
                               "location": "eastus2", "zones": [zone], "properties": props}
        view: dict[str, Any] = {"computerName": computer or name, "platformFaultDomain": fault_domain,
                                "platformUpdateDomain": update_domain,
                                "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info"},
                                             {"code": "PowerState/running", "level": "Info"}]}
        if subgroup:
            view["interconnectInstanceView"] = {"interconnectSubgroupId": subgroup}
        self.state.views[rid] = view
        return rid

    def fail(self, method: str, path: str, status: int, *, headers: dict[str, str] | None = None,
             body: dict[str, Any] | None = None, times: int = 1, after: bool = False) -> None:
        """The next `times` requests matching method and path (a regex searched in the path) get `status`
        (after=True: once the request has been carried out, as when the response is lost on the way back)."""
        self.state.faults.append(Fault(method, re.compile(path), status, headers or {}, body, times, after))

    def reply(self, provider_text: str, ticket: str) -> None:
        """Microsoft's engineer writes on the ticket."""
        self.state.communications.setdefault(ticket, []).append(self._communication(
            ticket, f"ms-{next(self._ids)}", {"subject": "Re", "body": provider_text}, "outbound",
            "support@microsoft.example"))

    def calls(self, method: str | None = None, contains: str = "") -> list[dict[str, Any]]:
        return [r for r in self.state.requests if (method is None or r["method"] == method) and contains in r["path"]]

    def file_bytes(self, workspace: str, name: str) -> bytes:
        f = self.state.workspaces[workspace][name]
        return b"".join(f["chunks"][i] for i in range(f["properties"]["numberOfChunks"]))

    # --- resources ----------------------------------------------------------------------------------------

    def _communication(self, ticket: str, name: str, props: dict[str, Any], direction: str,
                       sender: str) -> dict[str, Any]:
        n = sum(len(v) for v in self.state.communications.values())
        return {"id": f"/subscriptions/{SUB}/providers/Microsoft.Support/supportTickets/{ticket}/communications/"
                      f"{name}", "name": name, "type": "Microsoft.Support/communications",
                "properties": {**props, "communicationType": "web", "communicationDirection": direction,
                               "sender": sender, "createdDate": f"2026-11-30T01:{n:02d}:00Z"}}

    def async_operation(self) -> str:
        op = f"op-{next(self._ids)}"
        self.state.operations[op] = 1  # one poll in progress, then done
        return f"{self.url}/subscriptions/{SUB}/providers/Microsoft.Support/operationsStatus/{op}"


class _Handler(BaseHTTPRequestHandler):
    arm: FakeArm
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        arm = self.arm
        with arm.lock:
            arm.state.wire.append(f"{self.command} {self.path}\n".encode() + raw)
            arm.state.requests.append({"method": self.command, "path": parts.path, "query": query, "body": body,
                                       "auth": self.headers.get("Authorization")})
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(401, error("InvalidAuthenticationToken", "The access token is invalid."))
            fault = next((f for f in arm.state.faults if f.times > 0 and f.method == self.command
                          and f.path.search(parts.path)), None)
            if fault is not None:
                fault.times -= 1
                if fault.after:
                    route(arm, self.command, parts.path, query, body)
                return self._send(fault.status, fault.body or error("Injected", f"status {fault.status}"),
                                  fault.headers)
            status, payload, headers = route(arm, self.command, parts.path, query, body)
        self._send(status, payload, headers)

    do_GET = do_PUT = do_POST = do_PATCH = _handle


def _page(arm: FakeArm, items: list[Any], path: str, query: dict[str, str]) -> dict[str, Any]:
    start = int(query.get("skip", 0))
    page = items[start:start + arm.state.page_size]
    out: dict[str, Any] = {"value": page}
    if start + arm.state.page_size < len(items):
        out["nextLink"] = f"{arm.url}{path}?api-version={query.get('api-version')}&skip={start + arm.state.page_size}"
    return out


def route(arm: FakeArm, method: str, path: str, query: dict[str, str],
          body: Any) -> tuple[int, Any, dict[str, str] | None]:
    s = arm.state
    sub = f"/subscriptions/{SUB}"
    support = f"{sub}/providers/Microsoft.Support"
    if method == "GET" and path == f"{sub}/providers/Microsoft.Compute/virtualMachines":
        return 200, _page(arm, list(s.vms.values()), path, query), None
    if m := re.fullmatch(rf"{sub}/resourceGroups/([^/]+)/providers/Microsoft.Compute/virtualMachines", path):
        vms = [v for v in s.vms.values() if f"/resourceGroups/{m.group(1)}/" in v["id"]]
        return 200, _page(arm, vms, path, query), None
    if m := re.fullmatch(rf"({sub}/resourceGroups/[^/]+/providers/Microsoft.Compute/virtualMachines/[^/]+)/"
                         "instanceView", path):
        view = s.views.get(m.group(1))
        return (200, view, None) if view else (404, error("ResourceNotFound", "no such VM"), None)
    if path == "/providers/Microsoft.Support/services":
        return 200, {"value": [SERVICE]}, None
    if path == f"{SERVICE['id']}/problemClassifications":
        return 200, {"value": PROBLEMS}, None
    if m := re.fullmatch(rf"{support}/operationsStatus/(op-\d+)", path):
        left = s.operations.get(m.group(1), 0)
        s.operations[m.group(1)] = left - 1
        return 200, {"status": "InProgress" if left > 0 else "Succeeded"}, {"Retry-After": "0"}
    if path == f"{support}/supportTickets" and method == "GET":
        return 200, {"value": list(s.tickets.values())}, None
    if m := re.fullmatch(rf"{support}/supportTickets/([^/]+)", path):
        return _ticket(arm, method, m.group(1), body)
    if m := re.fullmatch(rf"{support}/supportTickets/([^/]+)/communications(?:/([^/]+))?", path):
        return _communications(arm, method, m.group(1), m.group(2), body)
    if m := re.fullmatch(rf"{support}/fileWorkspaces/([^/]+)(?:/files(?:/([^/]+)(/upload)?)?)?", path):
        return _files(arm, method, path, m.group(1), m.group(2), bool(m.group(3)))
    if m := re.fullmatch(rf"{sub}/providers/Microsoft.Impact/workloadImpacts/([^/]+)", path):
        return _impact(arm, method, m.group(1), body)
    return 404, error("NoRoute", f"{method} {path}"), None


def _ticket(arm: FakeArm, method: str, name: str, body: Any) -> tuple[int, Any, dict[str, str] | None]:
    s = arm.state
    if method == "GET":
        t = s.tickets.get(name)
        return (200, t, None) if t else (404, error("ResourceNotFound", f"support ticket {name} not found"), None)
    if method == "PATCH":
        t = s.tickets.get(name)
        if t is None:
            return 404, error("ResourceNotFound", "no such ticket"), None
        new = (body or {}).get("status")
        if new:
            t["properties"]["status"] = "Closed" if new == "closed" else "Open"
        return 200, t, None
    if method == "PUT":
        if name in s.tickets:
            return 200, s.tickets[name], None  # the same name: the same ticket
        props = (body or {}).get("properties", {})
        missing = [k for k in TICKET_REQUIRED if not props.get(k)]
        if missing:
            return 400, error("BadRequest", f"missing {', '.join(missing)}"), None
        contact = props["contactDetails"]
        missing = [k for k in CONTACT_REQUIRED if not contact.get(k)]
        if contact.get("preferredContactMethod") == "phone" and not contact.get("phoneNumber"):
            missing.append("phoneNumber (preferredContactMethod is phone)")
        if contact.get("preferredContactMethod") not in ("email", "phone"):
            missing.append("preferredContactMethod (email or phone)")
        if missing:
            return 400, error("BadRequest", f"contactDetails: missing {', '.join(missing)}"), None
        ws = props.get("fileWorkspaceName")
        if ws and ws not in s.workspaces:
            return 400, error("BadRequest", f"file workspace {ws} does not exist"), None
        s.tickets[name] = {
            "id": f"/subscriptions/{SUB}/providers/Microsoft.Support/supportTickets/{name}", "name": name,
            "type": "Microsoft.Support/supportTickets",
            "properties": {**props, "supportTicketId": f"26113000100{len(s.tickets) + 1:05d}", "status": "Open",
                           "createdDate": "2026-11-30T01:00:00Z", "modifiedDate": "2026-11-30T01:00:00Z"},
        }
        return 202, None, {"Azure-AsyncOperation": arm.async_operation(), "Retry-After": "0"}
    return 405, error("MethodNotAllowed", method), None


def _communications(arm: FakeArm, method: str, ticket: str, name: str | None,
                    body: Any) -> tuple[int, Any, dict[str, str] | None]:
    s = arm.state
    if ticket not in s.tickets:
        return 404, error("ResourceNotFound", "no such ticket"), None
    found = s.communications.setdefault(ticket, [])
    if method == "GET" and name is None:
        return 200, {"value": found}, None
    existing = next((c for c in found if c["name"] == name), None)
    if method == "GET":
        return (200, existing, None) if existing else (404, error("ResourceNotFound", "no such message"), None)
    if method == "PUT":
        props = (body or {}).get("properties", {})
        if not props.get("subject") or not props.get("body"):
            return 400, error("BadRequest", "subject and body are required"), None
        if not props.get("sender"):  # the caller is a service principal (an unattended run): sender is required
            return 400, error("BadRequest", "sender is required when the caller is a service principal"), None
        if existing is not None:
            same = all(existing["properties"].get(k) == props.get(k) for k in ("subject", "body", "sender"))
            if not same:
                return 409, error("Conflict", f"communication {name} exists"), None
        else:
            found.append(arm._communication(ticket, name or "", props, "inbound", props["sender"]))
        return 202, None, {"Azure-AsyncOperation": arm.async_operation(), "Retry-After": "0"}
    return 405, error("MethodNotAllowed", method), None


def _files(arm: FakeArm, method: str, path: str, ws: str, name: str | None,
           upload: bool) -> tuple[int, Any, dict[str, str] | None]:
    s = arm.state
    body = arm.state.requests[-1]["body"] or {}
    if name is None and "/files" not in path:
        if method == "GET":
            return (200, {"name": ws, "id": path}, None) if ws in s.workspaces else (
                404, error("ResourceNotFound", "no such workspace"), None)
        if method == "PUT":
            if ws in s.workspaces:
                return 409, error("Conflict", "workspace exists"), None
            s.workspaces[ws] = {}
            return 201, {"name": ws, "id": path, "properties": {"expirationTime": "2027-01-01T00:00:00Z"}}, None
    files = s.workspaces.get(ws)
    if files is None:
        return 404, error("ResourceNotFound", "no such workspace"), None
    if name is None:
        return 200, {"value": [{"name": n, "properties": f["properties"]} for n, f in files.items()]}, None
    if method == "PUT" and not upload:
        props = body.get("properties", {})
        if len(name) > 110 or name.lower().endswith(BLOCKED):
            return 400, error("InvalidFileName", f"{name} is not allowed"), None
        if not (1 <= props.get("fileSize", 0) <= FILE_MAX and props.get("chunkSize", 0) <= CHUNK_MAX
                and 1 <= props.get("numberOfChunks", 0) <= 2):
            return 400, error("InvalidFileDetails", json.dumps(props)), None
        if name in files:
            return 409, error("Conflict", "file exists"), None
        files[name] = {"properties": props, "chunks": {}}
        return 201, {"name": name, "properties": props}, None
    if method == "POST" and upload:
        f = files.get(name)
        if f is None:
            return 404, error("ResourceNotFound", "create the file first"), None
        index = body.get("chunkIndex")
        if not isinstance(index, int) or not 0 <= index < f["properties"]["numberOfChunks"]:
            return 400, error("InvalidChunk", str(index)), None
        data = base64.b64decode(body.get("content", ""))
        if len(data) > f["properties"]["chunkSize"]:
            return 400, error("ChunkTooLarge", str(len(data))), None
        f["chunks"][index] = data
        return 204, None, None
    return 405, error("MethodNotAllowed", method), None


def _impact_resource(name: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"/subscriptions/{SUB}/providers/Microsoft.Impact/workloadImpacts/{name}", "name": name,
            "properties": {**props, "provisioningState": "Succeeded"}}


IMPACT_REQUIRED = ("startDateTime", "impactCategory", "impactedResourceId")


def impact_problem(body: Any) -> str | None:
    """Why Guest Health Reporting would refuse this workloadImpacts body (cloud-apis.md 3.1: the required fields,
    PhysicalHostName, an ISO 8601 UTC start), or None."""
    props = (body or {}).get("properties", {}) if isinstance(body, dict) else {}
    missing = [k for k in IMPACT_REQUIRED if not props.get(k)]
    if missing or not props.get("additionalProperties", {}).get("PhysicalHostName"):
        return f"missing {missing or 'PhysicalHostName'}"
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", str(props["startDateTime"])):
        return f"startDateTime {props['startDateTime']!r} is not ISO 8601 UTC"
    return None


def _impact(arm: FakeArm, method: str, name: str, body: Any) -> tuple[int, Any, dict[str, str] | None]:
    if method == "GET":
        known = arm.state.impacts.get(name)
        return (200, _impact_resource(name, known["properties"]), None) if known else (
            404, error("ResourceNotFound", f"workload impact {name} not found"), None)
    if method != "PUT":
        return 405, error("MethodNotAllowed", method), None
    if name in arm.state.impacts:  # cloud-apis.md 3.1: impactName must be unique (reusing it does not return 200)
        return 409, error("Conflict", f"workload impact {name} already exists; impact names must be unique"), None
    problem = impact_problem(body)
    if problem:
        return 400, error("BadRequest", problem), None
    props = body["properties"]
    arm.state.impacts[name] = body
    return 201, _impact_resource(name, props), None
