"""The other ways a kubeconfig or a pod reaches a cluster's API over TLS, each through the real client and the
TLS front (tls_front.py): insecure-skip-tls-verify (a lab cluster without its CA at hand), an HTTP CONNECT proxy
named by the cluster's proxy-url (a bastion's egress proxy), and the in-cluster service account (the DaemonSet's
own pod or a Job in the cluster: the token and the CA from the pod's mounted secret). Reads and the exec
websocket take the same way."""

from __future__ import annotations

import contextlib
import socket
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Cluster, collect_pool
from .standin import write_kubeconfig
from .tls_front import Pki, TlsFront, make_pki


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


@pytest.fixture
def front(cluster: Cluster, pki: Pki, tmp_path: Path) -> Iterator[TlsFront]:
    tls = TlsFront(cluster.server.url, pki, tmp_path / "tls")
    try:
        yield tls
    finally:
        tls.close()


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback that tunnels to loopback only, counting the tunnels it opened (the
    `tunnels` list holds each CONNECT's target)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.tunnels: list[str] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(conn,), daemon=True).start()

    def _tunnel(self, conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 16384:
            chunk = conn.recv(4096)
            if not chunk:
                conn.close()
                return
            head += chunk
        method, target = head.split(b" ", 2)[:2]
        host, _, port = target.decode().rpartition(":")
        if method != b"CONNECT" or host != "127.0.0.1":
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        upstream = socket.create_connection((host, int(port)))
        self.tunnels.append(target.decode())
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        threading.Thread(target=self._pump, args=(upstream, conn), daemon=True).start()
        self._pump(conn, upstream)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed = True
        self.listener.close()


def _captured(doc: dict, cluster: Cluster) -> None:
    assert [(h["host"], h["status"]) for h in doc["hosts"]] == [("gpu-1", "ok")]
    assert doc["hosts"][0]["items"] > 0
    assert [e["node"] for e in cluster.state.execs] == ["gpu-1"]


def test_insecure_skip_tls_verify_reaches_a_server_without_its_ca(cluster, front, tmp_path, monkeypatch):
    cluster.add_node("gpu-1", labels={"pool": "train"})
    kubeconfig = tmp_path / "kc"
    write_kubeconfig(kubeconfig, front.url, cluster.state.token, cluster={"insecure-skip-tls-verify": True})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, doc, err = collect_pool(tmp_path, monkeypatch, kubeconfig)
    assert code == 0, err
    _captured(doc, cluster)
    assert front.handshakes >= 2  # the reads and the exec websocket, both over TLS
    # As kubectl: no urllib3 InsecureRequestWarning (several lines on the terminal, once per request path).
    assert not [w for w in caught if "Unverified HTTPS request" in str(w.message)]


def test_debug_says_that_the_server_is_not_verified(cluster, front, tmp_path, monkeypatch):
    cluster.add_node("gpu-1", labels={"pool": "train"})
    kubeconfig = tmp_path / "kc"
    write_kubeconfig(kubeconfig, front.url, cluster.state.token, cluster={"insecure-skip-tls-verify": True})
    monkeypatch.setenv("FABRICASE_DEBUG", "1")
    code, _, err = collect_pool(tmp_path, monkeypatch, kubeconfig)
    assert code == 0, err
    assert "k8s: the API server's certificate is not verified (insecure-skip-tls-verify" in err, err


def test_without_the_ca_and_without_skipping_verification_the_server_is_refused(cluster, front, tmp_path,
                                                                              monkeypatch):
    """The control of the test above: the same kubeconfig without insecure-skip-tls-verify is refused."""
    cluster.add_node("gpu-1", labels={"pool": "train"})
    kubeconfig = tmp_path / "kc"
    write_kubeconfig(kubeconfig, front.url, cluster.state.token)
    code, _, err = collect_pool(tmp_path, monkeypatch, kubeconfig)
    assert code != 0 and cluster.state.execs == []
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_the_clusters_proxy_url_carries_the_reads_and_the_exec(cluster, front, pki, tmp_path, monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    cluster.add_node("gpu-1", labels={"pool": "train"})
    proxy = ConnectProxy()
    try:
        kubeconfig = tmp_path / "kc"
        write_kubeconfig(kubeconfig, front.url, cluster.state.token,
                         cluster={"certificate-authority-data": pki.b64(pki.ca_cert), "proxy-url": proxy.url})
        code, doc, err = collect_pool(tmp_path, monkeypatch, kubeconfig)
    finally:
        proxy.close()
    assert code == 0, err
    _captured(doc, cluster)
    port = front.url.rsplit(":", 1)[1]
    assert len(proxy.tunnels) >= 2 and set(proxy.tunnels) == {f"127.0.0.1:{port}"}  # reads and exec alike


def test_in_cluster_the_service_accounts_token_and_ca_are_used(cluster, front, pki, tmp_path, monkeypatch):
    from kubernetes.config import incluster_config

    cluster.add_node("gpu-1", labels={"pool": "train"})
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(cluster.state.token)
    (account / "ca.crt").write_bytes(pki.ca_cert)
    # The pod's mounted secret, where the client reads it (/var/run/secrets/kubernetes.io/serviceaccount/).
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(account / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(account / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", front.url.rsplit(":", 1)[1])
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))  # no ~/.kube/config to fall back on
    code, doc, err = collect_pool(tmp_path, monkeypatch, None)
    assert code == 0, err
    _captured(doc, cluster)
    (account / "ca.crt").write_bytes(make_pki("another-ca").ca_cert)  # a CA that did not sign the server
    cluster.state.execs.clear()
    code, _, err = collect_pool(tmp_path / "again", monkeypatch, None)
    assert code != 0 and cluster.state.execs == [], err
    assert "does not verify against" in err, err
