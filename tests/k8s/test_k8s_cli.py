"""`fabricase collect --k8s-nodes/--k8s-job/--hosts --via k8s` through the CLI, the real client and the stand-in
(exec runs on this machine here; test_k8s_lab.py runs it in the lab's namespaces)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase.cli import cli
from fabricase.cli.app import EXIT_PARTIAL
from fabricase.k8s.records import read_kubernetes_nodes, write_kubernetes_nodes
from fabricase.providers.identity import cloud_of, with_kubernetes_node

from .conftest import Cluster
from .standin import make_pod


def _collect(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict, str]:
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    out = tmp_path / "capture"
    result = CliRunner().invoke(cli, ["collect", *args, "--interval", "0", "--collector", "netdev", "--timeout",
                                      "30", "-o", str(out), "--json"], catch_exceptions=False)
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, doc, result.stderr


def test_collect_by_label_selector(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.add_node("gpu-1", labels={"pool": "train"})
    cluster.add_node("gpu-2", labels={"pool": "train"}, ready=False)
    cluster.add_node("cpu-1", labels={"pool": "system"})
    code, doc, err = _collect(["--k8s-nodes", "pool=train"], tmp_path, monkeypatch)
    assert code == EXIT_PARTIAL, err
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert set(hosts) == {"gpu-1", "gpu-2"}
    assert hosts["gpu-1"]["status"] == "ok" and hosts["gpu-1"]["items"] > 0
    assert hosts["gpu-2"]["status"] == "unreachable" and "NotReady" in hosts["gpu-2"]["reason"]
    host_json = json.loads((tmp_path / "capture" / "hosts" / "gpu-1" / "host.json").read_text())
    assert host_json["transport"] == "k8s"
    capture_json = json.loads((tmp_path / "capture" / "capture.json").read_text())
    assert capture_json["targets"]["k8s"] == {"selector": "pool=train"}
    assert capture_json["targets"]["via"] == "k8s"


def test_collect_a_job_with_kubeconfig_and_context(cluster: Cluster, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from .standin import write_kubeconfig

    other = tmp_path / "ctx-kubeconfig"
    write_kubeconfig(other, cluster.server.url, cluster.state.token, context="train")
    monkeypatch.delenv("KUBECONFIG")
    cluster.add_node("gpu-1")
    cluster.state.add_pod(make_pod("ml", "llama-0", "gpu-1", {"jobset.sigs.k8s.io/jobset-name": "llama"}))
    code, doc, err = _collect(["--k8s-job", "ml/JobSet/llama", "--kubeconfig", str(other), "--context", "train"],
                              tmp_path, monkeypatch)
    assert code == 0, err
    assert [(h["host"], h["status"]) for h in doc["hosts"]] == [("gpu-1", "ok")]


def test_hosts_via_k8s_and_a_conflicting_via(cluster: Cluster, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.add_node("gpu-1")
    cluster.add_node("gpu-2")
    code, doc, err = _collect(["--hosts", "gpu-[1-2]", "--via", "k8s"], tmp_path, monkeypatch)
    assert code == 0, err
    assert sorted(h["host"] for h in doc["hosts"]) == ["gpu-1", "gpu-2"]
    code, _, err = _collect(["--k8s-nodes", "a=b", "--via", "ssh"], tmp_path / "x", monkeypatch)
    assert code == 1 and "drop --via ssh" in err


def test_kubernetes_json_round_trip_gives_locate_its_ids(tmp_path: Path) -> None:
    """What collect writes from node_records() and host summaries read back (see docs/kubernetes.md)."""
    records = [{"node": "gke-b", "provider_id": "gce://proj/us-central1-a/gke-b", "zone": "us-central1-a",
                "instance_type": "a3-highgpu-8g", "ready": True},
               {"node": "ip-a", "provider_id": "aws:///us-east-1a/i-0123456789abcdef0", "zone": "us-east-1a",
                "instance_type": "p5.48xlarge", "ready": True}]
    path = write_kubernetes_nodes(tmp_path, records)
    assert json.loads(path.read_text())["nodes"][0]["node"] == "gke-b"  # sorted: deterministic bundles
    nodes = read_kubernetes_nodes(tmp_path)
    assert cloud_of(with_kubernetes_node({}, nodes["ip-a"])) == ("aws", "i-0123456789abcdef0")
    assert cloud_of(with_kubernetes_node({}, nodes["gke-b"])) == ("gcp", "gke-b")
    assert read_kubernetes_nodes(tmp_path / "elsewhere") == {}
