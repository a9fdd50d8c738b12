"""The port test of the shared-component check (fabricase.analysis.topology): a switch that hurts only a few of
its ports leaves hosts whose errors are too few to flag them one by one. The test takes each host's best port
p-value from the fleet test (Sidak-adjusted for its number of ports), and for each shared node the order-statistic
scan over its hosts: the chance that the k-th smallest of n independent uniform p-values is as small as observed,
P(U(k) <= p(k)) = I_p(k)(k, n - k + 1), minimized over k >= 2 and Bonferroni-adjusted for the scan.
Benjamini-Hochberg adjusts across every (node, metric) test. Each host's p-value is first calibrated against the
fleet outside the node: it is at least the (lower bound of the) share of outside hosts as extreme, so that what the
fleet model underrates but the fleet shows often (one event on an idle port of a 10,000-host fleet) is not a
switch. Method and measured power: docs/topology-and-drift.md.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fabricase.analysis.stats import scipy_special

__all__ = [
    "CALIBRATION_LEVEL",
    "EVIDENCE_P",
    "HOST_P_FLOOR",
    "PortSwitchTest",
    "benjamini_hochberg",
    "hosts_needed",
    "port_switch_tests",
    "scan_pvalue",
]

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


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH q-values, in the order given (fabricase.analysis.stats.benjamini_hochberg, as a list)."""
    from fabricase.analysis.stats import benjamini_hochberg as bh

    return [float(q) for q in bh(list(p_values))]


def scan_pvalue(host_p: Sequence[float], n: int, *, min_k: int = 2) -> tuple[float, int]:
    """(p, k): the order-statistic scan over the n hosts under one component, host_p the p-values of those with
    any evidence (the others count as 1). For each k >= min_k, P(U(k) <= p(k)) for the k-th smallest of n
    independent uniforms, I_p(k)(k, n - k + 1); the smallest, times the n - min_k + 1 values of k scanned
    (Bonferroni), capped at 1, and the k it came from (0 when nothing was scanned)."""
    betainc = scipy_special().betainc  # the regularized incomplete beta

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
    return 0.0 if k <= 0 else float(scipy_special().chdtri(2 * k, level)) / 2


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
