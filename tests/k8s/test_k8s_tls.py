"""The k8s path over TLS, as every real cluster serves its API: the kubeconfig's certificate-authority-data
verifies the server for the reads and for the exec websocket, a client certificate is presented where the server
requires one, and a server the CA did not sign is refused in one line, with nothing captured from it."""

from __future__ import annotations

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
def front(cluster: Cluster, pki: Pki, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TlsFront]:
    tls = TlsFront(cluster.server.url, pki, tmp_path / "tls", client_ca=getattr(request, "param", False))
    try:
        yield tls
    finally:
        tls.close()


def _kubeconfig(path: Path, cluster: Cluster, front: TlsFront, ca: Pki, client: Pki | None = None) -> Path:
    user = {"client-certificate-data": client.b64(client.client_cert),
            "client-key-data": client.b64(client.client_key)} if client else None
    write_kubeconfig(path, front.url, cluster.state.token, cluster={"certificate-authority-data": ca.b64(ca.ca_cert)},
                     user=user)
    return path


def test_collect_over_tls_verifies_the_server_with_the_kubeconfigs_ca(cluster, front, pki, tmp_path, monkeypatch):
    cluster.add_node("gpu-1", labels={"pool": "train"})
    code, doc, err = collect_pool(tmp_path, monkeypatch, _kubeconfig(tmp_path / "kc", cluster, front, pki))
    assert code == 0, err
    assert [(h["host"], h["status"]) for h in doc["hosts"]] == [("gpu-1", "ok")]
    assert doc["hosts"][0]["items"] > 0
    assert [e["node"] for e in cluster.state.execs] == ["gpu-1"]  # the exec went through the front too
    assert front.handshakes >= 2 and front.refused == 0


@pytest.mark.parametrize("front", [True], indirect=True)
def test_a_client_certificate_from_the_kubeconfig_is_presented_for_reads_and_exec(cluster, front, pki, tmp_path,
                                                                                monkeypatch):
    cluster.add_node("gpu-1", labels={"pool": "train"})
    code, doc, err = collect_pool(tmp_path, monkeypatch, _kubeconfig(tmp_path / "kc", cluster, front, pki, client=pki))
    assert code == 0, err
    assert [(h["host"], h["status"]) for h in doc["hosts"]] == [("gpu-1", "ok")]
    assert len(cluster.state.execs) == 1 and front.refused == 0


@pytest.mark.parametrize("front", [True], indirect=True)
def test_without_the_client_certificate_the_server_refuses_and_collect_says_so(cluster, front, pki, tmp_path,
                                                                             monkeypatch):
    cluster.add_node("gpu-1", labels={"pool": "train"})
    code, doc, err = collect_pool(tmp_path, monkeypatch, _kubeconfig(tmp_path / "kc", cluster, front, pki))
    assert code != 0 and front.refused >= 1, err
    assert cluster.state.execs == []
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    # The alert, or an EOF or a reset in its place (TLS 1.3 refuses after the client's handshake is done):
    # each is worded as the client certificate it is about.
    assert "client certificate" in err, err


def test_a_server_the_ca_did_not_sign_is_refused_in_one_line(cluster, front, pki, tmp_path, monkeypatch):
    cluster.add_node("gpu-1", labels={"pool": "train"})
    other = make_pki("another-ca")
    code, doc, err = collect_pool(tmp_path, monkeypatch, _kubeconfig(tmp_path / "kc", cluster, front, other))
    assert code != 0
    assert cluster.state.execs == []  # nothing ran on a node through an unverified server
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "does not verify against the kubeconfig's certificate authority" in err, err
