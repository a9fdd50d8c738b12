"""A Kubernetes API server stand-in on 127.0.0.1, for the real `kubernetes` client (stdlib only).

What it serves, as the real kube-apiserver does for these paths (JSON, `Status` objects for errors):

- `GET /api/v1/nodes` (labelSelector: `k=v`, `k!=v`, `k` terms joined by ","), `GET /api/v1/nodes/NAME`;
- `GET /api/v1/namespaces/NS/pods` (labelSelector, fieldSelector `spec.nodeName=N`), `GET/DELETE .../pods/P`,
  `POST .../pods` (a created pod is Pending on its first read, Running after: the client has to wait);
- discovery (`/api`, `/api/v1`, `/apis`, `/apis/G/V`, legacy form) for kubectl, and 404 for any object
  it does not hold (what `kubectl apply --dry-run=client` reads before it says "created (dry run)");
- `GET .../pods/P/exec?command=..&stdin=true&stdout=true&stderr=true&tty=false` with the real websocket
  upgrade (RFC 6455 handshake, masked client frames, ping/pong, close) and the remote-command channel
  protocol: subprotocol v5.channel.k8s.io when offered (else v4.channel.k8s.io; `protocols` forces one),
  every frame's first byte its channel, 0 stdin, 1 stdout, 2 stderr, 3 the final Status JSON
  (`Success`, or `Failure`/`NonZeroExitCode` with the code in details.causes), 255 a v5 channel close.
  It refuses what the API server refuses: no or a wrong bearer token 401, `deny_exec` 403 (RBAC), an
  unknown pod 404, no `command` 400, a request without the upgrade 400. `anonymous_reads` lets GETs
  without a token through (as an API server with anonymous auth and read access for system:anonymous
  would): kubectl never sends a bearer token over plain http, and the manifest check runs kubectl.

What stands in for a node: the exec's argv is turned into a local process by `runner(node, argv)`. The
default, for the namespace lab, replaces the DaemonSet's `nsenter -t 1 -m -u -i -n -p -- sh -s` by
`ip netns exec NODE sh -s`: the node is the lab's network namespace of the same name, so the capture reads
that namespace's interfaces and counters, as nsenter would give it the host's. Tests without the lab pass a
runner that runs the command on this machine.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NSENTER = ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--"]

Runner = Callable[[str, list[str]], list[str]]


def lab_runner(node: str, argv: list[str]) -> list[str]:
    """nsenter into the host's namespaces -> `ip netns exec NODE`: the lab namespace named like the node."""
    rest = argv[len(NSENTER):] if argv[:len(NSENTER)] == NSENTER else argv
    return ["ip", "netns", "exec", node, *rest]


def local_runner(node: str, argv: list[str]) -> list[str]:
    """The command on this machine, without nsenter (no root needed)."""
    return argv[len(NSENTER):] if argv[:len(NSENTER)] == NSENTER else argv


def make_node(name: str, *, ready: bool = True, provider_id: str | None = None, labels: dict | None = None,
              reason: str = "KubeletNotReady") -> dict[str, Any]:
    cond = {"type": "Ready", "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else reason,
            "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status."}
    spec = {"providerID": provider_id} if provider_id else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec, "status": {"conditions": [cond]}}


def make_pod(namespace: str, name: str, node: str | None, labels: dict, phase: str = "Running") -> dict[str, Any]:
    spec = {"nodeName": node, "containers": [{"name": "main", "image": "x"}]} if node else {"containers": []}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec, "status": {"phase": phase}}


@dataclass
class ApiState:
    token: str
    nodes: dict[str, dict] = field(default_factory=dict)
    pods: dict[tuple[str, str], dict] = field(default_factory=dict)
    runner: Runner = lab_runner
    deny_exec: bool = False
    anonymous_reads: bool = False  # GETs without a token pass (kubectl sends no bearer token over plain http)
    protocols: tuple[str, ...] = ("v5.channel.k8s.io", "v4.channel.k8s.io")
    execs: list[dict] = field(default_factory=list)  # what each exec asked for (argv, node, stdin size)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_node(self, node: dict) -> None:
        self.nodes[node["metadata"]["name"]] = node

    def add_pod(self, pod: dict) -> None:
        self.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod


def _matches(labels: dict, selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k.strip().rstrip("=")) != v.strip().lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


# Discovery (legacy, unaggregated form), for `kubectl apply --dry-run=client`: which kinds the server has.
_GROUPS = {"apps/v1": [("daemonsets", "DaemonSet", True)],
           "rbac.authorization.k8s.io/v1": [("roles", "Role", True), ("rolebindings", "RoleBinding", True),
                                            ("clusterroles", "ClusterRole", False),
                                            ("clusterrolebindings", "ClusterRoleBinding", False)]}
_CORE = [("namespaces", "Namespace", False), ("nodes", "Node", False), ("pods", "Pod", True),
         ("serviceaccounts", "ServiceAccount", True)]


def _resources(group_version: str, resources: list[tuple[str, str, bool]]) -> dict:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": [
        {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
        for name, kind, namespaced in resources]}


def discovery(parts: list[str]) -> dict | None:
    """/api, /api/v1, /apis, /apis/GROUP/VERSION: the documents kubectl's discovery reads; None otherwise."""
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if parts == ["api", "v1"]:
        return _resources("v1", _CORE)
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": gv.split("/")[0], "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
             "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]}} for gv in _GROUPS]}
    if len(parts) == 3 and parts[0] == "apis" and f"{parts[1]}/{parts[2]}" in _GROUPS:
        gv = f"{parts[1]}/{parts[2]}"
        return _resources(gv, _GROUPS[gv])
    return None


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet: pytest shows failures, not access logs
        pass

    @property
    def state(self) -> ApiState:
        return self.server.state

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        if self.state.anonymous_reads and self.command == "GET" and "Authorization" not in self.headers:
            return True
        # The scheme's case is not checked, as the API server's bearer authenticator does not (the in-cluster
        # loader sends "bearer <token>", kubeconfigs' tokens go as "Bearer <token>").
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or token != self.state.token:
            self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            return False
        return True

    def _route(self) -> tuple[list[str], dict[str, list[str]]]:
        url = urlparse(self.path)
        return [p for p in url.path.split("/") if p], parse_qs(url.query, keep_blank_values=True)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authorized():
            return
        parts, query = self._route()
        sel = (query.get("labelSelector") or [""])[0]
        fsel = (query.get("fieldSelector") or [""])[0]
        found = discovery(parts)
        if found is not None:
            return self._send(200, found)
        with self.state.lock:
            if parts == ["api", "v1", "nodes"]:
                items = [n for n in self.state.nodes.values() if _matches(n["metadata"].get("labels") or {}, sel)]
                return self._send(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
            if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
                node = self.state.nodes.get(parts[3])
                return self._send(200, node) if node else self._send(404, _status(
                    404, "NotFound", f'nodes "{parts[3]}" not found'))
            if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 5 and parts[4] == "pods":
                ns = parts[3]
                want_node = fsel.split("spec.nodeName=", 1)[1] if "spec.nodeName=" in fsel else None
                items = [p for (pns, _), p in self.state.pods.items() if pns == ns
                         and _matches(p["metadata"].get("labels") or {}, sel)
                         and (want_node is None or p["spec"].get("nodeName") == want_node)]
                return self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
            if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods":
                pod = self.state.pods.get((parts[3], parts[5]))
                if pod is None:
                    return self._send(404, _status(404, "NotFound", f'pods "{parts[5]}" not found'))
                body = json.loads(json.dumps(pod))
                if pod["status"].get("phase") == "Pending":
                    pod["status"]["phase"] = "Running"  # the next read finds it started
                return self._send(200, body)
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 7 and parts[6] == "exec":
            return self._exec(parts[3], parts[5], query)
        self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        parts, _ = self._route()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 5 and parts[4] == "pods":
            body.setdefault("metadata", {})["namespace"] = parts[3]
            body["status"] = {"phase": "Pending"}
            with self.state.lock:
                self.state.add_pod(body)
                self.state.created.append(body["metadata"]["name"])
            return self._send(201, body)
        self._send(405, _status(405, "MethodNotAllowed", "method not allowed"))

    def do_DELETE(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        parts, _ = self._route()
        with self.state.lock:
            pod = self.state.pods.pop((parts[3], parts[5]), None) if len(parts) == 6 else None
            if pod is not None:
                self.state.deleted.append(parts[5])
        if pod is None:
            return self._send(404, _status(404, "NotFound", "pod not found"))
        self._send(200, pod)

    # ---- exec: websocket upgrade and the channel protocol ----

    def _exec(self, ns: str, name: str, query: dict[str, list[str]]) -> None:
        with self.state.lock:
            pod = self.state.pods.get((ns, name))
        if pod is None:
            return self._send(404, _status(404, "NotFound", f'pods "{name}" not found'))
        if self.state.deny_exec:
            return self._send(403, _status(403, "Forbidden", f'pods "{name}" is forbidden: User cannot create '
                                                             f'resource "pods/exec" in namespace "{ns}"'))
        command = query.get("command") or []
        if not command:
            return self._send(400, _status(400, "BadRequest", "you must specify at least 1 command"))
        if "websocket" not in (self.headers.get("Upgrade") or "").lower():
            return self._send(400, _status(400, "BadRequest", "Upgrade request required"))
        offered = [p.strip() for p in (self.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
        proto = next((p for p in self.state.protocols if p in offered), None)
        if proto is None:
            return self._send(400, _status(400, "BadRequest", "no supported remotecommand protocol"))
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.wfile.flush()
        node = pod["spec"].get("nodeName") or ""
        _ExecSession(self.connection, self.state, node, command, proto).run()
        self.close_connection = True


class _ExecSession:
    """One exec: client frames to the process' stdin; its stdout/stderr to frames; the Status at the end."""

    def __init__(self, sock: socket.socket, state: ApiState, node: str, command: list[str], proto: str) -> None:
        self.sock, self.state, self.node, self.command, self.v5 = sock, state, node, command, proto.startswith("v5")
        self.send_lock = threading.Lock()
        self.stdin_bytes = 0

    def _frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode])
        head += bytes([n]) if n < 126 else (bytes([126]) + struct.pack("!H", n) if n < 65536 else
                                              bytes([127]) + struct.pack("!Q", n))
        with self.send_lock, contextlib.suppress(OSError):
            self.sock.sendall(head + payload)

    def _read_exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _read_frame(self) -> tuple[int, bytes]:
        b0, b1 = self._read_exact(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read_exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(8))[0]
        mask = self._read_exact(4) if b1 & 0x80 else b""
        data = self._read_exact(n)
        if mask:
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
        return b0 & 0x0F, data

    def _pump(self, stream: Any, channel: int) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            self._frame(0x2, bytes([channel]) + chunk)

    def run(self) -> None:
        argv = self.state.runner(self.node, list(self.command))
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        pumps = [threading.Thread(target=self._pump, args=(proc.stdout, 1), daemon=True),
                 threading.Thread(target=self._pump, args=(proc.stderr, 2), daemon=True)]
        for t in pumps:
            t.start()
        reader = threading.Thread(target=self._read_client, args=(proc,), daemon=True)
        reader.start()
        rc = proc.wait()
        for t in pumps:
            t.join(5)
        with self.state.lock:
            self.state.execs.append({"node": self.node, "command": self.command, "stdin_bytes": self.stdin_bytes,
                                     "v5": self.v5, "rc": rc})
        status = {"metadata": {}, "status": "Success"} if rc == 0 else {
            "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: exit status {rc}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]}}
        self._frame(0x2, b"\x03" + json.dumps(status).encode())
        self._frame(0x8, struct.pack("!H", 1000))

    def _read_client(self, proc: subprocess.Popen) -> None:
        """Client frames until it closes; a client that goes away ends the process (as the kubelet does)."""
        try:
            while True:
                opcode, data = self._read_frame()
                if opcode == 0x8:
                    break
                if opcode == 0x9:
                    self._frame(0xA, data)
                    continue
                if not data:
                    continue
                if data[0] == 0 and proc.stdin and not proc.stdin.closed:
                    self.stdin_bytes += len(data) - 1
                    try:
                        proc.stdin.write(data[1:])
                        proc.stdin.flush()
                    except OSError:
                        pass
                elif data[0] == 255 and self.v5 and data[1:2] == b"\x00" and proc.stdin:
                    proc.stdin.close()
        except (EOFError, OSError, ValueError):
            pass
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: ApiState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class ApiServer:
    """Start on a free loopback port; `url` for the kubeconfig; `close()` stops it."""

    def __init__(self, state: ApiState) -> None:
        self.state = state
        self.httpd = _Server(state)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_kubeconfig(path: Any, server: str, token: str, *, exec_plugin: bool = False, context: str = "lab",
                     cluster: dict | None = None, user: dict | None = None) -> None:
    """A kubeconfig for the stand-in: a bearer token, or an exec credential plugin that prints it (the path
    aws eks get-token and gke-gcloud-auth-plugin take through the client's own loader). `cluster` and `user`:
    more fields of the cluster and user entries (certificate-authority-data, client-certificate-data ...)."""
    if exec_plugin:
        cred = json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                           "status": {"token": token}})
        entry = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "sh",
                          "args": ["-c", f"printf '%s' '{cred}'"], "interactiveMode": "Never"}}
    else:
        entry = {"token": token}
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": context,
           "clusters": [{"name": "standin", "cluster": {"server": server, **(cluster or {})}}],
           "users": [{"name": "tester", "user": {**entry, **(user or {})}}],
           "contexts": [{"name": context, "context": {"cluster": "standin", "user": "tester"}}]}
    from pathlib import Path

    Path(path).write_text(json.dumps(cfg))
