"""Local stand-ins for Jira Service Management and Zendesk: real HTTP servers on 127.0.0.1 (http.server in a
thread) answering the documented paths and payloads (../shared/reference/cloud-apis.md section 4), keeping
what was filed, and failing on demand (`fail`). They check what the real desks insist on: Basic auth,
Jira's `X-Atlassian-Token: no-check` and multipart field `file`, Zendesk's upload token and Idempotency-Key."""

from __future__ import annotations

import base64
import binascii
import contextlib
import email.parser
import email.policy
import itertools
import json
import random
import re
import string
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes, urlsplit

JIRA_EMAIL, JIRA_TOKEN = "oncall@example.com", "fake-jira-token-not-real"
ZENDESK_EMAIL, ZENDESK_TOKEN = "oncall@example.com", "fake-zendesk-token-not-real"


@dataclass
class Failure:
    method: str
    path: re.Pattern[str]
    status: int
    headers: dict[str, str]
    times: int
    process: bool  # handle the request, then answer the failure: a response lost on the way back
    html: bool = False  # answer an HTML page, not the desk's JSON error (a proxy or a site without the API)


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class FakeDesk:
    """Routing, auth, failure injection and the request log shared by both fakes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures: list[Failure] = []
        self.calls: list[tuple[str, str]] = []
        self.wire: list[bytes] = []  # every request as it arrived: method and target (path, query), then the body
        self.server: ThreadingHTTPServer | None = None

    # overridden
    def authorized(self, header: str | None) -> bool:
        raise NotImplementedError

    def route(self, method: str, path: str, query: dict[str, list[str]], headers, body: bytes) -> Reply:
        raise NotImplementedError

    def fail(self, method: str, path: str, status: int, *, headers: dict[str, str] | None = None, times: int = 1,
             process: bool = False, html: bool = False) -> None:
        self.failures.append(Failure(method, re.compile(path), status, headers or {}, times, process, html))

    def handle(self, method: str, target: str, headers, body: bytes) -> Reply:
        url = urlsplit(target)
        with self.lock:
            self.calls.append((method, url.path))
            self.wire.append(f"{method} {target}\n".encode() + body)
            if not self.authorized(headers.get("Authorization")):
                return Reply(401, {"errorMessage": "Client must be authenticated to access this resource.",
                                   "error": "Couldn't authenticate you"})
            failure = next((f for f in self.failures if f.method == method and f.path.search(url.path)
                            and f.times > 0), None)
            if failure is not None:
                failure.times -= 1
                if failure.process:
                    self.route(method, url.path, parse_qs(url.query), headers, body)
                if failure.html:
                    return Reply(failure.status, f"<!DOCTYPE html><html><body><h1>{failure.status}</h1>"
                                                 "</body></html>", failure.headers)
                return Reply(failure.status, {"errorMessage": f"injected {failure.status}",
                                              "error": f"injected {failure.status}"}, failure.headers)
            return self.route(method, url.path, parse_qs(url.query), headers, body)

    def start(self) -> str:
        desk = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                reply = desk.handle(self.command, self.path, self.headers, body)
                html = isinstance(reply.body, str)
                data = b"" if reply.body is None else reply.body.encode() if html else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "text/html; charset=utf-8" if html else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _serve

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _basic(header: str | None) -> str:
    if not header or not header.startswith("Basic "):
        return ""
    return base64.b64decode(header[6:]).decode()


class FakeJira(FakeDesk):
    DESK, REQUEST_TYPE, ME = "10", "42", "acct-oncall"

    def __init__(self, upload_limit: int = 10 * 1024 * 1024) -> None:
        super().__init__()
        self.upload_limit = upload_limit
        self.requests: dict[str, dict[str, Any]] = {}
        self.temporary: dict[str, tuple[str, bytes]] = {}
        self.attachments: dict[str, list[tuple[str, bytes]]] = {}
        self.comments: dict[str, list[dict[str, Any]]] = {}
        self._keys = itertools.count(1)
        self._ids = itertools.count(1)
        self._clock = itertools.count(1)

    def authorized(self, header: str | None) -> bool:
        return _basic(header) == f"{JIRA_EMAIL}:{JIRA_TOKEN}"

    def _at(self) -> str:
        return f"2026-12-01T10:{next(self._clock):02d}:00.000+0000"  # every comment later than the one before

    def agent_comment(self, key: str, body: str) -> None:
        self.comments[key].append({"id": str(next(self._ids)), "body": body, "public": True,
                                   "author": {"accountId": "acct-agent", "displayName": "Support Agent"},
                                   "created": {"iso8601": self._at()}})

    def _request(self, key: str) -> dict[str, Any]:
        r = self.requests[key]
        return {"issueKey": key, "requestTypeId": r["requestTypeId"], "serviceDeskId": r["serviceDeskId"],
                "requestFieldValues": [{"fieldId": k, "value": v} for k, v in r["fields"].items()],
                "currentStatus": {"status": r["status"], "statusCategory": r["category"]},
                "_links": {"web": f"https://example.atlassian.net/servicedesk/customer/portal/1/{key}"}}

    def route(self, method, path, query, headers, body) -> Reply:
        if (method, path) == ("GET", "/rest/api/3/attachment/meta"):
            return Reply(200, {"enabled": True, "uploadLimit": self.upload_limit})
        if (method, path) == ("GET", "/rest/api/3/myself"):
            return Reply(200, {"accountId": self.ME, "displayName": "Fabric Oncall", "emailAddress": JIRA_EMAIL})
        if (method, path) == ("GET", f"/rest/servicedeskapi/servicedesk/{self.DESK}"):
            return Reply(200, {"id": self.DESK, "projectKey": "GPU", "projectName": "GPU Cloud Support"})
        if (method, path) == ("GET", f"/rest/servicedeskapi/servicedesk/{self.DESK}/requesttype/{self.REQUEST_TYPE}"):
            return Reply(200, {"id": self.REQUEST_TYPE, "name": "Hardware fault"})
        if (method, path) == ("POST", f"/rest/servicedeskapi/servicedesk/{self.DESK}/attachTemporaryFile"):
            if headers.get("X-Atlassian-Token") != "no-check":
                return Reply(403, {"errorMessage": "XSRF check failed"})
            part = email.parser.BytesParser(policy=email.policy.default).parsebytes(
                b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body)
            files = [p for p in part.iter_parts() if p.get_param("name", header="content-disposition") == "file"]
            if len(files) != 1:
                return Reply(400, {"errorMessage": "expected one multipart field named file"})
            if len(files[0].get_payload(decode=True)) > self.upload_limit:
                return Reply(413, {"errorMessage": "The file is larger than the upload limit"})
            tid = f"temp-{next(self._ids)}"
            self.temporary[tid] = (files[0].get_filename(), files[0].get_payload(decode=True))
            return Reply(201, {"temporaryAttachments": [{"temporaryAttachmentId": tid,
                                                         "fileName": files[0].get_filename()}]})
        if (method, path) == ("POST", "/rest/servicedeskapi/request"):
            doc = json.loads(body)
            if doc.get("serviceDeskId") != self.DESK or doc.get("requestTypeId") != self.REQUEST_TYPE:
                return Reply(400, {"errorMessage": "unknown service desk or request type"})
            fields = doc["requestFieldValues"]
            if not fields.get("summary") or len(fields["summary"]) > 255:
                return Reply(400, {"errors": {"summary": "You must specify a summary of the issue."}})
            key = f"GPU-{next(self._keys)}"
            self.requests[key] = {"serviceDeskId": self.DESK, "requestTypeId": self.REQUEST_TYPE, "fields": fields,
                                  "status": "Waiting for support", "category": "INDETERMINATE"}
            self.attachments[key], self.comments[key] = [], []
            return Reply(201, self._request(key))
        if (method, path) == ("GET", "/rest/servicedeskapi/request"):
            term = query.get("searchTerm", [""])[0]
            found = [self._request(k) for k, r in self.requests.items() if term in r["fields"]["summary"]]
            return Reply(200, {"size": len(found), "values": found, "isLastPage": True})
        m = re.fullmatch(r"/rest/servicedeskapi/request/([A-Z]+-\d+)(/\w+)?", path)
        if not m or m.group(1) not in self.requests:
            return Reply(404, {"errorMessage": f"no such resource {path}"})
        key, sub = m.group(1), m.group(2)
        r = self.requests[key]
        if sub is None and method == "GET":
            return Reply(200, self._request(key))
        if sub == "/attachment" and method == "POST":
            doc = json.loads(body)
            for tid in doc["temporaryAttachmentIds"]:
                self.attachments[key].append(self.temporary.pop(tid))
            if doc.get("additionalComment"):
                self.comments[key].append({"id": str(next(self._ids)), "body": doc["additionalComment"]["body"],
                                           "public": True, "author": {"accountId": self.ME},
                                           "created": {"iso8601": self._at()}})
            return Reply(201, {"attachments": {"values": [{"filename": n} for n, _ in self.attachments[key]]}})
        if sub == "/attachment" and method == "GET":
            return Reply(200, {"values": [{"filename": n, "size": len(b)} for n, b in self.attachments[key]]})
        if sub == "/comment" and method == "POST":
            doc = json.loads(body)
            comment = {"id": str(next(self._ids)), "body": doc["body"], "public": doc.get("public", True),
                       "author": {"accountId": self.ME, "displayName": "Fabric Oncall"},
                       "created": {"iso8601": self._at()}}
            self.comments[key].append(comment)
            return Reply(201, comment)
        if sub == "/comment" and method == "GET":
            return Reply(200, {"values": list(self.comments[key]), "isLastPage": True})
        if sub == "/transition" and method == "GET":
            if r["category"] == "DONE":
                return Reply(200, {"values": [{"id": "781", "name": "Reopen issue"}]})
            return Reply(200, {"values": [{"id": "851", "name": "Pending"},
                                          {"id": "761", "name": "Resolve this issue"}]})
        if sub == "/transition" and method == "POST":
            doc = json.loads(body)
            new = {"761": ("Resolved", "DONE"), "781": ("Waiting for support", "INDETERMINATE"),
                   "851": ("Pending", "INDETERMINATE")}.get(doc["id"])
            if new is None:
                return Reply(400, {"errorMessage": "no such transition"})
            r["status"], r["category"] = new
            if doc.get("additionalComment"):
                self.comments[key].append({"id": str(next(self._ids)), "body": doc["additionalComment"]["body"],
                                           "public": True, "author": {"accountId": self.ME},
                                           "created": {"iso8601": self._at()}})
            return Reply(204)
        return Reply(405, {"errorMessage": f"{method} {path} not allowed"})


class FakeZendesk(FakeDesk):
    ME, AGENT = 9001, 7007

    def __init__(self, upload_limit: int = 50 * 1000 * 1000) -> None:
        super().__init__()
        self.upload_limit = upload_limit
        self.tickets: dict[int, dict[str, Any]] = {}
        self.uploads: dict[str, list[tuple[str, bytes]]] = {}
        self.idempotency: dict[str, int] = {}
        self.idempotency_lookups: list[str] = []
        self.honours_idempotency = True  # False: the key is dropped on the way (a proxy, an expired key)
        self._ids = itertools.count(101)
        self._tokens = itertools.count(1)

    def authorized(self, header: str | None) -> bool:
        return _basic(header) == f"{ZENDESK_EMAIL}/token:{ZENDESK_TOKEN}"

    def agent_comment(self, ticket_id: int, body: str, at: str) -> None:
        self.tickets[ticket_id]["comments"].append({"id": next(self._ids), "author_id": self.AGENT, "body": body,
                                                    "public": True, "created_at": at, "attachments": []})

    def _comment(self, ticket: dict[str, Any], comment: dict[str, Any], at: str) -> None:
        files = [f for token in comment.get("uploads", []) for f in self.uploads.pop(token)]
        ticket["comments"].append({"id": next(self._ids), "author_id": self.ME, "body": comment["body"],
                                   "public": comment.get("public", True), "created_at": at,
                                   "attachments": [{"file_name": n, "size": len(b)} for n, b in files]})
        ticket["files"].extend(files)

    def _public(self, ticket: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in ticket.items() if k not in ("comments", "files")}

    def route(self, method, path, query, headers, body) -> Reply:
        if (method, path) == ("GET", "/api/v2/users/me"):
            return Reply(200, {"user": {"id": self.ME, "email": ZENDESK_EMAIL, "role": "agent"}})
        if (method, path) == ("POST", "/api/v2/uploads"):
            if len(body) > self.upload_limit:
                return Reply(413, {"error": "RecordInvalid", "description": "File is too large"})
            token = query.get("token", [None])[0] or f"tok{next(self._tokens)}"
            self.uploads.setdefault(token, []).append((query["filename"][0], body))
            return Reply(201, {"upload": {"token": token, "attachment": {"file_name": query["filename"][0]}}})
        if (method, path) == ("POST", "/api/v2/tickets"):
            key = headers.get("Idempotency-Key") if self.honours_idempotency else None
            if key in self.idempotency:
                self.idempotency_lookups.append("hit")
                return Reply(201, {"ticket": self._public(self.tickets[self.idempotency[key]])},
                             {"x-idempotency-lookup": "hit"})
            doc = json.loads(body)["ticket"]
            tid = next(self._ids)
            ticket = {"id": tid, "subject": doc["subject"], "status": "new", "priority": doc.get("priority"),
                      "external_id": doc.get("external_id"), "tags": doc.get("tags", []), "requester_id": self.ME,
                      "comments": [], "files": []}
            self._comment(ticket, doc["comment"], "2026-12-01T10:00:00Z")
            self.tickets[tid] = ticket
            if key:
                self.idempotency[key] = tid
                self.idempotency_lookups.append("miss")
            return Reply(201, {"ticket": self._public(ticket)}, {"x-idempotency-lookup": "miss"})
        if (method, path) == ("GET", "/api/v2/tickets"):
            ext = query.get("external_id", [None])[0]
            return Reply(200, {"tickets": [self._public(t) for t in self.tickets.values() if t["external_id"] == ext]})
        m = re.fullmatch(r"/api/v2/tickets/(\d+)(/comments)?", path)
        if not m or int(m.group(1)) not in self.tickets:
            return Reply(404, {"error": "RecordNotFound", "description": "Not found"})
        ticket = self.tickets[int(m.group(1))]
        if m.group(2) and method == "GET":
            return Reply(200, {"comments": list(ticket["comments"])})
        if method == "GET":
            return Reply(200, {"ticket": self._public(ticket)})
        if method == "PUT":
            doc = json.loads(body)["ticket"]
            if "comment" in doc:
                self._comment(ticket, doc["comment"], "2026-12-01T10:00:05Z")
            if "status" in doc:
                ticket["status"] = doc["status"]
            return Reply(200, {"ticket": self._public(ticket)})
        return Reply(405, {"error": "MethodNotAllowed"})


# -- the wire check of the gate tests (issue 14), shared by every provider's and desk's test_*_gate.py -----------
# Fresh random secrets are planted in each place a provider sends text from; what its fake received is then read
# as bytes. Each place also carries a canary, so that a place whose text never reached the wire cannot pass.

_ALNUM = string.ascii_letters + string.digits
_B64 = _ALNUM + "+/"


@dataclass(frozen=True)
class Planted:
    """One place's text: a canary (the proof that it was sent) and the lines that carry its secrets."""

    place: str
    canary: str
    lines: tuple[str, ...]
    secrets: tuple[tuple[str, str], ...]  # (kind, value); a private key gives one value per body line

    @property
    def text(self) -> str:
        return "\n".join((self.canary, *self.lines)) + "\n"

    @property
    def line(self) -> str:
        """The text on one line (a title)."""
        return " ".join((self.canary, *self.lines))

    def summaries(self) -> list[str]:
        """Finding summaries: the canary, then one secret each (a key block whole, as a log excerpt is)."""
        lines = list(self.lines)
        begin = next((k for k, line in enumerate(lines) if line.startswith("-----BEGIN")), None)
        if begin is None:
            return [self.canary, *lines]
        end = next(k for k, line in enumerate(lines) if line.startswith("-----END"))
        return [self.canary, *lines[:begin], "\n".join(lines[begin:end + 1]), *lines[end + 1:]]


def _word(rng: random.Random, n: int, alphabet: str = _ALNUM) -> str:
    while True:  # mixed case, and digits where the alphabet has them: never a word or a number
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isupper() for c in value) and any(c.islower() for c in value) and (
                any(c.isdigit() for c in value) or not any(c.isdigit() for c in alphabet)):
            return value


def plant(rng: random.Random, place: str, *, one_line: bool = False) -> Planted:
    """Secrets of kinds fabricase always redacts, fresh from `rng`: an AWS secret key, PGPASSWORD, an RSA private
    key, GitHub, Hugging Face and OpenAI tokens. `one_line` (a title, which desks cap at 255 characters): three
    of them, on one line."""
    aws, pg = _word(rng, 40, _B64), _word(rng, 20)
    ghp, hf = "ghp_" + _word(rng, 36), "hf_" + _word(rng, 34, string.ascii_letters)
    openai = "sk-proj-" + _word(rng, 48, _ALNUM + "_-")
    pem = [_word(rng, 64, _B64) for _ in range(3)]
    canary = f"canary-{place}-{_word(rng, 8)}"
    if one_line:
        return Planted(place, canary, (f"aws_secret_access_key = {aws} token {ghp} key {openai}",),
                       (("aws-secret-access-key", aws), ("github-token", ghp), ("openai-api-key", openai)))
    lines = (f"aws_secret_access_key = {aws}", f"PGPASSWORD={pg} psql -h db.internal",
             "-----BEGIN RSA PRIVATE KEY-----", *pem, "-----END RSA PRIVATE KEY-----",
             f"git clone https://github.com/x/y with {ghp}", f"pulled the weights with {hf}",
             f"client = OpenAI(api_key='{openai}')")
    secrets = (("aws-secret-access-key", aws), ("password", pg), *(("private-key", p) for p in pem),
               ("github-token", ghp), ("huggingface-token", hf), ("openai-api-key", openai))
    return Planted(place, canary, lines, secrets)


def plant_all(seed: int, places: tuple[str, ...]) -> dict[str, Planted]:
    """A Planted for each place; the title's on one line."""
    rng = random.Random(seed)
    return {place: plant(rng, place, one_line=place == "title") for place in places}


def _strings(doc: Any) -> Iterator[str]:
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for value in doc.values():
            yield from _strings(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _strings(value)


def wire_views(request: bytes) -> list[bytes]:
    """A request as it arrived (`METHOD target`, a newline, the body), percent-decoded (query strings, form
    bodies), and each string of a JSON body as it is and read as base64 (attachment data in JSON)."""
    views = [request, unquote_to_bytes(request.replace(b"+", b" "))]
    try:
        doc = json.loads(request.partition(b"\n")[2])
    except ValueError:
        return views
    for s in _strings(doc):
        views.append(s.encode())
        with contextlib.suppress(binascii.Error, ValueError):  # most strings are not base64
            views.append(base64.b64decode(s, validate=True))
    return views


def leaks(wire: list[bytes], planted: dict[str, Planted]) -> list[str]:
    """'place: kind in request k' for each planted secret found in a request, in any of its views."""
    views = [(k, wire_views(r)) for k, r in enumerate(wire)]
    return [f"{p.place}: {kind} in request {k}" for p in planted.values() for kind, value in p.secrets
            for k, vs in views if any(value.encode() in v for v in vs)]


def unsent(wire: list[bytes], planted: dict[str, Planted]) -> list[str]:
    """The places whose canary is in no request: their text never reached the wire."""
    views = [v for r in wire for v in wire_views(r)]
    return [p.place for p in planted.values() if not any(p.canary.encode() in v for v in views)]


def redacted(wire: list[bytes]) -> bool:
    return any(b"[REDACTED:" in v for r in wire for v in wire_views(r))


def assert_wire(wire: list[bytes], planted: dict[str, Planted], *, gated: bool) -> None:
    """Gated: every place was sent, no secret is on the wire and redaction markers are. Not gated (the gate made
    the identity): every place leaks, which proves that the check can fail and leaves no place out."""
    # (messages spelled out: assertions in this module are not rewritten by pytest)
    missing = unsent(wire, planted)
    assert missing == [], f"never sent: {missing}"
    found = leaks(wire, planted)
    if gated:
        assert found == [], f"{len(found)} secrets on the wire: {found}"
        assert redacted(wire), "no [REDACTED: marker on the wire"
    else:
        silent = sorted(set(planted) - {leak.split(":")[0] for leak in found})
        assert silent == [], f"with the gate bypassed these places showed no leak: {silent}"
