"""`--via k8s`: capture Kubernetes nodes through the API server, where ssh to a node is not possible.

Each node is entered through the pod of the fabricase DaemonSet on it (deploy/kubernetes/: namespace
`fabricase`, label app.kubernetes.io/name=fabricase-node, hostPID, privileged): the capture script goes on
the exec's stdin to `nsenter -t 1 -m -u -i -n -p -- sh -s`, so it runs in the host's own namespaces and
reads the host's /sys, /proc and tools, exactly as over ssh. The script is sent on stdin, not in argv: it is
tens of KiB and grows with the collectors, and one argv string is limited to 128 KiB on Linux.

With `--k8s-debug-pods`, a node without a DaemonSet pod is entered as `kubectl debug node/N
--profile=sysadmin` does it: a privileged pod pinned to the node (hostPID, hostNetwork, hostIPC, the host's
root at /host read-only), exec, then delete. Off by default: it creates privileged pods, which needs
pods/create and is refused by PodSecurity "baseline"/"restricted" namespaces; the user chooses it.

Every node comes back as a HostRun: a NotReady node or one without a pod is unreachable, a refused exec
(401/403) is auth-failed, a capture past its time limit is timed out, all with a one-line reason.
`node_records()` gives each node's providerID, zone and instance type for the capture's kubernetes.json.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricase.errors import TransportError
from fabricase.k8s.api import KubeApi, KubeConfig, api_error_text, api_status, load_api
from fabricase.k8s.exec import ExecResult, exec_in_pod
from fabricase.k8s.records import write_kubernetes_nodes
from fabricase.k8s.targets import NodeRecord, node_record
from fabricase.models import HostStatus
from fabricase.transports.base import HostRun, Transport
from fabricase.transports.fanout import run_fanout
from fabricase.transports.fds import check_fanout

__all__ = ["DEBUG_IMAGE", "NODE_COMMAND", "POD_LABEL", "K8sTransport", "debug_pod_spec"]

POD_LABEL = "app.kubernetes.io/name=fabricase-node"
NODE_COMMAND = ("nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "sh", "-s")
DEBUG_IMAGE = "docker.io/library/busybox:1.36"  # has sh and nsenter; --k8s-debug-image to use a mirror
MAX_OUTPUT_BYTES = 256 * 1024 * 1024


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def debug_pod_spec(node: str, namespace: str, image: str) -> dict[str, Any]:
    """The pod `kubectl debug node/NODE --profile=sysadmin` creates, made for one capture: pinned to the node
    by nodeName (no scheduler, taints tolerated), the host's namespaces shared, its root at /host read-only."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"fabricase-debug-{node[:40]}-{secrets.token_hex(3)}".lower().replace(".", "-"),
                     "namespace": namespace,
                     "labels": {"app.kubernetes.io/name": "fabricase-debug", "app.kubernetes.io/part-of": "fabricase"}},
        "spec": {
            "nodeName": node, "hostPID": True, "hostNetwork": True, "hostIPC": True, "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "debugger", "image": image, "command": ["sleep", "3600"], "stdin": True,
                            "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": "host-root", "mountPath": "/host", "readOnly": True}]}],
            "volumes": [{"name": "host-root", "hostPath": {"path": "/"}}],
        },
    }


def _pod_phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Unknown"


def _exec_run(host: str, res: ExecResult, timeout_s: float) -> tuple[HostStatus, str | None]:
    if res.timed_out:
        return HostStatus.TIMED_OUT, f"capture did not finish within {timeout_s:g}s"
    if res.truncated:
        return HostStatus.PARTIAL, f"output over {MAX_OUTPUT_BYTES} bytes: cut off"
    if res.rc == 0:
        return HostStatus.OK, None
    if res.rc is None:
        return HostStatus.FAILED, f"exec ended without an exit status: {res.status_message or 'connection lost'}"
    last = next((ln.strip() for ln in reversed(res.stderr.decode("utf-8", "replace").splitlines()) if ln.strip()),
                "")
    return HostStatus.FAILED, f"capture script exited {res.rc}" + (f": {last[:200]}" if last else "")


class K8sTransport(Transport):
    name = "k8s"

    def __init__(self, config: KubeConfig | None = None, fanout: int = 64, deadline_s: float | None = None,
                 debug_pods: bool = False, debug_image: str = DEBUG_IMAGE,
                 max_output_bytes: int = MAX_OUTPUT_BYTES, command: Sequence[str] = NODE_COMMAND) -> None:
        if fanout < 1:
            raise TransportError(f"fanout must be 1 or more (got {fanout})", where="--fanout")
        check_fanout(fanout, per_host=2)  # one exec websocket per host, and the API connections beside it
        self.config = config or KubeConfig()
        self.fanout, self.deadline_s = fanout, deadline_s
        self.debug_pods, self.debug_image = debug_pods, debug_image
        self.max_output_bytes = max_output_bytes
        self.command = list(command)
        self._records: dict[str, NodeRecord] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_options(cls, *, fanout: int = 64, deadline_s: float | None = None, kubeconfig: str | None = None,
                     k8s_context: str | None = None, k8s_namespace: str | None = None, k8s_debug_pods: bool = False,
                     k8s_debug_image: str | None = None, **_other: Any) -> K8sTransport:
        """From CollectOptions / the CLI: --kubeconfig, --context, --k8s-namespace, --k8s-debug-pods."""
        cfg = KubeConfig(kubeconfig=kubeconfig, context=k8s_context, namespace=k8s_namespace or "fabricase")
        return cls(cfg, fanout=fanout, deadline_s=deadline_s, debug_pods=k8s_debug_pods,
                   debug_image=k8s_debug_image or DEBUG_IMAGE)

    def node_records(self) -> list[dict[str, Any]]:
        """Each captured node's providerID, zone and instance type (and readiness), by node name: what
        collect writes to the capture's kubernetes.json so that locate works without DMI."""
        with self._lock:
            return [self._records[n].to_dict() for n in sorted(self._records)]

    def record_extras(self, root: Path) -> None:
        """kubernetes.json: node_records(), read back by locate (fabricase.k8s.records)."""
        write_kubernetes_nodes(root, self.node_records())

    def run(self, hosts: list[str], script: str, *, timeout_s: float,
            on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
        api = load_api(self.config)
        nodes, pods = self._survey(api)
        data = script.encode()

        def run_one(host: str, deadline: float) -> HostRun:
            started = _now()
            status, reason, res = self._capture(api, host, nodes.get(host), pods.get(host), data, timeout_s,
                                                min(deadline, time.monotonic() + timeout_s))
            return HostRun(host, status, res.stdout if res else b"", res.stderr if res else b"",
                           res.rc if res else None, reason, started, _now())

        return run_fanout(hosts, run_one, fanout=self.fanout, deadline_s=self.deadline_s, on_done=on_done)

    def _survey(self, api: KubeApi) -> tuple[dict[str, dict], dict[str, dict]]:
        """All nodes and the DaemonSet's pods, each in one list call (not one call per node)."""
        ns = self.config.namespace
        try:
            nodes = {n["metadata"]["name"]: n for n in api.list_nodes()}
            pods: dict[str, dict] = {}
            for pod in api.list_pods(ns, label_selector=POD_LABEL):
                node = (pod.get("spec") or {}).get("nodeName")
                if node and (node not in pods or _pod_phase(pod) == "Running"):
                    pods[node] = pod
        except Exception as exc:
            raise TransportError(f"cannot list nodes and the fabricase-node pods in namespace {ns}: "
                                 f"{api_error_text(exc)}",
                                 where=api.where) from exc
        return nodes, pods

    def _capture(self, api: KubeApi, host: str, node: dict | None, pod: dict | None, script: bytes,
                 timeout_s: float, deadline: float) -> tuple[HostStatus, str | None, ExecResult | None]:
        if node is None:
            return HostStatus.UNREACHABLE, f"no node named {host} in the cluster ({api.where})", None
        record = node_record(node)
        with self._lock:
            self._records[host] = record
        if not record.ready:
            return HostStatus.UNREACHABLE, record.not_ready_reason, None
        ns = self.config.namespace
        if pod is None and not self.debug_pods:
            return HostStatus.UNREACHABLE, (f"no fabricase-node pod on node {host} (namespace {ns}): apply "
                                            "deploy/kubernetes/ or pass --k8s-debug-pods"), None
        if pod is not None:
            if _pod_phase(pod) != "Running":
                name = pod["metadata"]["name"]
                return HostStatus.UNREACHABLE, f"pod {ns}/{name} on {host} is {_pod_phase(pod)}, not Running", None
            return self._exec(api, pod["metadata"]["name"], host, self.command, script, timeout_s, deadline)
        return self._debug_capture(api, host, script, timeout_s, deadline)

    def _exec(self, api: KubeApi, pod: str, host: str, command: list[str], script: bytes, timeout_s: float,
              deadline: float) -> tuple[HostStatus, str | None, ExecResult | None]:
        ns = self.config.namespace
        try:
            res = exec_in_pod(api.configuration, ns, pod, command, script, deadline=deadline,
                              max_output_bytes=self.max_output_bytes)
        except Exception as exc:
            status = api_status(exc)
            if status in (401, 403):
                return HostStatus.AUTH_FAILED, (f"exec refused by the API server: HTTP {status} (needs create on "
                                                f"pods/exec in namespace {ns})"), None
            if status == 404:
                return HostStatus.UNREACHABLE, f"exec: pod {ns}/{pod} on {host} not found (HTTP 404)", None
            return HostStatus.UNREACHABLE, f"exec into {ns}/{pod} failed: {api_error_text(exc)}", None
        status_, reason = _exec_run(host, res, timeout_s)
        return status_, reason, res

    def _debug_capture(self, api: KubeApi, host: str, script: bytes, timeout_s: float,
                       deadline: float) -> tuple[HostStatus, str | None, ExecResult | None]:
        """kubectl debug node/HOST --profile=sysadmin, for one capture: create, wait Running, exec, delete."""
        ns = self.config.namespace
        spec = debug_pod_spec(host, ns, self.debug_image)
        name = spec["metadata"]["name"]
        try:
            api.create_pod(ns, spec)
        except Exception as exc:
            status = api_status(exc)
            kind = HostStatus.AUTH_FAILED if status in (401, 403) else HostStatus.UNREACHABLE
            return kind, f"cannot create debug pod on {host}: HTTP {status or type(exc).__name__}", None
        try:
            while True:
                phase = _pod_phase(api.read_pod(ns, name))
                if phase == "Running":
                    break
                if phase in ("Failed", "Succeeded"):
                    return HostStatus.UNREACHABLE, f"debug pod {ns}/{name} on {host} ended ({phase})", None
                if time.monotonic() >= deadline:
                    return HostStatus.TIMED_OUT, f"debug pod {ns}/{name} on {host} not Running in time", None
                time.sleep(0.2)
            command = ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "sh", "-s"]
            return self._exec(api, name, host, command, script, timeout_s, deadline)
        except Exception as exc:
            return HostStatus.UNREACHABLE, f"debug pod {ns}/{name}: {api_error_text(exc)}", None
        finally:
            # Best effort: a pod left behind sleeps out its hour and carries the fabricase-debug label.
            with contextlib.suppress(Exception):
                api.delete_pod(ns, name)
