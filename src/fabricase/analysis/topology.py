"""Topology correlation: do the hosts with link faults sit under one shared component (a leaf switch, an AWS
network node, a GCP block) more than chance allows? If so, the shared component is named in a finding of its
own and the host findings point at it, so that the ticket asks the provider to look at the switch rather than
replace eight hosts.

Pure: findings and placements in, findings out. The test for each shared node S is the hypergeometric upper
tail P(X >= k) with N hosts in the fleet, K of them flagged, n under S and k flagged under S (the chance that
n hosts picked at random from the fleet hold k or more of the flagged ones), computed exactly with integer
binomials (same value as scipy.stats.hypergeom.sf(k - 1, N, K, n), without importing scipy.stats, which
alone costs 0.6 s). Benjamini-Hochberg adjusts the p-values across every shared node of the fleet.

The port test (fabricase.analysis.topology_ports) names a switch that hurts only a few of its ports, too few
errors on each to flag a host. Method and measured power: docs/topology-and-drift.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from fabricase.analysis.topology_ports import (  # re-exported: the port test's public names, as before the split
    EVIDENCE_P,
    HOST_P_FLOOR,
    PortSwitchTest,
    benjamini_hochberg,
    hosts_needed,
    port_switch_tests,
    scan_pvalue,
)
from fabricase.models import Evidence, Finding, Severity

__all__ = [
    "HOST_P_FLOOR",
    "SHARED_COMPONENT_FAULT",
    "SWITCH_POWER_LIMIT",
    "PortSwitchTest",
    "hosts_needed",
    "port_switch_tests",
    "scan_pvalue",
    "benjamini_hochberg",
    "flagged_host_findings",
    "hypergeom_sf",
    "shared_component_findings",
]

SHARED_COMPONENT_FAULT = "shared-component-fault"
SWITCH_POWER_LIMIT = "switch-power-limit"
_LINK_PREFIXES = ("rdma:", "netdev:")  # NVLink is inside the host: a switch above it cannot explain it
_UNREACHABLE = "host-unreachable"
_NOT_LINK_FAULTS = {"config-drift"}  # a setting, not an observed fault: it would flag a badly set-up rack
_SERIOUS = (Severity.CRITICAL, Severity.MAJOR)
_NOUNS = {
    "switch": "the switch",
    "rack": "the rack",
    "network-node": "the network node",
    "block": "the block",
    "subblock": "the sub-block",
    "sub-block": "the sub-block",
}


def hypergeom_sf(k: int, N: int, K: int, n: int) -> float:
    """P(X >= k) for X hypergeometric: n draws without replacement from N items of which K are marked.
    Exact (integer binomials, one correctly rounded division)."""
    if not 0 <= K <= N or not 0 <= n <= N:
        raise ValueError(f"hypergeometric parameters out of range: N={N}, K={K}, n={n}")
    lo, hi = max(k, 0, n - (N - K)), min(n, K)
    if lo > hi:
        return 0.0 if k > 0 else 1.0
    if lo == max(0, n - (N - K)):
        return 1.0  # the whole support
    tail = sum(math.comb(K, x) * math.comb(N - K, n - x) for x in range(lo, hi + 1))
    return tail / math.comb(N, n)


def _is_flagging(f: Finding) -> bool:
    if f.host is None or f.severity not in _SERIOUS or f.kind in _NOT_LINK_FAULTS:
        return False
    return f.kind == _UNREACHABLE or f.component.startswith(_LINK_PREFIXES)


def flagged_host_findings(findings: Iterable[Finding]) -> dict[str, list[Finding]]:
    """Host -> its findings that flag it for the topology test: major or critical on an RDMA port or network
    interface (configuration drift excepted), or the host unreachable."""
    flagged: dict[str, list[Finding]] = {}
    for f in findings:
        if _is_flagging(f):
            flagged.setdefault(f.host, []).append(f)
    return flagged


def _q_text(q: float) -> str:
    if q >= 0.001:
        return f"{q:.2g}"
    mantissa, _, exponent = f"{q:.0e}".partition("e")
    return f"{mantissa}e{int(exponent)}"


def _noun(component: str) -> str:
    return _NOUNS.get(component.partition(":")[0], "the shared component")


def _symptom(findings: Iterable[Finding]) -> str:
    kinds = {f.kind == _UNREACHABLE for f in findings}
    if kinds == {True}:
        return "are unreachable"
    if kinds == {False}:
        return "show link errors"
    return "show link errors or are unreachable"


def _rate_text(per_s: float) -> str:
    per_h = per_s * 3600
    return f"{per_h:,.0f}/h" if per_h >= 10 else f"{per_h:.2g}/h"


def _port_finding(t: PortSwitchTest, N: int, linked: list[Finding]) -> Finding:
    k, n = len(t.hosts), t.hosts_under
    chance = round(n * t.host_p[k - 1], 2) if k else 0.0
    worst = min((f.severity for f in linked), key=lambda sev: sev.rank, default=Severity.MAJOR)
    severity = worst if worst.rank < Severity.MAJOR.rank else Severity.MAJOR
    seconds = f"{t.interval:.3g}"
    return Finding(
        kind=SHARED_COMPONENT_FAULT,
        severity=severity,
        host=None,
        component=t.node,
        summary=(
            f"{k:,} of the {n:,} hosts under {t.node} show raised {t.metric} on a port ({t.count:,.0f} in "
            f"{seconds} s where the fleet expects {t.expected:.2g}; port test q = {_q_text(t.q)}): investigate "
            f"{_noun(t.node)}, not the hosts"
        ),
        evidence=[
            Evidence("flagged_under", k, "hosts", baseline=chance),
            Evidence("hosts_under", n, "hosts"),
            Evidence("fleet_size", N, "hosts"),
            Evidence(f"{t.metric}.delta", t.count, "events", baseline=float(f"{t.expected:.4g}")),
            Evidence("port_test.p_value", float(f"{t.p:.4g}"), "probability"),
        ],
        confidence=round(1.0 - t.q, 4),
        q_value=t.q,
        related=sorted(f"{h}/{c}" for h, c in t.ports),
    )


def _limit_finding(tests: list[PortSwitchTest], named: set[str], alpha: float) -> Finding | None:
    """The power-limit line for the strongest unnamed (switch, metric) with some evidence: how many hosts at its
    intensity the port test would need."""
    weak = [t for t in tests if t.node not in named and t.evidence_hosts > 0 and t.q > alpha]
    if not weak:
        return None
    t = min(weak, key=lambda t: (t.host_p[0], t.node.partition(":")[0] != "switch", t.node, t.metric))
    need = hosts_needed(t.host_p[0], t.hosts_under, len(tests), alpha=alpha)
    shown = sum(x <= EVIDENCE_P for x in t.host_p)
    tail = ("cannot be told apart from independent bad ports at any number of its hosts" if need is None else
            f"a switch affecting fewer than {need} hosts at this intensity cannot be told apart from {need} "
            f"independent bad ports")
    return Finding(
        kind=SWITCH_POWER_LIMIT, severity=Severity.INFO, host=None, component=t.node,
        summary=(f"{t.node}: {shown} of its {t.hosts_under} hosts {'shows' if shown == 1 else 'show'} raised "
                 f"{t.metric} on a port; {tail}"),
        evidence=[Evidence("hosts_needed", need, "hosts", baseline=t.hosts_under),
                  Evidence("evidence_hosts", shown, "hosts")],
    )


def shared_component_findings(
    findings: list[Finding],
    placements: Mapping[str, Sequence[str]],
    all_hosts: Sequence[str],
    *,
    alpha: float = 0.01,
    min_flagged: int = 2,
    port_groups: Iterable | None = None,
) -> tuple[list[Finding], list[Finding]]:
    """Shared components under which flagged hosts concentrate beyond chance.

    placements: host -> its shared components, outermost first (Placement.topology: ["switch:leaf-3",
    "rack:r1"], ["network-node:nn-1", "network-node:nn-2"], ["block:b1", "subblock:s1"]). all_hosts: the
    fleet (every host of the capture, reachable or not); placements of other hosts are ignored.

    Returns (shared findings, findings): one `shared-component-fault` finding per significant component
    (q <= alpha after BH across all shared components, at least `min_flagged` flagged hosts under it), and
    the input findings in their order, where each flagging finding of a host under a reported component is
    replaced by a copy whose `related` also names that component (inputs are not mutated).

    When two significant components explain the same flagged hosts (or one explains a subset of the
    other's), only the one with the smaller q is reported (on a tie: the outermost, then by name); an
    identical host set is noted in the evidence (`same_hosts_as`).

    port_groups (fleet.port_groups): also the port test (port_switch_tests). A component it finds at
    q <= alpha that no host-level finding above explains (the same component, or one whose flagged hosts hold
    the port test's hosts) is reported too, nested components resolved the same way, and the host findings on
    the ports that made it link to it. Then one `switch-power-limit` info finding says, for the strongest
    unnamed evidence, how many hosts the test would have needed.
    """
    fleet = sorted(set(all_hosts))
    fleet_set = set(fleet)
    N = len(fleet)
    flagged_by_host = {h: fs for h, fs in flagged_host_findings(findings).items() if h in fleet_set}
    K = len(flagged_by_host)
    under: dict[str, set[str]] = {}
    depth: dict[str, int] = {}
    for host in fleet:
        for level, node in enumerate(placements.get(host) or ()):
            under.setdefault(node, set()).add(host)
            depth[node] = min(depth.get(node, level), level)
    if N == 0 or not under:
        return [], list(findings)
    if K == 0:
        return _port_only(findings, placements, fleet, port_groups, alpha, min_flagged)

    nodes = sorted(under)
    flagged_under = {s: under[s] & flagged_by_host.keys() for s in nodes}
    p = [hypergeom_sf(len(flagged_under[s]), N, K, len(under[s])) for s in nodes]
    q = dict(zip(nodes, benjamini_hochberg(p), strict=True))
    significant = [s for s in nodes if q[s] <= alpha and len(flagged_under[s]) >= min_flagged]
    significant.sort(key=lambda s: (q[s], depth[s], s))

    kept: list[str] = []
    same_as: dict[str, list[str]] = {}
    for s in significant:
        cover = next((t for t in kept if flagged_under[s] <= flagged_under[t]), None)
        if cover is None:
            kept.append(s)
        elif under[s] == under[cover]:
            same_as.setdefault(cover, []).append(s)

    shared: list[Finding] = []
    link: dict[int, list[str]] = {}  # id(finding) -> components to add to its related
    for s in sorted(kept):
        hosts = sorted(flagged_under[s])
        linked = [f for h in hosts for f in flagged_by_host[h]]
        for f in linked:
            link.setdefault(id(f), []).append(s)
        k, n = len(hosts), len(under[s])
        evidence = [
            Evidence("flagged_under", k, "hosts", baseline=round(n * K / N, 2)),
            Evidence("hosts_under", n, "hosts"),
            Evidence("flagged_fleet", K, "hosts"),
            Evidence("fleet_size", N, "hosts"),
        ]
        if same_as.get(s):
            evidence.append(Evidence("same_hosts_as", ",".join(sorted(same_as[s])), "component"))
        shared.append(Finding(
            kind=SHARED_COMPONENT_FAULT,
            severity=min((f.severity for f in linked), key=lambda sev: sev.rank),
            host=None,
            component=s,
            summary=(
                f"{k:,} of the {n:,} hosts under {s} {_symptom(linked)}, against {K:,} of {N:,} fleet-wide "
                f"(q = {_q_text(q[s])}): investigate {_noun(s)}, not the hosts"
            ),
            evidence=evidence,
            confidence=round(1.0 - q[s], 4),
            q_value=q[s],
            related=sorted({f"{f.host}/{f.component}" for f in linked}),
        ))

    if port_groups is not None:
        explained = [flagged_under[s] for s in kept]
        shared += _port_findings(findings, placements, fleet, port_groups, alpha, min_flagged, set(kept), explained,
                                 link, frozenset(flagged_by_host))
    return shared, _linked(findings, link)


def _linked(findings: list[Finding], link: dict[int, list[str]]) -> list[Finding]:
    updated = []
    for f in findings:
        extra = [s for s in link.get(id(f), []) if s not in f.related]
        updated.append(replace(f, related=[*f.related, *extra]) if extra else f)
    return updated


def _port_only(findings: list[Finding], placements: Mapping[str, Sequence[str]], fleet: list[str],
               port_groups: Iterable | None, alpha: float, min_flagged: int) -> tuple[list[Finding], list[Finding]]:
    """No flagged host: only the port test can name a component."""
    if port_groups is None:
        return [], list(findings)
    link: dict[int, list[str]] = {}
    shared = _port_findings(findings, placements, fleet, port_groups, alpha, min_flagged, set(), [], link)
    return shared, _linked(findings, link)


def _port_findings(findings: list[Finding], placements: Mapping[str, Sequence[str]], fleet: list[str],
                   port_groups: Iterable, alpha: float, min_flagged: int, named: set[str],
                   explained: list[set[str]], link: dict[int, list[str]],
                   flagged: frozenset[str] = frozenset()) -> list[Finding]:
    """The port test's findings for the components the host-level test left unexplained (plus the power-limit
    line); fills `link` with the host findings on their ports."""
    tests = port_switch_tests(port_groups, placements, fleet, min_flagged=min_flagged, exclude=flagged)
    depth: dict[str, int] = {}
    for host in fleet:
        for level, node in enumerate(placements.get(host) or ()):
            depth[node] = min(depth.get(node, level), level)
    by_node: dict[str, PortSwitchTest] = {}
    for t in tests:  # tests come best first: the first per node is its strongest metric
        if t.q <= alpha and t.node not in named and len(t.hosts) >= min_flagged:
            by_node.setdefault(t.node, t)
    kept: list[PortSwitchTest] = []
    for t in sorted(by_node.values(), key=lambda t: (t.q, depth.get(t.node, 0), t.node)):
        hosts = set(t.hosts)
        if not any(hosts <= other for other in explained) and not any(hosts <= set(k.hosts) for k in kept):
            kept.append(t)
    on_port: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        if f.host is not None:
            on_port.setdefault((f.host, f.component), []).append(f)
    out = []
    for t in sorted(kept, key=lambda t: t.node):
        linked = [f for port in t.ports for f in on_port.get(port, [])]
        for f in linked:
            link.setdefault(id(f), []).append(t.node)
        out.append(_port_finding(t, len(fleet), linked))
    limit = _limit_finding(tests, named | {t.node for t in kept}, alpha)
    return out + ([limit] if limit is not None else [])
