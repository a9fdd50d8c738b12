"""Which Kubernetes nodes to capture: a node label selector, or the nodes under a training job's pods. The
selection logic is pure (it reads JSON dicts); `select_nodes` does the API reads.

The job labels, as each controller sets them on the pods it creates:

- PyTorchJob, MPIJob (Kubeflow training-operator; mpi-operator v2 alike): `training.kubeflow.org/job-name`
  (kubeflow/common `JobNameLabel`).
- JobSet: `jobset.sigs.k8s.io/jobset-name` (its docs list pods with exactly this selector).
- Job: `batch.kubernetes.io/job-name` (Kubernetes 1.27 and later), and the older `job-name` it still sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricase.errors import TargetError

__all__ = ["JOB_LABELS", "JobRef", "NodeRecord", "nodes_of_pods", "node_record", "parse_job_ref", "select_nodes"]

# kind (lower-case, also the plural and the short name) -> the pod labels that name the job, most specific first.
JOB_LABELS: dict[str, tuple[str, ...]] = {
    "pytorchjob": ("training.kubeflow.org/job-name",),
    "mpijob": ("training.kubeflow.org/job-name",),
    "jobset": ("jobset.sigs.k8s.io/jobset-name",),
    "job": ("batch.kubernetes.io/job-name", "job-name"),
}
_KIND_ALIASES = {"pytorchjobs": "pytorchjob", "mpijobs": "mpijob", "jobsets": "jobset", "jobs": "job"}
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class JobRef:
    namespace: str
    kind: str  # a JOB_LABELS key
    name: str

    def describe(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass(frozen=True)
class NodeRecord:
    """What the API says of one node: what locate needs (providerID, zone, instance type) and whether it is
    Ready (a NotReady node's kubelet cannot run an exec)."""

    name: str
    provider_id: str | None
    zone: str | None
    instance_type: str | None
    ready: bool
    not_ready_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.name, "provider_id": self.provider_id, "zone": self.zone,
                "instance_type": self.instance_type, "ready": self.ready}


def parse_job_ref(text: str) -> JobRef:
    """NAMESPACE/KIND/NAME, e.g. `team-a/PyTorchJob/llama-70b`; KIND is any case, singular or plural."""
    parts = (text or "").strip().split("/")
    if len(parts) != 3 or not all(parts):
        raise TargetError(f"{text!r} is not NAMESPACE/KIND/NAME (e.g. team-a/PyTorchJob/llama)", where="--k8s-job")
    kind = parts[1].lower()
    kind = _KIND_ALIASES.get(kind, kind)
    if kind not in JOB_LABELS:
        raise TargetError(f"unknown job kind {parts[1]!r}; valid: PyTorchJob, MPIJob, JobSet, Job",
                          where="--k8s-job")
    return JobRef(parts[0], kind, parts[2])


def node_record(node: dict[str, Any]) -> NodeRecord:
    """A node's record from its JSON. Ready is the `Ready` condition being "True"."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    labels = meta.get("labels") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    is_ready = bool(ready and ready.get("status") == "True")
    why = None
    if not is_ready:
        detail = ": ".join(x for x in ((ready or {}).get("reason"), ((ready or {}).get("message") or "")[:120]) if x)
        why = "node NotReady" + (f" ({detail})" if detail else "")
    return NodeRecord(meta.get("name", ""), spec.get("providerID") or None, labels.get(ZONE_LABEL),
                      labels.get(INSTANCE_TYPE_LABEL), is_ready, why)


def nodes_of_pods(pods: list[dict[str, Any]]) -> list[str]:
    """The nodes the pods run on, first-seen order, once each; pods not scheduled yet are left out."""
    seen: dict[str, None] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if node and phase not in ("Succeeded", "Failed"):
            seen.setdefault(node, None)
    return list(seen)


def select_nodes(api: Any, selector: str | None = None, job: JobRef | None = None) -> list[str]:
    """Node names, sorted, for --k8s-nodes SELECTOR or --k8s-job; an empty selection is one TargetError."""
    from fabricase.k8s.api import api_error_text

    try:
        if job is not None:
            names: list[str] = []
            for label in JOB_LABELS[job.kind]:
                names = nodes_of_pods(api.list_pods(job.namespace, label_selector=f"{label}={job.name}"))
                if names:
                    break
            if not names:
                raise TargetError(f"no running pod of {job.describe()} is on a node (labels tried: "
                                  f"{', '.join(JOB_LABELS[job.kind])})", where="--k8s-job")
            return sorted(names)
        nodes = [node_record(n).name for n in api.list_nodes(label_selector=selector or None)]
    except TargetError:
        raise
    except Exception as exc:  # ApiException, connection refused: one line, where it happened
        raise TargetError(f"cannot list the cluster's {'pods' if job else 'nodes'}: {api_error_text(exc)}",
                          where="--k8s-job" if job else "--k8s-nodes") from exc
    if not nodes:
        what = f"no node matches the label selector {selector!r}" if selector else "the cluster lists no node"
        raise TargetError(what, where="--k8s-nodes")
    return sorted(nodes)
