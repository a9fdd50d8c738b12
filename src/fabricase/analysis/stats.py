"""Pure fleet statistics: robust count baselines, exact upper-tail tests, robust z-scores, Benjamini-Hochberg.

Everything is vectorized over one group of comparable components (numpy arrays in, numpy arrays out) and
deterministic. The method is described in docs/fleet-statistics.md. Besides the fleet, one scalar test: a count
against a fixed rate limit (exceeds_rate_limit), for the rules that quote one.

Counts are events over an exposure (seconds, or gigabytes moved). Under the null hypothesis a component's
count is Poisson (or, when the fleet is overdispersed, negative binomial) with mean = fleet rate x exposure,
where the fleet rate is estimated from the *other* components (leave-one-out) after excluding apparent
outliers (iterative trimming), so one bad port can neither hide itself nor mask its peers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "PSEUDO_COUNT",
    "scipy_special",
    "RATE_LIMIT_ALPHA",
    "TRIM_ALPHA",
    "TRIM_ROUNDS",
    "CountTest",
    "benjamini_hochberg",
    "count_pvalues",
    "count_test",
    "dispersion",
    "exceeds_rate_limit",
    "expected_false_alarms",
    "negbin_upper_pvalues",
    "overdispersed",
    "poisson_upper_pvalues",
    "rate_limit_pvalue",
    "robust_baseline",
    "robust_subset",
    "normal_upper_tail",
    "robust_z",
]


def scipy_special() -> Any:
    """scipy.special, imported when a statistical test first needs it: 0.3 s of start-up that `fabricase --help`,
    `list` and the recording workers do not pay until then (scipy.stats would be 1.1 s)."""
    from scipy import special

    return special

PSEUDO_COUNT = 0.5  # added to the pooled count so that an all-zero fleet has a small positive rate, never 0
TRIM_ALPHA = 0.05  # components with a within-group BH q below this are left out of the baseline
TRIM_ROUNDS = 3
DISPERSION_TEST_P = 0.01  # Pearson chi-square dispersion test level that switches Poisson -> negative binomial
# False-alarm level of the fixed-limit rules (120 symbol errors an hour, ...): a port whose true rate is exactly at
# the limit is called above it once in a thousand captures; a port below the limit, less often still.
RATE_LIMIT_ALPHA = 0.001


def _arrays(counts: Sequence[float] | np.ndarray, exposure: Sequence[float] | np.ndarray) -> tuple[np.ndarray, ...]:
    c = np.asarray(counts, dtype=float)
    e = np.asarray(exposure, dtype=float)
    if c.shape != e.shape or c.ndim != 1:
        raise ValueError(f"counts and exposure must be 1-D arrays of one length, got {c.shape} and {e.shape}")
    if np.any(e <= 0) or not np.all(np.isfinite(e)):
        raise ValueError("exposure must be positive and finite")
    if np.any(c < 0) or not np.all(np.isfinite(c)):
        raise ValueError("counts must be non-negative and finite")
    return c, e


def _loo_rates(c: np.ndarray, e: np.ndarray, mask: np.ndarray, leave_one_out: bool) -> np.ndarray:
    """Per component: pooled rate (count + PSEUDO_COUNT) / exposure over the estimation set `mask`, without the
    component itself when it is in the set and leave_one_out is on."""
    sc, se = c[mask].sum(), e[mask].sum()
    own = mask & leave_one_out
    n_in = int(mask.sum())
    num = sc - np.where(own, c, 0.0) + PSEUDO_COUNT
    den = se - np.where(own, e, 0.0)
    if n_in <= 1 or np.any(den <= 0):  # a set of one: leaving it out leaves nothing; fall back to the set
        den = np.where(den > 0, den, se)
        num = np.where(den == se, sc + PSEUDO_COUNT, num)
    return num / den


def dispersion(counts, exposure, *, mask: np.ndarray | None = None, leave_one_out: bool = True) -> np.ndarray:
    """Negative-binomial dispersion phi per component (Var = mu + phi mu^2), method of moments on `mask`:
    phi = sum((x - mu)^2 - x) / sum(mu^2), with mu from the pooled rate; leave-one-out; clipped at 0."""
    c, e = _arrays(counts, exposure)
    m = np.ones(c.shape, bool) if mask is None else np.asarray(mask, bool)
    rate = (c[m].sum() + PSEUDO_COUNT) / e[m].sum()
    mu = rate * e
    a = (c - mu) ** 2 - c
    b = mu**2
    own = m & leave_one_out
    num = a[m].sum() - np.where(own, a, 0.0)
    den = b[m].sum() - np.where(own, b, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return np.clip(phi, 0.0, None)


def overdispersed(counts, exposure, *, mask: np.ndarray | None = None) -> bool:
    """Pearson chi-square test of the Poisson model on `mask`: sum((x - mu)^2 / mu) against chi2(n - 1) at
    DISPERSION_TEST_P."""
    c, e = _arrays(counts, exposure)
    m = np.ones(c.shape, bool) if mask is None else np.asarray(mask, bool)
    n = int(m.sum())
    if n < 3:
        return False
    rate = (c[m].sum() + PSEUDO_COUNT) / e[m].sum()
    mu = rate * e[m]
    x2 = float(np.sum((c[m] - mu) ** 2 / mu))
    return bool(scipy_special().chdtrc(n - 1, x2) < DISPERSION_TEST_P)  # chi-square survival, as scipy.stats.chi2.sf


def poisson_upper_pvalues(counts, exposure, *, leave_one_out: bool = True,
                          mask: np.ndarray | None = None) -> np.ndarray:
    """Exact P(X >= k), X ~ Poisson(rate x exposure), the rate pooled over `mask` (default: robust_subset)
    without the component under test. A count of 0 has p = 1."""
    c, e = _arrays(counts, exposure)
    m = robust_subset(c, e) if mask is None else np.asarray(mask, bool)
    mu = _loo_rates(c, e, m, leave_one_out) * e
    return np.where(c > 0, _poisson_sf(c - 1, mu), 1.0)


def _poisson_sf(k: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """P(X > k) for X ~ Poisson(mu): the regularized lower incomplete gamma P(k + 1, mu) (= poisson.sf)."""
    return np.where(k < 0, 1.0, scipy_special().pdtrc(np.maximum(k, 0), mu))


def rate_limit_pvalue(count: float, interval_s: float, limit_per_s: float) -> float:
    """P(X >= count), X ~ Poisson(limit_per_s x interval_s): how likely so many events are in the interval from a
    component whose true rate is exactly the limit (= scipy.stats.poisson.sf(count - 1, mu)). Count 0 has p = 1."""
    if not math.isfinite(interval_s) or interval_s <= 0:
        raise ValueError(f"interval must be positive and finite, got {interval_s!r}")
    if not math.isfinite(limit_per_s) or limit_per_s < 0:
        raise ValueError(f"limit must be non-negative and finite, got {limit_per_s!r}")
    if not math.isfinite(count) or count < 0:
        raise ValueError(f"count must be non-negative and finite, got {count!r}")
    if count <= 0:
        return 1.0
    return float(scipy_special().pdtrc(math.ceil(count) - 1, limit_per_s * interval_s))


def exceeds_rate_limit(count: float, interval_s: float, limit_per_s: float,
                       alpha: float = RATE_LIMIT_ALPHA) -> tuple[bool, float]:
    """(above, p): the exact one-sided Poisson test of "the true rate is at most limit_per_s" against `count`
    events in `interval_s` seconds; above when p <= alpha. A point estimate over the limit is not enough: one
    symbol error in 17 s is 212/h, yet p = 0.43 against 120/h."""
    p = rate_limit_pvalue(count, interval_s, limit_per_s)
    return p <= alpha, p


def _nbinom_sf(k: np.ndarray, size: np.ndarray, p: np.ndarray) -> np.ndarray:
    """P(X > k) for X ~ NB(size, p), real size: I_{1-p}(k + 1, size) (= scipy.stats.nbinom.sf)."""
    return np.where(k < 0, 1.0, scipy_special().betainc(np.maximum(k, 0) + 1.0, size, 1.0 - p))


def negbin_upper_pvalues(counts, exposure, *, leave_one_out: bool = True,
                         mask: np.ndarray | None = None) -> np.ndarray:
    """Exact P(X >= k), X negative binomial with mean rate x exposure and dispersion phi (Var = mu + phi mu^2),
    both estimated on `mask` (default: robust_subset) without the component under test. phi = 0 is Poisson."""
    c, e = _arrays(counts, exposure)
    m = robust_subset(c, e) if mask is None else np.asarray(mask, bool)
    mu = _loo_rates(c, e, m, leave_one_out) * e
    phi = dispersion(c, e, mask=m, leave_one_out=leave_one_out)
    return _nb_sf(c, mu, phi)


def _nb_sf(c: np.ndarray, mu: np.ndarray, phi: np.ndarray) -> np.ndarray:
    pois = _poisson_sf(c - 1, mu)
    phi_safe = np.where(phi > 0, phi, 1.0)
    size = 1.0 / phi_safe
    nb = _nbinom_sf(c - 1, size, size / (size + mu))
    return np.where(c > 0, np.where(phi > 0, nb, pois), 1.0)


def _pvalues(c: np.ndarray, e: np.ndarray, m: np.ndarray, leave_one_out: bool) -> tuple[np.ndarray, str, np.ndarray]:
    mu = _loo_rates(c, e, m, leave_one_out) * e
    if overdispersed(c, e, mask=m):
        phi = dispersion(c, e, mask=m, leave_one_out=leave_one_out)
        return _nb_sf(c, mu, phi), "negative-binomial", mu
    return np.where(c > 0, _poisson_sf(c - 1, mu), 1.0), "poisson", mu


def robust_subset(counts, exposure, *, trim_alpha: float = TRIM_ALPHA, rounds: int = TRIM_ROUNDS) -> np.ndarray:
    """The components the baseline is estimated from: start with all; each round, test every component against
    the others (model chosen as in count_pvalues) and leave out those with a within-group BH q < trim_alpha.
    Stops when the set is stable. In a clean fleet nothing is left out, so the baseline is not biased low."""
    c, e = _arrays(counts, exposure)
    m = np.ones(c.shape, bool)
    if c.size < 3 or not np.any(c > 0):
        return m
    for _ in range(rounds):
        p, _, _ = _pvalues(c, e, m, True)
        new = benjamini_hochberg(p) >= trim_alpha
        if new.sum() < max(2, c.size // 2):  # never trim the majority: then there is no "fleet" to speak of
            break
        if np.array_equal(new, m):
            break
        m = new
    return m


def robust_baseline(counts, exposure) -> float:
    """The fleet rate (events per unit exposure): (sum of counts + PSEUDO_COUNT) / sum of exposure over the
    robust subset (apparent outliers left out). Never 0."""
    c, e = _arrays(counts, exposure)
    m = robust_subset(c, e)
    return float((c[m].sum() + PSEUDO_COUNT) / e[m].sum())


class CountTest:
    """The result of count_test: p-values, the model used, expected counts (mu) and the fleet rate."""

    __slots__ = ("expected", "model", "pvalues", "rate", "subset")

    def __init__(self, pvalues: np.ndarray, model: str, expected: np.ndarray, rate: float, subset: np.ndarray):
        self.pvalues, self.model, self.expected, self.rate, self.subset = pvalues, model, expected, rate, subset


def count_test(counts, exposure, *, leave_one_out: bool = True) -> CountTest:
    """count_pvalues with its by-products: the model (`poisson` or `negative-binomial`), each component's
    expected count under the null, the robust fleet rate and the subset it was estimated from."""
    c, e = _arrays(counts, exposure)
    m = robust_subset(c, e)
    p, model, mu = _pvalues(c, e, m, leave_one_out)
    rate = float((c[m].sum() + PSEUDO_COUNT) / e[m].sum())
    return CountTest(p, model, mu, rate, m)


def count_pvalues(counts, exposure, *, leave_one_out: bool = True) -> np.ndarray:
    """Upper-tail p-values, Poisson unless the robust subset fails the Pearson dispersion test, then negative
    binomial with method-of-moments dispersion."""
    return count_test(counts, exposure, leave_one_out=leave_one_out).pvalues


def robust_z(values) -> np.ndarray:
    """0.6745 (x - median) / MAD. When the MAD is 0 (most values equal) the mean absolute deviation scaled by
    1.2533 stands in; when that is 0 too (all equal) every z is 0. NaN in, NaN out (and ignored)."""
    x = np.asarray(values, dtype=float)
    ok = np.isfinite(x)
    out = np.full(x.shape, np.nan)
    if not ok.any():
        return out
    med = np.median(x[ok])
    dev = np.abs(x[ok] - med)
    mad = np.median(dev)
    if mad > 0:
        out[ok] = 0.6745 * (x[ok] - med) / mad
        return out
    mean_ad = dev.mean()
    out[ok] = (x[ok] - med) / (1.2533 * mean_ad) if mean_ad > 0 else 0.0
    return out


def normal_upper_tail(z) -> np.ndarray:
    """P(Z >= z) for a standard normal: the one-sided p-value of a robust z-score. NaN in, 1 out."""
    z = np.asarray(z, dtype=float)
    return np.where(np.isfinite(z), scipy_special().ndtr(-np.nan_to_num(z)), 1.0)


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values): q_(i) = min_{j >= i} p_(j) n / j, capped at 1; monotone
    in p; q >= p. NaN p-values get NaN and do not count in n."""
    p = np.asarray(pvalues, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    n = int(ok.sum())
    if n == 0:
        return q
    pv = p[ok]
    qv = np.ones(n)
    # A p-value of 1 has q = 1 (every term from its rank on is >= 1), and when none is above 1 the ones rank last:
    # leaving them out of the sort changes no other rank, nor any q. A clean fleet's tests are mostly ones.
    rest = np.flatnonzero(pv != 1.0) if pv.max() <= 1.0 else np.arange(n)
    order = rest[np.argsort(pv[rest], kind="stable")]
    ranked = pv[order] * n / np.arange(1, order.size + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    qv[order] = np.minimum(ranked, 1.0)
    q[ok] = qv
    return q


def expected_false_alarms(qvalues, threshold: float) -> float:
    """Expected number of false alarms among the tests accepted at q <= threshold: the sum of their q-values,
    which never exceeds BH's guarantee of threshold x (number accepted)."""
    q = np.asarray(qvalues, dtype=float)
    acc = q[np.isfinite(q) & (q <= threshold)]
    return float(min(acc.sum(), threshold * acc.size))
