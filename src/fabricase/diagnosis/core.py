"""Findings -> suspects: every major or critical finding belongs to exactly one suspect, the physical thing to
repair or reconfigure; minor findings on the same thing support it; counters that rose at fleet-normal rates
become background lines. Pure: the same findings, hardware and samples give the same diagnosis."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from fabricase.analysis import BACKGROUND_KINDS
from fabricase.diagnosis import verdicts
from fabricase.diagnosis.evidence import FleetIndex, evidence_lines, key_number
from fabricase.diagnosis.hardware import pci_key
from fabricase.diagnosis.models import OWNERS, Background, Diagnosis, HostHardware, HostOutcome, Suspect
from fabricase.models import Finding, HostCapture, MetricSample, Placement, Severity

if TYPE_CHECKING:
    from fabricase.analysis.power import PowerStatement

__all__ = ["Unit", "action_text", "diagnose", "finding_id", "finding_ids", "unit_of"]

_SERIOUS = (Severity.CRITICAL, Severity.MAJOR)
# Minor findings that only say "an error counter rose": folded into background lines.
_BACKGROUND_KINDS = BACKGROUND_KINDS


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


def _nic_unit(dev: str, hw: HostHardware) -> Unit:
    """An RDMA device as a whole: its one port when it has one (a ConnectX function), else the NIC."""
    ports = sorted(p for p in hw.ports if p.split("/")[0] == dev)
    if len(ports) == 1:
        return _port_unit(ports[0], hw)
    pci = next((hw.ports[p]["pci"] for p in ports if hw.ports[p].get("pci")), None)
    names = (f"rdma:{dev}", *([f"pcie:{pci}"] if pci else []), *(f"rdma:{p}" for p in ports))
    return Unit("nic", f"nic:{dev}", names)


# Kinds that name a GPU by PCI address when nvidia-smi was not captured (Xid lines give the GPU's address).
_GPU_KINDS = frozenset({"nvidia-xid", "gpu-pcie-downgraded", "gpu-memory-remap", "dcgm-health"})


def _pcie_unit(address: str, hw: HostHardware, kind: str) -> Unit:
    key = pci_key(address) or address
    owner = hw.pci.get(key)
    if owner is not None:
        what, name = owner
        if what == "gpu":
            return _gpu_unit(name, hw)
        if what == "netdev":
            return _netdev_unit(name, hw)
        if what == "rdma":
            return _nic_unit(name, hw)
    return Unit("gpu" if kind in _GPU_KINDS else "pcie-device", f"pcie:{key}", (f"pcie:{key}",))


def unit_of(f: Finding, hw: HostHardware) -> Unit:
    """The physical thing behind one host finding's component."""
    family, _, name = f.component.partition(":")
    if family == "rdma" and name:
        return _port_unit(name, hw) if "/" in name else _nic_unit(name, hw)
    if family == "netdev" and name:
        return _netdev_unit(name, hw)
    if family == "pcie" and name:
        return _pcie_unit(name, hw, f.kind)
    if family == "gpu" and name:
        return _gpu_unit(name, hw)
    if family == "nvlink" and name:
        return _gpu_unit(name.split("/", 1)[0], hw)
    if family == "nvswitch" and name:
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


# The facts of a unit's names that go into its identity, under the identity's key.
_PORT_FACTS = ("pci", "node_guid", "port_guid", "netdev", "mac", "firmware", "hca_type", "board_id", "link_layer")
_NETDEV_FACTS = ("pci", "mac", "driver", "firmware")
_GPU_FACTS = ("pci", "serial", "uuid", "model")


def _unit_facts(name: str, hw: HostHardware) -> dict[str, str]:
    family, _, rest = name.partition(":")
    if family == "rdma":
        facts, keys = hw.ports.get(rest, {}), _PORT_FACTS
    elif family == "netdev":
        facts, keys = {**hw.netdevs.get(rest, {}), "netdev": rest}, ("netdev", *_NETDEV_FACTS)
    elif family == "gpu":
        facts, keys = hw.gpus.get(rest, {}), _GPU_FACTS
    elif family == "pcie":
        facts, keys = {"pci": pci_key(rest) or rest}, ("pci",)
    else:
        return {}
    return {k: str(facts[k]) for k in keys if facts.get(k)}


def _placement_facts(placement: Placement | None) -> dict[str, str]:
    if placement is None:
        return {}
    out = {key: str(value) for key in ("instance_id", "instance_type", "region", "zone", "placement_group")
           if (value := getattr(placement, key))}
    if placement.topology:
        out["topology"] = " > ".join(placement.topology)
    for key in ("physical_host", "physical_host_name"):
        if placement.extra.get(key):
            out[key] = str(placement.extra[key])
    return out


def _identity(group: _Group, hw: HostHardware | None, placement: Placement | None,
              placements: Mapping[str, Placement], hardware: Mapping[str, HostHardware]) -> dict[str, str]:
    """What the owner needs to find the part: the provider's placement first (its instance id is the one to
    quote), then what the host itself says (the EC2 instance id in DMI), then the part's own PCI address, GUIDs,
    MAC, serial and UUID. A shared component lists the instance ids of the hosts below it."""
    if group.host is None:
        ids = {h: (placements[h].instance_id if h in placements else None)
               or (hardware[h].identity.get("instance_id") if h in hardware else None) for h in sorted(group.hosts)}
        known = [f"{h}={i}" for h, i in ids.items() if i]
        return {"instance_ids": ", ".join(known)} if known else {}
    hw = hw or HostHardware(group.host)  # without the capture's aliases a part still has the PCI address it is named by
    out = _placement_facts(placement)
    for key, value in hw.identity.items():
        out.setdefault(key, value)
    for name in group.unit.names:
        for key, value in _unit_facts(name, hw).items():
            out.setdefault(key, value)
    return dict(sorted(out.items()))


def _hosts_words(hosts: set[str]) -> str:
    """`gpu001, gpu002 and gpu003`, `gpu001, gpu002 and 4 more hosts`, or `the hosts below it`."""
    names = sorted(hosts)
    if not names:
        return "the hosts below it"
    if len(names) <= 3:
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{', '.join(names[:2])} and {len(names) - 2} more hosts"


def _setting(value: object) -> str:
    return "none" if value in ("", None) else str(value)


def _drift(findings: Sequence[Finding]) -> tuple[str, str]:
    """(`pfc_enabled and trust`, `pfc_enabled 3 where this host has none; ...`) from config-drift evidence."""
    pairs = list(dict.fromkeys((ev.metric.rsplit(".", 1)[-1], _setting(ev.baseline), _setting(ev.value))
                               for f in findings if f.kind == "config-drift" for ev in f.evidence))[:3]
    if not pairs:
        return "the setting", "the fleet's value"
    keys = [k for k, _, _ in pairs]
    what = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]
    if len(pairs) == 1:
        return what, f"{pairs[0][1]} where this host has {pairs[0][2]}"
    return what, "; ".join(f"{k} {fleet} where this host has {own}" for k, fleet, own in pairs)


def _nic_words(names: Sequence[str], unit: str, host: str | None) -> str | None:
    """`NIC mlx5_3 (eth3) on gpu003` for a NIC port or a NIC: what is returned is the card, not the port."""
    if host is not None and unit == "host":
        return f"the faulty NIC of {host}"
    if host is None or unit not in ("nic-port", "nic"):
        return None
    rdma = next((n[5:].split("/")[0] for n in names if n.startswith("rdma:")), None)
    netdev = next((n[7:] for n in names if n.startswith("netdev:")), None)
    if rdma:
        return f"NIC {rdma}" + (f" ({netdev})" if netdev and unit == "nic-port" else "") + f" on {host}"
    return f"the NIC of {netdev} on {host}" if netdev else None


def action_text(verdict: verdicts.Verdict, host: str | None, unit: str, names: Sequence[str],
                hosts: Iterable[str] = (), findings: Sequence[Finding] = ()) -> str:
    """The verdict's action for one part: `{where}` is the part on its host ("NIC port mlx5_3/1 (eth3) on
    gpu003"), the host alone for a host suspect, the component for a shared one."""
    from fabricase.diagnosis.naming import component_words, part_words

    below = "the host"
    if host is None:
        part = where = component_words(list(names[:1]))
        host_words = below = _hosts_words(set(hosts))
    elif unit == "host":
        part, where, host_words = "the host", host, host
    else:
        part = part_words(list(names), unit)
        where, host_words = f"{part} on {host}", host
    what, value = _drift(findings)
    nic = _nic_words(names, unit, host) or where
    text = verdict.action.format(where=where, part=part, nic=nic, host=host_words, below=below, what=what,
                                 value=value)
    return text[:1].upper() + text[1:]


def _build(group: _Group, hw: HostHardware | None, fleet: FleetIndex, placements: Mapping[str, Placement],
           hardware: Mapping[str, HostHardware]) -> Suspect:
    serious = sorted(group.serious, key=lambda p: (p[1].sort_key, p[0]))
    names = [verdicts.verdict_of(f) for _, f in serious]
    verdict = verdicts.VERDICTS[min(names, key=verdicts.priority)]
    lead = next(f for (_, f), v in zip(serious, names, strict=True) if v == verdict.name)
    support = sorted(group.support, key=lambda p: (p[1].sort_key, p[0]))
    findings = [fid for fid, _ in serious] + [fid for fid, _ in support]
    # The findings' own components stay as they were named (`pcie:0000:9b:00` beside the unit's `...00.0`), so a
    # finding's component always finds its suspect.
    own = [f for _, f in serious + support if f.host == group.host]
    components = list(dict.fromkeys([*group.unit.names, *(f.component for f in own)]))
    confidences = [f.confidence for _, f in serious if f.confidence is not None]
    qs = [f.q_value for _, f in serious if f.q_value is not None]
    lines = evidence_lines([f for _, f in serious] + [f for _, f in support], fleet)
    unit = "shared" if group.host is None else group.unit.kind
    return Suspect(
        id=_suspect_id(group.host, group.unit.key, group.owner),
        host=group.host,
        unit=unit,
        components=components,
        verdict=verdict.name,
        verdict_text=verdict.text,
        severity=min((f.severity for _, f in serious), key=lambda s: s.rank),
        confidence=max(confidences) if confidences else None,
        q_value=min(qs) if qs else None,
        owner=verdict.owner,
        action=action_text(verdict, group.host, unit, components, group.hosts,
                           [lead, *(f for _, f in serious if f is not lead)]),
        evidence=lines,
        identity=_identity(group, hw, placements.get(group.host or ""), placements, hardware),
        findings=findings,
        key_number=key_number([f for _, f in serious], fleet) or (lines[0] if lines else
                                                                    " ".join(lead.summary.split())[:80]),
        hosts=sorted(group.hosts),
    )


def _median(values: Sequence[float]) -> float | None:
    known = sorted(v for v in values if v == v)
    if not known:
        return None
    mid = len(known) // 2
    return known[mid] if len(known) % 2 else (known[mid - 1] + known[mid]) / 2


def _background(samples: Mapping[str, Sequence[MetricSample]], suspected: set[tuple[str, str]],
                folded: dict[tuple[str, str], list[str]]) -> list[Background]:
    """One line per error counter that rose somewhere outside any suspect: on how many comparable components, and
    the median rate among them."""
    from fabricase.analysis.fleet import is_error_metric

    rose: dict[tuple[str, str], list[float]] = defaultdict(list)
    compared: dict[tuple[str, str], int] = defaultdict(int)
    keys: dict[tuple[str, str], list[str]] = defaultdict(list)
    errors: dict[str, bool] = {}  # per metric name: a fleet has hundreds of thousands of samples, few names
    for host in sorted(samples):
        for s in samples[host]:
            if s.delta is None:
                continue
            error = errors.get(s.metric)
            if error is None:
                error = errors[s.metric] = not s.metric.startswith("raw:") and is_error_metric(s.metric)
            if not error:
                continue
            family = s.component.split(":", 1)[0]
            key = (s.metric, family)
            compared[key] += 1
            if s.delta > 0 and (host, s.component) not in suspected:
                rose[key].append(s.rate if s.rate is not None else float("nan"))
                keys[key] += folded.get((host, s.component), [])
    out = []
    for (metric, family), rates in sorted(rose.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        median = _median(rates)
        out.append(Background(metric, family, len(rates), compared[(metric, family)],
                              round(median, 6) if median is not None else None,
                              findings=sorted(set(keys[(metric, family)]))))
    return out


def _power(samples: Mapping[str, Sequence[MetricSample]],
           hosts: Sequence[HostCapture | HostOutcome]) -> list[PowerStatement]:
    """What the capture could not rule out (analysis.power), over the hosts' own intervals where they are known."""
    from fabricase.analysis.power import hosts_power

    return hosts_power(samples, hosts)


def _owner_of(f: Finding) -> str:
    return verdicts.VERDICTS[verdicts.verdict_of(f)].owner


def _pick(candidates: Sequence[_Group], owner: str) -> _Group:
    """The group a supporting finding joins: the one of its own owner, else provider before operator before
    application (the same whatever order the findings came in)."""
    return next((g for g in candidates if g.owner == owner),
                min(candidates, key=lambda g: OWNERS.index(g.owner) if g.owner in OWNERS else len(OWNERS)))


def diagnose(findings: Sequence[Finding], *, hosts: Iterable[HostCapture | HostOutcome],
             hardware: Mapping[str, HostHardware] | None = None,
             samples: Mapping[str, Sequence[MetricSample]] | None = None,
             placements: Sequence[Placement] = (), power: Sequence[PowerStatement] | None = None) -> Diagnosis:
    """The diagnosis of one capture's findings (analysis.analyze's output, in its order).

    hosts: the capture's hosts (for their status). hardware: host -> host_hardware(hc), the aliases that make an
    RDMA port, its netdev and its PCI function one suspect. samples: host -> the samples fleet statistics read
    (analysis.analyze's samples_out), for the fleet's median and 99th percentile in the evidence and for the
    background lines. placements: for the instance id and topology in each suspect's identity. power: the
    power statements of those very samples, when the analysis stated them already (analysis.analyze's
    power_out, from the fleet step's columns); else they are stated here."""
    hardware = hardware or {}
    samples = samples or {}
    ids = finding_ids(findings)
    where = {p.host: p for p in placements}
    groups: dict[tuple[str | None, str, str], _Group] = {}
    by_unit: dict[tuple[str | None, str], list[_Group]] = defaultdict(list)

    def group(host: str | None, unit: Unit, owner: str) -> _Group:
        key = (host, unit.key, owner)
        if key not in groups:
            groups[key] = _Group(host, unit, owner)
            by_unit[(host, unit.key)].append(groups[key])
        elif unit.kind == "gpu":  # the same address, first named by a finding that could not tell it is a GPU
            groups[key].unit = unit
        return groups[key]

    def hw_of(host: str) -> HostHardware:
        return hardware.get(host) or HostHardware(host)

    pairs = list(zip(ids, findings, strict=True))
    for fid, f in pairs:
        if f.host is None and f.severity in _SERIOUS:
            group(None, Unit("shared", f.component, (f.component,)), _owner_of(f)).serious.append((fid, f))

    minor: list[tuple[str, Finding]] = []
    for fid, f in pairs:
        if f.host is None:
            if f.severity not in _SERIOUS:
                minor.append((fid, f))
            continue
        # A host's errors explained by the switch above it: evidence for the switch, not a suspect of their own.
        above = next((by_unit[(None, c)] for c in f.related if by_unit.get((None, c))), None)
        if above:
            g = _pick(above, _owner_of(f))
            g.support.append((fid, f))
            g.hosts.add(f.host)
        elif f.severity in _SERIOUS:
            group(f.host, unit_of(f, hw_of(f.host)), _owner_of(f)).serious.append((fid, f))
        else:
            minor.append((fid, f))

    # An address nothing maps is a GPU when any finding on it says so (an Xid line), whichever came first.
    for same in by_unit.values():
        if any(g.unit.kind == "gpu" for g in same):
            for g in same:
                g.unit = replace(g.unit, kind="gpu")

    rest: list[tuple[str, Finding]] = []
    for fid, f in minor:
        key = (f.host, unit_of(f, hw_of(f.host)).key if f.host else f.component)
        if by_unit.get(key):
            _pick(by_unit[key], _owner_of(f)).support.append((fid, f))
        else:
            rest.append((fid, f))

    fleet = FleetIndex(samples, [f for g in groups.values() for _, f in g.serious + g.support])
    suspects = [_build(g, hardware.get(g.host) if g.host else None, fleet, where, hardware)
                for _, g in sorted(groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1], kv[0][2]))]
    suspects.sort(key=lambda s: (s.severity.rank, -(s.confidence or 0.0), s.host or "", s.components[0], s.id))
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
    limits = sorted({" ".join(f.summary.split()) for _, f in rest
                     if f.kind in ("fleet-too-small", "switch-power-limit")})  # power limit: analysis.topology
    hosts = list(hosts)
    power = list(power) if power is not None else _power(samples, hosts)
    per_host: dict[str, int] = defaultdict(int)
    for s in suspects:
        for h in {s.host, *s.hosts} - {None}:
            per_host[h] += 1  # type: ignore[index]
    outcomes = [HostOutcome(h.host, str(h.status), h.reason, per_host.get(h.host, 0)) for h in hosts]
    return Diagnosis(suspects, background, outcomes, minor=leftover, limits=limits, power=power)
