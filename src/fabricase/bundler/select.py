"""Which hosts a summary bundle carries: every suspect's host, and a fixed sample of healthy peers per class.

A *class* is a set of hosts that should look alike: the same instance type (placements; else the DMI product
name), the same GPU count and the same NIC set (the RDMA ports and netdevs analysis sampled). Peers are chosen
per class by the sha256 of `seed + name`, so the same capture always gives the same bundle, and the choice does
not follow the host order of the capture or its names' sort order (no "first 8 racks" bias). Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fabricase.models import Finding, HostStatus, MetricSample, Placement, Severity

if TYPE_CHECKING:
    from fabricase.diagnosis import Diagnosis
    from fabricase.models import HostCapture, HostSummary

__all__ = ["PEERS_PER_CLASS", "SEED", "Selection", "host_classes", "select_hosts", "suspect_hosts"]

PEERS_PER_CLASS = 8
SEED = "fabricase-summary-v1"  # changing it changes every summary bundle: bump with the bundle format
_MAJOR = Severity.MAJOR.rank


@dataclass(frozen=True)
class Selection:
    """The hosts a summary bundle carries (`included`, in the capture's order) and those it leaves out."""

    included: list[str]
    left_out: list[str]
    suspects: list[str]  # hosts with a suspect or a finding of major or critical severity
    peers: list[str]  # healthy hosts sampled per class
    classes: dict[str, str] = field(default_factory=dict)  # host -> its class label (every host)


def suspect_hosts(findings: Iterable[Finding], diagnosis: Diagnosis | None) -> set[str]:
    """Every host with a suspect (a shared suspect: the hosts below it it hurts) or a major+ finding."""
    hosts = {f.host for f in findings if f.host and f.severity.rank <= _MAJOR}
    if diagnosis is not None:
        for s in diagnosis.suspects:
            if s.host:
                hosts.add(s.host)
            hosts.update(h for h in s.hosts if h)
    return hosts


def _nic_set(samples: Sequence[MetricSample]) -> str:
    nics = sorted({s.component for s in samples if s.component.startswith(("rdma:", "netdev:"))})
    return ",".join(nics) or "no NIC sampled"


def _gpu_count(samples: Sequence[MetricSample]) -> int:
    gpus = set()
    for s in samples:
        kind, _, rest = s.component.partition(":")
        if kind in ("gpu", "nvlink"):
            gpus.add(rest.split("/", 1)[0])
    return len(gpus)


def host_classes(hosts: Sequence[str], samples: Mapping[str, Sequence[MetricSample]],
                 placements: Sequence[Placement] = (), summaries: Sequence[HostSummary] = ()) -> dict[str, str]:
    """host -> class label, `instance type / N GPUs / NIC set`; a host nothing was sampled from (unreachable)
    is in the class of what its placement says, with "no NIC sampled"."""
    types = {p.host: p.instance_type for p in placements if p.instance_type}
    products = {h.host: str(h.identity.get("product_name") or "") for h in summaries if h.identity}
    out = {}
    for host in hosts:
        mine = samples.get(host, ())
        kind = types.get(host) or products.get(host) or "unknown type"
        out[host] = f"{kind} / {_gpu_count(mine)} GPUs / {_nic_set(mine)}"
    return out


def _rank(host: str) -> str:
    return hashlib.sha256(f"{SEED}\0{host}".encode()).hexdigest()


def select_hosts(capture_hosts: Sequence[HostCapture], findings: Iterable[Finding], diagnosis: Diagnosis | None,
                 samples: Mapping[str, Sequence[MetricSample]], *, placements: Sequence[Placement] = (),
                 summaries: Sequence[HostSummary] = (), peers_per_class: int = PEERS_PER_CLASS) -> Selection:
    """The suspects' hosts plus up to `peers_per_class` healthy (captured ok, no suspect) hosts of every class,
    so the provider sees each fault beside hosts that should look like it."""
    order = [hc.host for hc in capture_hosts]
    status = {hc.host: hc.status for hc in capture_hosts}
    classes = host_classes(order, samples, placements, summaries)
    suspects = suspect_hosts(findings, diagnosis) & set(order)
    by_class: dict[str, list[str]] = {}
    for host in order:
        if host not in suspects and status[host] == HostStatus.OK:
            by_class.setdefault(classes[host], []).append(host)
    peers = {h for members in by_class.values() for h in sorted(members, key=_rank)[:peers_per_class]}
    chosen = suspects | peers
    return Selection(
        included=[h for h in order if h in chosen],
        left_out=[h for h in order if h not in chosen],
        suspects=[h for h in order if h in suspects],
        peers=[h for h in order if h in peers],
        classes=classes,
    )
