"""--k8s-nodes and --k8s-job: which nodes the cluster names, through the real client and the stand-in."""

from __future__ import annotations

import pytest

from fabricase.errors import TargetError
from fabricase.k8s.targets import node_record, nodes_of_pods, parse_job_ref
from fabricase.targets import resolve_targets

from .conftest import Cluster
from .standin import make_pod

GPU = {"nvidia.com/gpu.present": "true"}


def _fleet(cluster: Cluster) -> None:
    for name in ("gpu-b2", "gpu-a1", "gpu-a2"):
        cluster.add_node(name, labels={**GPU, "pool": "train"})
    cluster.add_node("cpu-1", labels={"pool": "system"})


def test_label_selector_lists_the_matching_nodes(cluster: Cluster) -> None:
    _fleet(cluster)
    targets = resolve_targets(None, None, None, k8s_nodes="nvidia.com/gpu.present=true")
    assert targets.hosts == ("gpu-a1", "gpu-a2", "gpu-b2")
    assert targets.k8s == {"selector": "nvidia.com/gpu.present=true"}
    assert targets.describe()["k8s"] == {"selector": "nvidia.com/gpu.present=true"}
    assert resolve_targets(None, None, None, k8s_nodes="pool!=train").hosts == ("cpu-1",)


def test_empty_selection_is_one_clear_error(cluster: Cluster) -> None:
    _fleet(cluster)
    with pytest.raises(TargetError, match="no node matches the label selector 'nvidia.com/gpu.present=false'"):
        resolve_targets(None, None, None, k8s_nodes="nvidia.com/gpu.present=false")
    with pytest.raises(TargetError, match="no running pod of ml/pytorchjob/absent is on a node"):
        resolve_targets(None, None, None, k8s_job="ml/PyTorchJob/absent")


JOBS = [
    ("PyTorchJob", "training.kubeflow.org/job-name"),
    ("MPIJob", "training.kubeflow.org/job-name"),
    ("JobSet", "jobset.sigs.k8s.io/jobset-name"),
    ("Job", "batch.kubernetes.io/job-name"),
    ("jobs", "job-name"),  # a Job on a cluster older than 1.27 has only the old label
]


@pytest.mark.parametrize(("kind", "label"), JOBS)
def test_job_selects_the_nodes_under_its_pods(cluster: Cluster, kind: str, label: str) -> None:
    _fleet(cluster)
    state = cluster.state
    state.add_pod(make_pod("ml", "llama-worker-0", "gpu-b2", {label: "llama"}))
    state.add_pod(make_pod("ml", "llama-worker-1", "gpu-a1", {label: "llama"}))
    state.add_pod(make_pod("ml", "llama-worker-2", "gpu-a1", {label: "llama"}))  # two ranks on one node
    state.add_pod(make_pod("ml", "llama-worker-3", None, {label: "llama"}, phase="Pending"))  # not scheduled
    state.add_pod(make_pod("ml", "llama-old", "gpu-a2", {label: "llama"}, phase="Succeeded"))  # finished
    state.add_pod(make_pod("ml", "other-0", "cpu-1", {label: "other"}))
    state.add_pod(make_pod("prod", "llama-0", "cpu-1", {label: "llama"}))  # same name, other namespace
    targets = resolve_targets(None, None, None, k8s_job=f"ml/{kind}/llama")
    assert targets.hosts == ("gpu-a1", "gpu-b2")
    assert targets.k8s["job"].startswith("ml/") and targets.k8s["job"].endswith("/llama")


@pytest.mark.parametrize("bad", ["llama", "ml/llama", "ml/TFJob/llama", "/Job/x", "ml/Job/"])
def test_malformed_job_reference(bad: str) -> None:
    with pytest.raises(TargetError):
        parse_job_ref(bad)


def test_exactly_one_target_kind() -> None:
    with pytest.raises(TargetError, match="exactly one of --hosts, --job, --replay, --k8s-nodes or --k8s-job"):
        resolve_targets("a", None, None, k8s_nodes="x=y")


def test_cluster_unreachable_is_one_line(cluster: Cluster) -> None:
    cluster.server.close()
    with pytest.raises(TargetError, match="cannot list the cluster's nodes"):
        resolve_targets(None, None, None, k8s_nodes="a=b")


def test_node_record_and_pod_nodes_are_pure() -> None:
    node = {"metadata": {"name": "n", "labels": {"topology.kubernetes.io/zone": "z1",
                                                 "node.kubernetes.io/instance-type": "p5.48xlarge"}},
            "spec": {"providerID": "aws:///z1/i-0123456789abcdef0"},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "message": "PLEG is not healthy"}]}}
    rec = node_record(node)
    assert (rec.zone, rec.instance_type, rec.ready) == ("z1", "p5.48xlarge", False)
    assert rec.not_ready_reason == "node NotReady (KubeletNotReady: PLEG is not healthy)"
    assert node_record({"metadata": {"name": "x"}}).not_ready_reason == "node NotReady"
    assert nodes_of_pods([{"spec": {"nodeName": "b"}, "status": {"phase": "Running"}},
                          {"spec": {"nodeName": "a"}, "status": {"phase": "Running"}},
                          {"spec": {"nodeName": "b"}, "status": {"phase": "Running"}}]) == ["b", "a"]
