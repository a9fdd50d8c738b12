"""What to capture: a nodeset of hosts, a Slurm job's nodes, Kubernetes nodes (a label selector or a training
job's pods), or a capture directory to replay."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricase.errors import TargetError

__all__ = ["Targets", "parse_nodeset", "resolve_targets"]

MAX_HOSTS = 100_000


@dataclass(frozen=True)
class Targets:
    hosts: tuple[str, ...] = ()
    replay: Path | None = None
    job: str | None = None
    nodeset: str | None = None  # as the user wrote it
    slurm: Any = field(default=None, compare=False)  # fabricase.slurm.SlurmJob when the targets came from --job
    k8s: dict[str, str] | None = None  # {"selector": ...} or {"job": NS/KIND/NAME}: how the nodes were chosen

    def describe(self) -> dict:
        if self.replay:
            return {"replay": str(self.replay)}
        if self.job:
            slurm = {"slurm": self.slurm.describe()} if self.slurm is not None else {}
            return {"job": self.job, "hosts": list(self.hosts), **slurm}
        if self.k8s:
            return {"k8s": dict(self.k8s), "nodeset": self.nodeset, "hosts": list(self.hosts)}
        return {"nodeset": self.nodeset, "hosts": list(self.hosts)}


def parse_nodeset(text: str) -> list[str]:
    """Expand `gpu[001-004,010],localhost` into host names, folded order kept stable and unique."""
    from ClusterShell.NodeSet import NodeSet, NodeSetException

    spec = (text or "").strip()
    if not spec:
        raise TargetError("empty host list", where="--hosts")
    try:
        nodes = NodeSet(spec)
    except (NodeSetException, ValueError, IndexError) as exc:
        raise TargetError(f"malformed nodeset {spec!r}: {exc}", where="--hosts") from exc
    if len(nodes) == 0:
        raise TargetError(f"nodeset {spec!r} names no host", where="--hosts")
    if len(nodes) > MAX_HOSTS:
        raise TargetError(f"nodeset {spec!r} names {len(nodes)} hosts (limit {MAX_HOSTS})", where="--hosts")
    hosts = list(nodes)
    bad = next((h for h in hosts if not _valid_host(h)), None)
    if bad is not None:
        raise TargetError(f"invalid host name {bad!r} in {spec!r}", where="--hosts")
    return hosts


def _valid_host(name: str) -> bool:
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}", name))


def resolve_targets(hosts: str | None, job: str | None, replay: str | None, *, k8s_nodes: str | None = None,
                    k8s_job: str | None = None, kubeconfig: str | None = None,
                    context: str | None = None) -> Targets:
    """The targets one of --hosts, --job, --replay, --k8s-nodes or --k8s-job names (exactly one)."""
    given = [n for n, v in (("--hosts", hosts), ("--job", job), ("--replay", replay), ("--k8s-nodes", k8s_nodes),
                            ("--k8s-job", k8s_job)) if v is not None]
    if len(given) != 1:
        raise TargetError("give exactly one of --hosts, --job, --replay, --k8s-nodes or --k8s-job"
                          + (f" (got {' and '.join(given)})" if given else ""))
    if replay is not None:
        return Targets(replay=Path(replay))
    if job is not None:
        from fabricase.slurm import resolve_job

        sj = resolve_job(job)
        return Targets(hosts=tuple(sj.nodes), job=sj.job_id, nodeset=sj.nodelist, slurm=sj)
    if k8s_nodes is not None or k8s_job is not None:
        return _k8s_targets(k8s_nodes, k8s_job, kubeconfig, context)
    return Targets(hosts=tuple(parse_nodeset(hosts or "")), nodeset=hosts)


def _k8s_targets(selector: str | None, job: str | None, kubeconfig: str | None, context: str | None) -> Targets:
    """Node names from the cluster: the nodes a label selector matches, or those under a job's pods."""
    from ClusterShell.NodeSet import NodeSet

    from fabricase.k8s.api import KubeConfig, load_api
    from fabricase.k8s.targets import parse_job_ref, select_nodes

    ref = parse_job_ref(job) if job is not None else None  # a malformed job fails before the cluster is asked
    api = load_api(KubeConfig(kubeconfig=kubeconfig, context=context))
    names = select_nodes(api, selector=selector, job=ref)
    if len(names) > MAX_HOSTS:
        raise TargetError(f"the cluster names {len(names)} nodes (limit {MAX_HOSTS})",
                          where="--k8s-job" if ref else "--k8s-nodes")
    how = {"job": ref.describe()} if ref else {"selector": selector or ""}
    return Targets(hosts=tuple(names), nodeset=str(NodeSet.fromlist(names)), k8s=how)
