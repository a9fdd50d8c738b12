"""The Kubernetes API, through the official `kubernetes` client and the user's own kubeconfig.

The client's own loader is used on purpose (as the ssh transport uses the system ssh and ~/.ssh/config):
KUBECONFIG (several files joined with ":"), ~/.kube/config, --kubeconfig and --context resolve as kubectl
resolves them, and exec/auth-provider plugins (aws eks get-token, gke-gcloud-auth-plugin, kubelogin) run as
they do for kubectl. Inside a pod (KUBERNETES_SERVICE_HOST set, no kubeconfig given) the service account
is used. Objects are read as plain JSON (`_preload_content=False`), so the code does not depend on which
generation of the client's model classes is installed.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from dataclasses import dataclass
from typing import Any

from fabricase.errors import TransportError
from fabricase.trace import debug

__all__ = ["INSTALL_HINT", "KubeApi", "KubeConfig", "api_error_text", "api_status", "load_api"]

INSTALL_HINT = "pip install 'fabricase[k8s]'"


@dataclass(frozen=True)
class KubeConfig:
    """Where the user's cluster is: --kubeconfig / --context, and the DaemonSet's namespace."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = "fabricase"
    request_timeout_s: float = 30


def _kubernetes() -> Any:
    try:
        import kubernetes
        from kubernetes import client, config
        from kubernetes.stream.ws_client import WSClient
    except ImportError as exc:
        raise TransportError(f"the k8s transport needs the kubernetes client: {INSTALL_HINT}") from exc
    import inspect

    if "binary" not in inspect.signature(WSClient.__init__).parameters:  # before 30.1 exec output is decoded text
        raise TransportError(f"kubernetes client {getattr(kubernetes, '__version__', '?')} cannot exec binary-safe; "
                             f"30.1 or later is needed: {INSTALL_HINT}")
    return client, config


def api_status(exc: BaseException) -> int | None:
    """The HTTP status an ApiException (or a refused websocket upgrade, which the client reports as status 0
    with "Handshake status 403 ..." in its reason) carries; None when there was no HTTP answer."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        return status
    m = re.search(r"Handshake status (\d{3})", str(getattr(exc, "reason", "") or exc))
    return int(m.group(1)) if m else None


def _causes(exc: BaseException, limit: int = 12) -> list[BaseException]:
    """exc and what it wraps, nearest first: a cause or context, urllib3's MaxRetryError.reason, an exception
    among the args (urllib3's SSLError holds the ssl module's error there); at most `limit`, no cycles."""
    out: list[BaseException] = []
    todo = [exc]
    while todo and len(out) < limit:
        e = todo.pop(0)
        if any(e is seen for seen in out):
            continue
        out.append(e)
        wrapped = [getattr(e, "reason", None), e.__cause__, e.__context__, *getattr(e, "args", ())]
        todo += [w for w in wrapped if isinstance(w, BaseException)]
    return out


def api_error_text(exc: BaseException) -> str:
    """What went wrong with an API call, in words a user can act on: the HTTP status when the server answered;
    else the TLS or connection failure found inside the client's wrappers (urllib3 nests it two deep, under
    "Max retries exceeded"), else the exception's own text."""
    status = api_status(exc)
    if status:
        return f"HTTP {status}"
    causes = _causes(exc)
    for e in causes:
        if isinstance(e, ssl.SSLCertVerificationError):
            why = getattr(e, "verify_message", None) or str(e)
            return (f"TLS: the API server's certificate does not verify against the kubeconfig's certificate "
                    f"authority ({why})")
    # A server that wants a client certificate (TLS 1.3) refuses after the client's side of the handshake is
    # done: the client reads the alert, or, as the race goes, an EOF or a reset. All three say the same here.
    refused = "the kubeconfig's user gives no client certificate, or one the server does not accept"
    for e in causes:
        if isinstance(e, ssl.SSLEOFError) or (isinstance(e, ssl.SSLError) and "EOF occurred" in str(e)):
            return f"TLS: the API server closed the connection in the handshake; {refused} ({e})"[:300]
    for e in causes:
        if isinstance(e, ssl.SSLError):
            why = str(getattr(e, "reason", None) or e)
            if "CERTIFICATE_REQUIRED" in why.upper():
                return ("TLS: the API server wants a client certificate and the kubeconfig's user gives none "
                        f"({why})")
            hint = "; it may refuse the kubeconfig's client certificate" if "CERTIFICATE" in why.upper() else ""
            return f"TLS handshake with the API server failed ({why}{hint})"
    for e in causes:
        if isinstance(e, ConnectionRefusedError):
            return "connection refused: is the API server's address in the kubeconfig right?"
        if isinstance(e, ConnectionResetError):
            return f"the API server reset the connection (over TLS: {refused})"
        if isinstance(e, TimeoutError):
            return "the API server did not answer in time"
    return f"{type(exc).__name__}: {str(exc)[:160]}"


@dataclass
class KubeApi:
    """A loaded client: its configuration (each exec's websocket takes host, CA, certs and token from it, see
    exec.py) and a CoreV1Api for the reads."""

    configuration: Any
    core: Any
    where: str  # the kubeconfig context (or "in-cluster"), named in errors
    request_timeout_s: float = 30

    def _json(self, method: Any, *args: Any, **kw: Any) -> dict[str, Any]:
        resp = method(*args, **kw, _preload_content=False, _request_timeout=self.request_timeout_s)
        data = getattr(resp, "data", None)
        if data is None and hasattr(resp, "read"):
            data = resp.read()
        return json.loads(data or b"{}")

    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        """Nodes as JSON dicts; an HTTP error raises the client's ApiException (the caller says what it means)."""
        kw = {"label_selector": label_selector} if label_selector else {}
        return self._json(self.core.list_node, **kw).get("items") or []

    def read_node(self, name: str) -> dict[str, Any]:
        return self._json(self.core.read_node, name)

    def list_pods(self, namespace: str, label_selector: str | None = None,
                  field_selector: str | None = None) -> list[dict[str, Any]]:
        kw = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
        return self._json(self.core.list_namespaced_pod, namespace, **kw).get("items") or []

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(self.core.read_namespaced_pod, name, namespace)

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json(self.core.create_namespaced_pod, namespace, body)

    def delete_pod(self, namespace: str, name: str) -> None:
        self._json(self.core.delete_namespaced_pod, name, namespace, grace_period_seconds=0)


def load_api(cfg: KubeConfig) -> KubeApi:
    """The client for the user's cluster: in-cluster service account when KUBERNETES_SERVICE_HOST is set and
    no kubeconfig was named, else the kubeconfig (--kubeconfig, else KUBECONFIG, else ~/.kube/config)."""
    client, config = _kubernetes()
    configuration = client.Configuration()
    named = cfg.kubeconfig or os.environ.get("KUBECONFIG")
    try:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not named and not cfg.context:
            config.load_incluster_config(client_configuration=configuration)
            where = "in-cluster"
        else:
            path = named or os.path.expanduser("~/.kube/config")
            # The client reads KUBECONFIG once, when imported; the file is named here, at call time.
            config.load_kube_config(config_file=path, context=cfg.context, client_configuration=configuration,
                                    persist_config=False)
            where = f"context {cfg.context}" if cfg.context else f"kubeconfig {path}"
    except Exception as exc:  # the loader raises ConfigException, FileNotFoundError, yaml errors ...
        raise TransportError(f"cannot load the Kubernetes config: {type(exc).__name__}: {str(exc)[:200]}",
                             where=cfg.kubeconfig or cfg.context or "kubeconfig") from exc
    if not configuration.verify_ssl:
        _unverified(where)
    api_client = client.ApiClient(configuration=configuration)
    return KubeApi(configuration, client.CoreV1Api(api_client), where, cfg.request_timeout_s)


def _unverified(where: str) -> None:
    """The kubeconfig says insecure-skip-tls-verify: as kubectl, go on, without urllib3's multi-line warning on
    the terminal; the --debug trace says it where the client is made."""
    import warnings

    from urllib3.exceptions import InsecureRequestWarning

    warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    debug("k8s: the API server's certificate is not verified (insecure-skip-tls-verify, %s)", where)
