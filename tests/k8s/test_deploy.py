"""deploy/kubernetes/: kubectl accepts the manifests (client-side dry run against the stand-in's discovery),
and the DaemonSet is what the k8s transport relies on (label, namespace, hostPID, privileged, tolerations)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fabricase.transports.k8s import NODE_COMMAND, POD_LABEL

from .standin import ApiServer, ApiState, write_kubeconfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def _docs() -> list[dict]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _one(kind: str, name: str) -> dict:
    found = [d for d in _docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def test_kubectl_dry_run_accepts_every_manifest(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl must be installed in CI (Debian: kubernetes-client)")
        pytest.skip("kubectl is not installed (Debian: kubernetes-client)")
    state = ApiState(token=secrets.token_urlsafe(24), anonymous_reads=True)
    server = ApiServer(state)
    try:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server.url, state.token)
        proc = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "apply", "--dry-run=client",
                               "--validate=false", "-f", str(DEPLOY)], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "HOME": str(tmp_path)})
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    created = sorted(line.split()[0] for line in proc.stdout.splitlines() if line.endswith("created (dry run)"))
    expected = sorted(f"{d['kind'].lower()}{'.apps' if d['apiVersion'].startswith('apps/') else ''}"
                      f"{'.rbac.authorization.k8s.io' if d['apiVersion'].startswith('rbac') else ''}"
                      f"/{d['metadata']['name']}" for d in _docs())
    assert created == expected


def test_node_daemonset_is_what_the_transport_execs_into() -> None:
    ds = _one("DaemonSet", "fabricase-node")
    assert ds["metadata"]["namespace"] == "fabricase"
    key, _, value = POD_LABEL.partition("=")
    pod = ds["spec"]["template"]
    assert pod["metadata"]["labels"][key] == value
    assert ds["spec"]["selector"]["matchLabels"] == {key: value}
    spec = pod["spec"]
    assert spec["hostPID"] is True and spec["hostNetwork"] is True  # nsenter -t 1 needs the host's PID 1
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    assert container["securityContext"]["privileged"] is True
    assert NODE_COMMAND[0] == "nsenter" and "sleep" in container["command"]
    assert all(m.get("readOnly") for m in container["volumeMounts"])  # the host is only ever read from here
    taints = {t["key"] for t in spec["tolerations"]}
    assert {"nvidia.com/gpu", "amd.com/gpu", "sku"} <= taints


def test_exporter_writes_only_its_textfile_directory() -> None:
    ds = _one("DaemonSet", "fabricase-exporter")
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    assert "fabricase export --self --textfile /host/var/lib/node_exporter/textfile_collector" in \
        container["command"][-1]
    writable = [m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")]
    assert writable == ["/host/var/lib/node_exporter/textfile_collector", "/tmp"]


def test_namespace_allows_privileged_pods_and_rbac_grants_exec() -> None:
    ns = _one("Namespace", "fabricase")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    role = _one("Role", "fabricase-user")
    assert role["metadata"]["namespace"] == "fabricase"
    exec_rule = next(r for r in role["rules"] if "pods/exec" in r["resources"])
    assert "create" in exec_rule["verbs"]  # the websocket exec is authorized as create on pods/exec
    cluster_role = _one("ClusterRole", "fabricase-user")
    nodes_rule = next(r for r in cluster_role["rules"] if "nodes" in r["resources"])
    assert set(nodes_rule["verbs"]) == {"get", "list"}
    assert not any(set(r["verbs"]) - {"get", "list"} for r in cluster_role["rules"])  # read only, cluster-wide
