"""Findings -> suspects: every major or critical finding belongs to exactly one suspect, the physical thing to
repair or reconfigure; minor findings on the same thing support it; counters that rose at fleet-normal rates
become background lines. Pure: the same findings, hardware and samples give the same diagnosis."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fabricase.diagnosis import verdicts
from fabricase.diagnosis.evidence import FleetIndex, evidence_lines
from fabricase.diagnosis.hardware import pci_key
from fabricase.diagnosis.models import Background, Diagnosis, HostHardware, HostOutcome, Suspect
from fabricase.models import Finding, HostCapture, MetricSample, Placement, Severity

__all__ = ["diagnose", "finding_id", "finding_ids", "unit_of"]

_SERIOUS = (Severity.CRITICAL, Severity.MAJOR)
_CAPTURED = ("ok", "partial")
# Minor findings that only say "an error counter rose" (analysis.BACKGROUND_KINDS): folded into background lines.
_BACKGROUND_KINDS = frozenset({
    "netdev-errors", "phy-errors", "nic-discards", "rdma-symbol-errors", "rdma-port-errors",
    "rdma-transport-errors", "nvlink-errors",
})


def finding_id(f: Finding) -> str:
    """`<kind>@<host>/<component>`: readable, and unique within one capture's findings (finding_ids)."""
    return f"{f.kind}@{f.host or 'shared'}/{f.component}"


def finding_ids(findings: Sequence[Finding]) -> list[str]:
    """Each finding's id, in order; a repeated id gets `#2`, `#3` in the order the findings come (deterministic)."""
    seen: dict[str, int] = {}
    out = []
    for f in findings:
        base = finding_id(f)
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return out


@dataclass(frozen=True)
class Unit:
    """The physical thing a component belongs to on one host: its kind, a key, and its names (primary first)."""

    kind: str
    key: str
    names: tuple[str, ...]


def _port_unit(port: str, hw: HostHardware) -> Unit:
    facts = hw.ports.get(port, {})
    names = [f"rdma:{port}"]
    if facts.get("netdev"):
        names.append(f"netdev:{facts['netdev']}")
    if facts.get("pci"):
        names.append(f"pcie:{facts['pci']}")
    return Unit("nic-port", f"port:{port}", tuple(names))


def _netdev_unit(name: str, hw: HostHardware) -> Unit:
    facts = hw.netdevs.get(name, {})
    if facts.get("rdma"):
        return _port_unit(facts["rdma"], hw)
    names = [f"netdev:{name}"] + ([f"pcie:{facts['pci']}"] if facts.get("pci") else [])
    return Unit("nic-port", f"netdev:{name}", tuple(names))


def _gpu_unit(index: str, hw: HostHardware) -> Unit:
    facts = hw.gpus.get(index, {})
    names = [f"gpu:{index}"] + ([f"pcie:{facts['pci']}"] if facts.get("pci") else [])
    return Unit("gpu", f"gpu:{index}", tuple(names))


def _pcie_unit(address: str, hw: HostHardware, kind: str) -> Unit:
    key = pci_key(address) or address
    owner = hw.pci.get(key)
    if owner is not None:
        what, name = owner
        if what == "gpu":
            return _gpu_unit(name, hw)
        if what == "netdev":
            return _netdev_unit(name, hw)
        ports = sorted(p for p in hw.ports if p.split("/")[0] == name)
        if len(ports) == 1:
            return _port_unit(ports[0], hw)
        return Unit("nic", f"nic:{name}", (f"pcie:{key}", *(f"rdma:{p}" for p in ports)))
    gpu_like = kind in ("nvidia-xid", "kernel-pcie-aer", "gpu-pcie-downgraded", "pcie-link-limited")
    return Unit("gpu" if kind == "nvidia-xid" else "pcie-device" if not gpu_like else "pcie-device",
                f"pcie:{key}", (f"pcie:{key}",))


def unit_of(f: Finding, hw: HostHardware) -> Unit:
    """The physical thing behind one host finding's component."""
    family, _, name = f.component.partition(":")
    if family == "rdma" and "/" in name:
        return _port_unit(name, hw)
    if family == "netdev":
        return _netdev_unit(name, hw)
    if family == "pcie":
        return _pcie_unit(name, hw, f.kind)
    if family == "gpu":
        return _gpu_unit(name, hw)
    if family == "nvlink":
        return _gpu_unit(name.split("/", 1)[0], hw)
    if family == "nvswitch":
        return Unit("nvswitch", f.component, (f.component,))
    if f.component in ("fabric-manager", "imex"):
        return Unit(f.component, f.component, (f.component,))
    return Unit("host", "host", ("host",))


@dataclass
class _Group:
    host: str | None
    unit: Unit
    owner: str
    serious: list[tuple[str, Finding]] = field(default_factory=list)
    support: list[tuple[str, Finding]] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)


def _suspect_id(host: str | None, unit_key: str, owner: str) -> str:
    return "S" + hashlib.sha256(f"{host or ''}|{unit_key}|{owner}".encode()).hexdigest()[:10]


def _identity(group: _Group, hw: HostHardware | None, placement: Placement | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if placement is not None:
        for key in ("instance_id", "instance_type", "zone"):
            if value := getattr(placement, key):
                out[key] = str(value)
        if placement.topology:
            out["topology"] = " > ".join(placement.topology)
        for key in ("physical_host", "physical_host_name"):
            if placement.extra.get(key):
                out[key] = str(placement.extra[key])
    if hw is None:
        return out
    for key, value in hw.identity.items():
        out.setdefault(key, value)
    for name in group.unit.names:
        family, _, rest = name.partition(":")
        facts = hw.ports.get(rest) if family == "rdma" else hw.netdevs.get(rest) if family == "netdev" else \
            hw.gpus.get(rest) if family == "gpu" else None
        for key, value in (facts or {}).items():
            if key not in ("rdma",):
                out.setdefault("netdev" if key == "netdev" else key, value)
    return dict(sorted(out.items()))


def _action(verdict: verdicts.Verdict, group: _Group, lead: Finding) -> str:
    from fabricase.diagnosis.naming import component_words

    where = component_words(list(group.unit.names)) if group.host else lead.component
    if group.unit.kind == "nic-port" and group.host:
        where = f"NIC port {where} of {group.host}"
    elif group.unit.kind == "nic" and group.host:
        where = f"NIC {where} of {group.host}"
    elif group.host and group.unit.kind != "host":
        where = f"{where} of {group.host}"
    elif group.host:
        where = group.host
    what, value = "the setting", "the fleet's value"
    if lead.kind == "config-drift" and lead.evidence:
        ev = lead.evidence[0]
        what, value = ev.metric.rsplit(".", 1)[-1], f"{ev.baseline!r} where this host has {ev.value!r}"
    return verdict.action.format(where=where, host=group.host or ", ".join(sorted(group.hosts)) or "the hosts",
                                 what=what, value=value)


def _build(group: _Group, hw: HostHardware | None, placement: Placement | None, fleet: FleetIndex) -> Suspect:
    serious = sorted(group.serious, key=lambda p: (p[1].sort_key, p[0]))
    names = [verdicts.verdict_of(f) for _, f in serious]
    verdict = verdicts.VERDICTS[min(names, key=verdicts.priority)]
    lead = next(f for (_, f), v in zip(serious, names, strict=True) if v == verdict.name)
    findings = [fid for fid, _ in serious] + [fid for fid, _ in sorted(group.support, key=lambda p: p[1].sort_key)]
    own = [f for _, f in serious + group.support if f.host == group.host]
    components = list(dict.fromkeys([*group.unit.names, *(f.component for f in own)]))
    confidences = [f.confidence for _, f in serious if f.confidence is not None]
    qs = [f.q_value for _, f in serious if f.q_value is not None]
    lines = evidence_lines([f for _, f in serious] + [f for _, f in group.support], fleet)
    return Suspect(
        id=_suspect_id(group.host, group.unit.key, group.owner),
        host=group.host,
        unit="shared" if group.host is None else group.unit.kind,
        components=components,
        verdict=verdict.name,
        verdict_text=verdict.text,
        severity=min((f.severity for _, f in serious), key=lambda s: s.rank),
        confidence=max(confidences) if confidences else None,
        q_value=min(qs) if qs else None,
        owner=verdict.owner,
        action=_action(verdict, group, lead),
        evidence=lines,
        identity=_identity(group, hw, placement),
        findings=findings,
        key_number=lines[0] if lines else " ".join(lead.summary.split())[:80],
        hosts=sorted(group.hosts),
    )


def _background(samples: Mapping[str, Sequence[MetricSample]], suspected: set[tuple[str, str]],
                folded: dict[tuple[str, str], list[str]]) -> list[Background]:
    """One line per error counter that rose somewhere outside any suspect: on how many comparable components, and
    the median rate among them."""
    from fabricase.analysis.fleet import is_error_metric

    rose: dict[tuple[str, str], list[float]] = defaultdict(list)
    compared: dict[tuple[str, str], int] = defaultdict(int)
    keys: dict[tuple[str, str], list[str]] = defaultdict(list)
    for host in sorted(samples):
        for s in samples[host]:
            if s.delta is None or s.metric.startswith("raw:") or not is_error_metric(s.metric):
                continue
            family = s.component.split(":", 1)[0]
            key = (s.metric, family)
            compared[key] += 1
            if s.delta > 0 and (host, s.component) not in suspected:
                rose[key].append(s.rate if s.rate is not None else float("nan"))
                keys[key] += folded.get((host, s.component), [])
    out = []
    for (metric, family), rates in sorted(rose.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        known = sorted(r for r in rates if r == r)
        median = known[len(known) // 2] if known else None
        out.append(Background(metric, family, len(rates), compared[(metric, family)],
                              round(median, 6) if median is not None else None,
                              findings=sorted(set(keys[(metric, family)]))))
    return out


def diagnose(findings: Sequence[Finding], *, hosts: Iterable[HostCapture | HostOutcome],
             hardware: Mapping[str, HostHardware] | None = None,
             samples: Mapping[str, Sequence[MetricSample]] | None = None,
             placements: Sequence[Placement] = ()) -> Diagnosis:
    """The diagnosis of one capture's findings (analysis.analyze's output, in its order).

    hosts: the capture's hosts (for their status). hardware: host -> host_hardware(hc), the aliases that make an
    RDMA port, its netdev and its PCI function one suspect. samples: host -> the samples fleet statistics read
    (analysis.analyze's samples_out), for the fleet's median and 99th percentile in the evidence and for the
    background lines. placements: for the instance id and topology in each suspect's identity."""
    hardware = hardware or {}
    samples = samples or {}
    ids = finding_ids(findings)
    where = {p.host: p for p in placements}
    groups: dict[tuple[str | None, str, str], _Group] = {}
    shared_keys: dict[str, tuple[str | None, str, str]] = {}

    def group(host: str | None, unit: Unit, owner: str) -> _Group:
        key = (host, unit.key, owner)
        if key not in groups:
            groups[key] = _Group(host, unit, owner)
        return groups[key]

    pending: list[tuple[str, Finding]] = []
    for fid, f in zip(ids, findings, strict=True):
        if f.host is None and f.severity in _SERIOUS:
            owner = verdicts.VERDICTS[verdicts.verdict_of(f)].owner
            g = group(None, Unit("shared", f.component, (f.component,)), owner)
            g.serious.append((fid, f))
            shared_keys[f.component] = (None, f.component, owner)
        else:
            pending.append((fid, f))

    minor: list[tuple[str, Finding]] = []
    for fid, f in pending:
        if f.host is None:
            minor.append((fid, f))
            continue
        hw = hardware.get(f.host) or HostHardware(f.host)
        under = next((shared_keys[c] for c in f.related if c in shared_keys), None)
        if under is not None:  # a host's errors explained by the switch above it: evidence for the switch
            g = groups[under]
            g.support.append((fid, f))
            g.hosts.add(f.host)
            continue
        if f.severity in _SERIOUS:
            owner = verdicts.VERDICTS[verdicts.verdict_of(f)].owner
            group(f.host, unit_of(f, hw), owner).serious.append((fid, f))
        else:
            minor.append((fid, f))

    by_unit: dict[tuple[str | None, str], list[_Group]] = defaultdict(list)
    for (host, key, _), g in groups.items():
        by_unit[(host, key)].append(g)
    rest: list[tuple[str, Finding]] = []
    for fid, f in minor:
        owners = by_unit.get((f.host, unit_of(f, hardware.get(f.host) or HostHardware(f.host or "")).key)) \
            if f.host else None
        if owners:
            owners[0].support.append((fid, f))
        else:
            rest.append((fid, f))

    fleet = FleetIndex(samples, [f for g in groups.values() for _, f in g.serious + g.support])
    suspects = []
    for key in sorted(groups, key=lambda k: (k[0] or "", k[1], k[2])):
        g = groups[key]
        suspects.append(_build(g, hardware.get(g.host) if g.host else None, where.get(g.host or ""), fleet))
    suspects.sort(key=lambda s: (s.severity.rank, -(s.confidence or 0.0), s.host or "", s.components[0]))
    suspected = {(s.host, c) for s in suspects if s.host for c in s.components}
    suspected |= {(f.host, f.component) for g in groups.values() for _, f in g.support if f.host}
    folded: dict[tuple[str, str], list[str]] = defaultdict(list)
    leftover = []
    for fid, f in rest:
        if f.kind in _BACKGROUND_KINDS and f.severity == Severity.MINOR and f.host:
            folded[(f.host, f.component)].append(fid)
        elif f.severity == Severity.MINOR:
            leftover.append(fid)
    background = _background(samples, suspected, folded)
    in_lines = {fid for b in background for fid in b.findings}
    leftover += sorted(fid for fids in folded.values() for fid in fids if fid not in in_lines)
    limits = sorted({" ".join(f.summary.split()) for _, f in rest if f.kind == "fleet-too-small"})
    outcomes = []
    per_host = defaultdict(int)
    for s in suspects:
        for h in {s.host, *s.hosts} - {None}:
            per_host[h] += 1
    for h in hosts:
        if isinstance(h, HostOutcome):
            outcomes.append(HostOutcome(h.host, h.status, h.reason, per_host.get(h.host, 0)))
        else:
            outcomes.append(HostOutcome(h.host, str(h.status), h.reason, per_host.get(h.host, 0)))
    return Diagnosis(suspects, background, outcomes, minor=leftover, limits=limits)
