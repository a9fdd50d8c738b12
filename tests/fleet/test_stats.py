"""Fleet statistics (fabricase.analysis.stats) on hand-made cases with known answers, and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from fabricase.analysis import stats

# --- Benjamini-Hochberg -------------------------------------------------------------------------------------

def test_bh_hand_table():
    # p sorted: 0.01, 0.02, 0.03, 0.04, 0.5; n = 5 -> p n / rank = 0.05, 0.05, 0.05, 0.05, 0.5
    p = [0.04, 0.01, 0.5, 0.03, 0.02]
    assert np.allclose(stats.benjamini_hochberg(p), [0.05, 0.05, 0.5, 0.05, 0.05])


def test_bh_step_up_minimum():
    # 0.001*3/1 = 0.003; 0.04*3/2 = 0.06; 0.045*3/3 = 0.045 -> the second takes the later, smaller 0.045
    assert np.allclose(stats.benjamini_hochberg([0.001, 0.04, 0.045]), [0.003, 0.045, 0.045])


def test_bh_ignores_nan():
    # n = 2 (NaN does not count): 0.8 * 2 / 1 = 1.6 -> the step-up minimum 0.9
    q = stats.benjamini_hochberg([0.9, np.nan, 0.8])
    assert q[0] == pytest.approx(0.9) and q[2] == pytest.approx(0.9) and math.isnan(q[1])
    assert stats.benjamini_hochberg([]).size == 0


def test_bh_matches_scipy():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=200) ** 3
    assert np.allclose(stats.benjamini_hochberg(p), sst.false_discovery_control(p, method="bh"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=60))
def test_bh_properties(p):
    p = np.array(p)
    q = stats.benjamini_hochberg(p)
    assert np.all(q >= p - 1e-15) and np.all(q <= 1.0)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(q[order]) >= -1e-15)  # monotone in p order


def test_expected_false_alarms():
    q = np.array([0.001, 0.004, 0.2, np.nan])
    assert stats.expected_false_alarms(q, 0.01) == pytest.approx(0.005)
    assert stats.expected_false_alarms(q, 0.0001) == 0.0
    assert stats.expected_false_alarms([0.01, 0.01], 0.01) <= 0.01 * 2


# --- robust z -----------------------------------------------------------------------------------------------

def test_robust_z_hand():
    # median 3, |dev| = 2,1,0,1,97 -> MAD 1
    z = stats.robust_z([1, 2, 3, 4, 100])
    assert np.allclose(z, 0.6745 * np.array([-2, -1, 0, 1, 97]))


def test_robust_z_mad_zero_fallback_and_nan():
    z = stats.robust_z([5, 5, 5, 5, 9, np.nan])
    # median 5, MAD 0, mean abs dev = 4/5 -> z = (x - 5) / (1.2533 * 0.8)
    assert z[4] == pytest.approx(4 / (1.2533 * 0.8)) and z[0] == 0 and math.isnan(z[5])
    assert np.all(stats.robust_z([7, 7, 7]) == 0)


# --- count tests --------------------------------------------------------------------------------------------

def test_poisson_pvalue_hand():
    # 9 components with 1 event in 10 s each, one with 10: LOO rate for the odd one = (9 + 0.5) / 90 s
    counts = [1] * 9 + [10]
    exposure = [10.0] * 10
    mask = np.ones(10, bool)
    p = stats.poisson_upper_pvalues(counts, exposure, mask=mask)
    mu = (9 + 0.5) / 90 * 10
    assert p[9] == pytest.approx(sst.poisson.sf(9, mu))
    # by hand: P(X >= 10) = 1 - sum_{k<10} e^-mu mu^k / k!
    by_hand = 1 - sum(math.exp(-mu) * mu**k / math.factorial(k) for k in range(10))
    assert p[9] == pytest.approx(by_hand, rel=1e-6)
    # the others: rate from 8 ones + the ten
    mu_other = (8 + 10 + 0.5) / 90 * 10
    assert p[0] == pytest.approx(1 - math.exp(-mu_other))


def test_poisson_zero_count_is_one():
    p = stats.poisson_upper_pvalues([0, 0, 3], [1.0, 1.0, 1.0], mask=np.ones(3, bool))
    assert p[0] == 1.0 and p[1] == 1.0 and p[2] < 1


def test_leave_one_out_matters():
    counts = [0] * 9 + [30]
    e = [5.0] * 10
    m = np.ones(10, bool)
    loo = stats.poisson_upper_pvalues(counts, e, mask=m)[9]
    pooled = stats.poisson_upper_pvalues(counts, e, mask=m, leave_one_out=False)[9]
    assert loo < pooled


def test_negbin_hand():
    rng = np.random.default_rng(0)
    c = rng.negative_binomial(2, 2 / (2 + 3.0), size=200).astype(float)
    e = np.full(200, 1.0)
    m = np.ones(200, bool)
    p = stats.negbin_upper_pvalues(c, e, mask=m)
    phi = stats.dispersion(c, e, mask=m)
    rate = (c.sum() - c[0] + 0.5) / 199
    k = 1 / phi[0]
    assert p[0] == pytest.approx(sst.nbinom.sf(c[0] - 1, k, k / (k + rate)) if c[0] > 0 else 1.0)
    assert 0.2 < phi.mean() < 1.0  # true phi = 1/2


def test_model_choice():
    rng = np.random.default_rng(1)
    e = np.full(500, 5.0)
    assert stats.count_test(rng.poisson(1.0, 500), e).model == "poisson"
    heavy = rng.poisson(rng.gamma(0.5, 2.0, 500) * 1.0)
    assert stats.count_test(heavy, e).model == "negative-binomial"


def test_robust_baseline_ignores_outlier():
    counts = np.r_[np.ones(99), 10_000]
    e = np.ones(100)
    assert stats.robust_baseline(counts, e) == pytest.approx((99 + 0.5) / 99)
    assert stats.robust_baseline(np.zeros(10), np.ones(10)) == pytest.approx(0.05)


def test_bad_input():
    with pytest.raises(ValueError):
        stats.count_pvalues([1, 2], [1.0, 0.0])
    with pytest.raises(ValueError):
        stats.count_pvalues([1, 2], [1.0])


def test_clean_poisson_fleets_false_discoveries():
    """1,000-component clean Poisson fleets: on average at most ~alpha false discoveries per fleet."""
    total = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        e = rng.uniform(4.0, 6.0, 1000)
        c = rng.poisson(rng.choice([0.01, 0.2, 1.0]) * e)
        total += int((stats.benjamini_hochberg(stats.count_pvalues(c, e)) <= 0.01).sum())
    assert total / 30 <= 0.1


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=10_000), st.floats(min_value=0.001, max_value=3.0))
def test_clean_fleet_property(seed, rate):
    rng = np.random.default_rng(seed)
    e = rng.uniform(1.0, 10.0, 1000)
    c = rng.poisson(rate * e)
    p = stats.count_pvalues(c, e)
    assert np.all((p >= 0) & (p <= 1))
    assert int((stats.benjamini_hochberg(p) <= 0.01).sum()) <= 2
