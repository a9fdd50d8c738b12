"""Topology correlation: do the hosts with link faults sit under one shared component (a leaf switch, an AWS
network node, a GCP block) more than chance allows? If so, the shared component is named in a finding of its
own and the host findings point at it, so that the ticket asks the provider to look at the switch rather than
replace eight hosts.

Pure: findings and placements in, findings out. The test for each shared node S is the hypergeometric upper
tail P(X >= k) with N hosts in the fleet, K of them flagged, n under S and k flagged under S (the chance that
n hosts picked at random from the fleet hold k or more of the flagged ones), computed exactly with integer
binomials (same value as scipy.stats.hypergeom.sf(k - 1, N, K, n), without importing scipy.stats, which
alone costs 0.6 s). Benjamini-Hochberg adjusts the p-values across every shared node of the fleet.

A switch that hurts only a few of its ports leaves hosts whose errors are too few to flag them one by one. The
port test (port_switch_tests) catches it: each host's best port p-value from the fleet test (Sidak-adjusted for
its number of ports), and for each shared node the order-statistic scan over its hosts: the chance that the k-th
smallest of n independent uniform p-values is as small as observed, P(U(k) <= p(k)) = I_p(k)(k, n - k + 1),
minimized over k >= 2 and Bonferroni-adjusted for the scan. Benjamini-Hochberg adjusts across every (node,
metric) test. Each host's p-value is first calibrated against the fleet outside the node: it is at least the
(lower bound of the) share of outside hosts as extreme, so that what the fleet model underrates but the fleet shows
often (one event on an idle port of a 10,000-host fleet) is not a switch. Method and measured power:
docs/topology-and-drift.md.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from fabricase.models import Evidence, Finding, Severity

__all__ = [
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
# No single host's port counts for more than this in the port test: the fleet model's far tail is not trusted
# (real fleets are more heterogeneous than any fitted model), so a switch is named on several hosts, never one.
HOST_P_FLOOR = 1e-6
# A host's p-value is at least the lower bound, at this confidence, of the share of hosts outside its component as
# extreme as it (_calibrated).
CALIBRATION_LEVEL = 0.95
# A host with a port this far out (Sidak-adjusted) is "some evidence" under its switch: the power-limit line is
# written for the strongest unnamed switch with one.
EVIDENCE_P = 0.01
_HOST = operator.itemgetter(0)  # of a (host, component) pair
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


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH q-values, in the order given (fabricase.analysis.stats.benjamini_hochberg, as a list)."""
    from fabricase.analysis.stats import benjamini_hochberg as bh

    return [float(q) for q in bh(list(p_values))]


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


def scan_pvalue(host_p: Sequence[float], n: int, *, min_k: int = 2) -> tuple[float, int]:
    """(p, k): the order-statistic scan over the n hosts under one component, host_p the p-values of those with
    any evidence (the others count as 1). For each k >= min_k, P(U(k) <= p(k)) for the k-th smallest of n
    independent uniforms, I_p(k)(k, n - k + 1); the smallest, times the n - min_k + 1 values of k scanned
    (Bonferroni), capped at 1, and the k it came from (0 when nothing was scanned)."""
    from scipy.special import betainc  # the regularized incomplete beta; scipy.special is already loaded by stats

    ranked = sorted(host_p)[:n]
    best, best_k = 1.0, 0
    for k in range(max(min_k, 1), len(ranked) + 1):
        tail = float(betainc(k, n - k + 1, ranked[k - 1])) if ranked[k - 1] < 1.0 else 1.0
        if tail < best:
            best, best_k = tail, k
    return min(1.0, best * max(n - min_k + 1, 1)), best_k


def _sidak(p: float, ports: int) -> float:
    """The chance that the best of `ports` independent ports has p-value p or smaller: 1 - (1 - p)^ports."""
    if p >= 1.0:
        return 1.0
    return max(-math.expm1(max(ports, 1) * math.log1p(-p)), HOST_P_FLOOR)


@dataclass(frozen=True)
class _FleetTail:
    """One group's hosts as the fleet test saw them: each host's best port p-value (Sidak-adjusted, floored as in
    the port test), hosts flagged on their own left out. How often the fleet outside a switch is as extreme as a
    host under it calibrates that host's p-value (_calibrated)."""

    best: dict[str, float]
    ranked: np.ndarray  # the values of best, ascending

    @classmethod
    def of(cls, group, per_host: Counter, exclude: frozenset[str]) -> _FleetTail | None:
        if group.pvalues is None:
            return None
        best: dict[str, float] = {}
        for (host, _), p in zip(group.order, group.pvalues.tolist(), strict=True):
            if host not in exclude:
                p_host = _sidak(p, per_host[host])
                if p_host < best.get(host, 2.0):
                    best[host] = p_host
        return cls(best, np.sort(np.fromiter(best.values(), float, len(best))))


def _poisson_lower(k: int, level: float = CALIBRATION_LEVEL) -> float:
    """The one-sided lower confidence bound (at `level`) of a Poisson mean from k events: chi2.ppf(1 - level,
    2k) / 2, as scipy.stats.chi2.ppf, through scipy.special's inverse."""
    from scipy.special import chdtri

    return 0.0 if k <= 0 else float(chdtri(2 * k, level)) / 2


def _calibrated(best: dict[str, tuple[float, int]], members: frozenset[str],
                tail: _FleetTail | None) -> dict[str, tuple[float, int]]:
    """Each host's p-value, raised to how often the fleet outside the component is as extreme: the lower bound
    (CALIBRATION_LEVEL) of the share of outside hosts whose own best port is at that p-value or below. The
    fleet model underrates rare events where a fleet is large and heterogeneous (one event on an idle port: 3.8e-6
    by the model, yet 28 of 10,000 clean hosts had one), and two such hosts under one of 625 switches then looked
    like a switch fault. Where no outside host is as extreme, the p-value stands: a bad switch is found as before."""
    if tail is None:
        return best
    inside = sorted(tail.best[h] for h in members if h in tail.best)
    outside = len(tail.ranked) - len(inside)
    if outside <= 0:
        return best
    out = {}
    for host, (p, i) in best.items():
        k = int(np.searchsorted(tail.ranked, p, side="right")) - bisect.bisect_right(inside, p)
        out[host] = (max(p, min(_poisson_lower(k) / outside, 1.0)), i) if k > 0 else (p, i)
    return out


@dataclass(frozen=True)
class PortSwitchTest:
    """The port test of one shared component for one error metric: the scan's p and its BH q over every such
    test of the fleet, the k hosts whose ports made it (best first) and what those ports counted."""

    node: str
    metric: str
    hosts_under: int
    p: float
    q: float
    hosts: tuple[str, ...]
    ports: tuple[tuple[str, str], ...]  # (host, component) of each host's best port, in the order of hosts
    count: float  # events on those ports
    expected: float  # events the fleet rate expects on them
    interval: float  # seconds (the longest of those ports' intervals)
    evidence_hosts: int  # hosts under the node with a port at Sidak p <= EVIDENCE_P
    host_p: tuple[float, ...]  # Sidak-adjusted best-port p of the hosts with any evidence, ascending


def _outside_pvalues(group, inside: np.ndarray) -> np.ndarray:
    """Upper-tail p-values of the members `inside` (a boolean mask), against the fleet rate (and dispersion, when
    the fleet is overdispersed) estimated from the robust subset of the members outside: a bad switch's own ports
    neither lift the baseline nor widen its spread."""
    from fabricase.analysis import stats

    mask = group.subset & ~inside
    if mask.sum() < 2:
        mask = ~inside
    c, e = group.counts[inside], group.exposure[inside]
    cc = np.concatenate([c, group.counts[mask]])
    ee = np.concatenate([e, group.exposure[mask]])
    fit = np.concatenate([np.zeros(c.size, bool), np.ones(int(mask.sum()), bool)])
    if stats.overdispersed(cc, ee, mask=fit):
        return stats.negbin_upper_pvalues(cc, ee, mask=fit)[: c.size]
    return stats.poisson_upper_pvalues(cc, ee, mask=fit)[: c.size]


def port_switch_tests(groups: Iterable, placements: Mapping[str, Sequence[str]], all_hosts: Sequence[str], *,
                      min_flagged: int = 2, exclude: frozenset[str] = frozenset()) -> list[PortSwitchTest]:
    """The port test for every (shared component, error metric) of the fleet, ordered by (q, node, metric).

    groups: fleet.PortGroup records. Per component S and group: each port under S is tested against the fleet
    outside S; each host's best port p, Sidak-adjusted for its ports in the group (floored at HOST_P_FLOOR); the
    scan over S's hosts (scan_pvalue); Benjamini-Hochberg over all. A component holding more than half the fleet
    is not tested: the fleet it would be compared with is smaller than itself.

    exclude: hosts flagged on their own (a host-level finding). They are not evidence here: their floored p-values
    would make any two of them under one component look impossible by chance, when several independently bad
    hosts land together by chance often (the host-level test asks that, conditioned on how many are flagged)."""
    fleet = sorted(set(all_hosts))
    N = len(fleet)
    under: dict[str, set[str]] = {}
    for host in fleet:
        for node in placements.get(host) or ():
            under.setdefault(node, set()).add(host)
    nodes = sorted(s for s, hosts in under.items() if min_flagged <= len(hosts) and 2 * len(hosts) <= N)
    # Components with the same hosts (a leaf and its rack) are one hypothesis: one test in Benjamini-Hochberg's
    # count, its result given to each.
    same: dict[frozenset[str], list[str]] = {}
    for node in nodes:
        same.setdefault(frozenset(under[node]), []).append(node)
    groups = list(groups)
    if not same or not groups:
        return []
    raw = []
    # Each group's members as host numbers, and each group's ports per host, once: the loop below runs for every
    # (component, group) of the fleet, and a membership mask indexed by host number is one numpy gather.
    number = {h: i for i, h in enumerate(fleet)}
    hosts_of = [list(map(_HOST, g.order)) for g in groups]
    member_hosts = [np.fromiter(map(number.get, hs, itertools.repeat(-1)), np.int64, len(hs)) for hs in hosts_of]
    ports_per_host = [Counter(hs) for hs in hosts_of]
    counted = [g.counts > 0 for g in groups]
    tails = [_FleetTail.of(g, per_host, exclude) for g, per_host in zip(groups, ports_per_host, strict=True)]
    for members, names in sorted(same.items(), key=lambda kv: kv[1][0]):
        inside_mask = np.zeros(N + 1, dtype=bool)  # the last slot: hosts outside the fleet (number -1)
        inside_mask[[number[h] for h in members if h in number]] = True
        for gi, (g, ids, per_host, nonzero) in enumerate(zip(groups, member_hosts, ports_per_host, counted,
                                                              strict=True)):
            hosts = inside_mask[ids]
            moved = hosts & nonzero
            best: dict[str, tuple[float, int]] = {}  # host -> (Sidak p of its best port, member index)
            if moved.any() and (~hosts).sum() >= 2:
                inside = np.flatnonzero(hosts)
                pv = _outside_pvalues(g, hosts)
                for i, p in zip(inside, pv, strict=True):
                    h = g.order[i][0]
                    if h in exclude:
                        continue
                    p_host = _sidak(float(p), per_host[h])
                    if p_host < 1.0 and (h not in best or p_host < best[h][0]):
                        best[h] = (p_host, int(i))
            if best:
                best = _calibrated(best, members, tails[gi])
            evid = sorted((p, h, i) for h, (p, i) in best.items())
            p, k = scan_pvalue([x for x, _, _ in evid], len(members), min_k=min_flagged)
            raw.append((names, g, p, k, evid))
    q = benjamini_hochberg([r[2] for r in raw])
    out = []
    for (names, g, p, k, evid), qv in zip(raw, q, strict=True):
        top = [i for _, _, i in evid[:k]]
        rate = float((g.counts[g.subset].sum() + 0.5) / g.exposure[g.subset].sum())
        out += [PortSwitchTest(
            node, g.metric, len(under[node]), p, qv, tuple(g.order[i][0] for i in top),
            tuple(g.order[i] for i in top), float(sum(g.counts[i] for i in top)),
            float(sum(rate * g.exposure[i] for i in top)), float(max((g.intervals[i] for i in top), default=0.0)),
            sum(x <= EVIDENCE_P for x, _, _ in evid), tuple(x for x, _, _ in evid)) for node in names]
    out.sort(key=lambda t: (t.q, t.node, t.metric))
    return out


def hosts_needed(host_p: float, n: int, tests: int, *, alpha: float = 0.01, min_k: int = 2) -> int | None:
    """The fewest of n hosts, each with a port at (Sidak) p-value host_p, that make the port test of their switch
    significant among `tests` such tests (alpha / tests: the first rejection of Benjamini-Hochberg); None when even
    all n would not."""
    for k in range(max(min_k, 1), n + 1):
        if scan_pvalue([host_p] * k, n, min_k=min_k)[0] * max(tests, 1) <= alpha:
            return k
    return None


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
