"""What to capture: a nodeset of hosts, a Slurm job's nodes, or a capture directory to replay."""

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

    def describe(self) -> dict:
        if self.replay:
            return {"replay": str(self.replay)}
        if self.job:
            slurm = {"slurm": self.slurm.describe()} if self.slurm is not None else {}
            return {"job": self.job, "hosts": list(self.hosts), **slurm}
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


def resolve_targets(hosts: str | None, job: str | None, replay: str | None) -> Targets:
    given = [n for n, v in (("--hosts", hosts), ("--job", job), ("--replay", replay)) if v is not None]
    if len(given) != 1:
        raise TargetError("give exactly one of --hosts, --job or --replay"
                          + (f" (got {' and '.join(given)})" if given else ""))
    if replay is not None:
        return Targets(replay=Path(replay))
    if job is not None:
        from fabricase.slurm import resolve_job

        sj = resolve_job(job)
        return Targets(hosts=tuple(sj.nodes), job=sj.job_id, nodeset=sj.nodelist, slurm=sj)
    return Targets(hosts=tuple(parse_nodeset(hosts or "")), nodeset=hosts)
