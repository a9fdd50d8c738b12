"""Fixtures for the k8s transport: the API server stand-in (standin.py, documented there and in
docs/kubernetes.md) and a kubeconfig that points the real `kubernetes` client at it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .standin import ApiServer, ApiState, local_runner, make_node, make_pod, write_kubeconfig

DS_LABELS = {"app.kubernetes.io/name": "fabricase-node"}


@dataclass
class Cluster:
    server: ApiServer
    state: ApiState
    kubeconfig: Path

    def add_node(self, name: str, *, pod: bool = True, ready: bool = True, phase: str = "Running",
                 provider_id: str | None = None, labels: dict | None = None) -> None:
        self.state.add_node(make_node(name, ready=ready, provider_id=provider_id, labels=labels))
        if pod:
            self.state.add_pod(make_pod("fabricase", f"fabricase-node-{name}", name, DS_LABELS, phase))


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """An empty cluster on loopback (a random token per test); KUBECONFIG points at it."""
    state = ApiState(token=secrets.token_urlsafe(24), runner=local_runner)
    server = ApiServer(state)
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, server.url, state.token)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    try:
        yield Cluster(server, state, kubeconfig)
    finally:
        server.close()


@pytest.fixture(scope="module")
def lab():
    """The ssh lab's namespaces (tests/lab/conftest.py), set up by its own code: its `lab` fixture's body,
    module-scoped here so that the lab's lock is free again for tests/lab when this module is done."""
    from lab import conftest as lab_conftest  # tests/ is on pythonpath (pyproject.toml)

    yield from lab_conftest.lab.__wrapped__()


def collect_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kubeconfig: Path | None) -> tuple[int, dict, str]:
    """`fabricase collect --k8s-nodes pool=train --json` (the netdev collector) with KUBECONFIG at `kubeconfig`
    (None: unset, for the in-cluster path): the exit code, the JSON document (empty if none) and stderr."""
    import json

    from click.testing import CliRunner

    from fabricase.cli import cli

    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    if kubeconfig is None:
        monkeypatch.delenv("KUBECONFIG", raising=False)
    else:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    result = CliRunner().invoke(cli, ["collect", "--k8s-nodes", "pool=train", "--interval", "0", "--collector",
                                      "netdev", "--timeout", "30", "-o", str(tmp_path / "capture"), "--json"],
                                catch_exceptions=False)
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, doc, result.stderr
