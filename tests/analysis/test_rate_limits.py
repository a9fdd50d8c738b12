"""Rules that quote a fixed rate limit decide with an exact Poisson test against it (RATE_LIMIT_ALPHA), never on
the point estimate: one symbol error in 17 s reads 212/h, but a port at exactly 120/h shows that much 43% of the
time. Each rate-limited rule has a case just above the limit's point estimate that is not evidence (it was major
before), and one that is."""

from __future__ import annotations

import math
import re

import pytest
from capture_builder import make_capture, write_host
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import poisson

from fabricase.analysis import analyze
from fabricase.analysis import rdma as rdma_rules
from fabricase.analysis.stats import RATE_LIMIT_ALPHA, exceeds_rate_limit, rate_limit_pvalue
from fabricase.models import Severity

IB = "/sys/class/infiniband"
INTERVAL_S = 17.0


def _port(dev: str, increases: dict[str, int]) -> dict[tuple[int, str], str]:
    """One ACTIVE InfiniBand port whose counters (`counters/<name>` or `hw_counters/<name>`) rise by `increases`."""
    base = f"{IB}/{dev}/ports/1/"
    files = {(0, base + "link_layer"): "InfiniBand\n"}
    for snap in (0, 1):
        files[(snap, base + "state")] = "4: ACTIVE\n"
        files[(snap, base + "phys_state")] = "5: LinkUp\n"
        files[(snap, base + "rate")] = "400 Gb/sec (4X NDR)\n"
        for rel in ("counters/symbol_error", "counters/port_rcv_errors", "hw_counters/local_ack_timeout_err"):
            files[(snap, base + rel)] = "0\n"
        for rel, delta in increases.items():
            files[(snap, base + rel)] = f"{delta if snap else 0}\n"
    return files


def _findings(tmp_path, increases: dict[str, int], kind: str, *, ports: int = 1, interval_s: float = INTERVAL_S):
    files: dict[tuple[int, str], str] = {}
    for i in range(ports):
        files |= _port(f"mlx5_{i}", increases if i == 0 else {})
    hc = write_host(tmp_path, "gpu001", files, interval_s=interval_s)
    rule = {"rdma-symbol-errors": rdma_rules.rdma_symbol_errors, "rdma-link-flap": rdma_rules.rdma_link_flap,
            "rdma-port-errors": rdma_rules.rdma_port_errors,
            "rdma-transport-errors": rdma_rules.rdma_transport_errors}[kind]
    return rule(hc, rdma_rules.samples(hc))


# ------------------------------------------------------------------------------------------------- the function


def test_one_symbol_error_in_17_s_is_no_evidence_against_120_per_hour():
    above, p = exceeds_rate_limit(1, 17, 120 / 3600)
    assert not above and p == pytest.approx(0.4326, abs=1e-4)
    above, p = exceeds_rate_limit(40, 17, 120 / 3600)
    assert above and p < 1e-50


def test_matches_scipy_poisson_sf_and_the_boundary_is_where_p_crosses_alpha():
    mu = 5 / 60 * INTERVAL_S  # link_error_recovery at exactly 5/min
    for k in range(0, 30):
        assert rate_limit_pvalue(k, INTERVAL_S, 5 / 60) == pytest.approx(poisson.sf(k - 1, mu), rel=1e-9, abs=1e-300)
    first = next(k for k in range(100) if exceeds_rate_limit(k, INTERVAL_S, 5 / 60)[0])
    assert first == 7  # 6 retrains in 17 s: p = 0.0034; 7: p = 0.00067 <= 0.001
    assert rate_limit_pvalue(first - 1, INTERVAL_S, 5 / 60) > RATE_LIMIT_ALPHA >= rate_limit_pvalue(
        first, INTERVAL_S, 5 / 60)
    assert exceeds_rate_limit(6, INTERVAL_S, 5 / 60, alpha=0.01)[0]  # alpha is a parameter


def test_edges():
    assert exceeds_rate_limit(0, 5, 10) == (False, 1.0)
    assert exceeds_rate_limit(1, 5, 0) == (True, 0.0)  # a limit of zero: any event is above it
    for bad in ((1, 0, 1), (1, -1, 1), (1, math.inf, 1), (1, 5, -1), (-1, 5, 1), (math.nan, 5, 1)):
        with pytest.raises(ValueError):
            exceeds_rate_limit(*bad)


@given(st.integers(0, 5000), st.floats(0.01, 3600), st.floats(1e-4, 1000))
def test_p_is_a_probability_and_monotone_in_count(count, interval_s, limit):
    p, p_next = rate_limit_pvalue(count, interval_s, limit), rate_limit_pvalue(count + 1, interval_s, limit)
    assert 0.0 <= p_next <= p <= 1.0
    # once above the limit, more events never bring it back under
    assert exceeds_rate_limit(count + 1, interval_s, limit)[0] >= exceeds_rate_limit(count, interval_s, limit)[0]


@given(st.integers(1, 2000), st.floats(0.01, 3600), st.floats(1e-4, 1000), st.floats(1.0, 10.0))
def test_p_rises_with_the_limit_and_the_interval(count, interval_s, limit, factor):
    p = rate_limit_pvalue(count, interval_s, limit)
    assert rate_limit_pvalue(count, interval_s, limit * factor) >= p
    assert rate_limit_pvalue(count, interval_s * factor, limit) >= p


# ------------------------------------------------------------------------------------------------------ the rules

# (kind, increases below: point estimate over the limit but p > alpha, increases above: p <= alpha)
CASES = [
    ("rdma-symbol-errors", {"counters/symbol_error": 1}, {"counters/symbol_error": 40}),  # 120/h
    ("rdma-link-flap", {"counters/link_error_recovery": 2}, {"counters/link_error_recovery": 10}),  # 5/min
    ("rdma-port-errors", {"counters/port_rcv_errors": 200}, {"counters/port_rcv_errors": 260}),  # 10/s
    ("rdma-port-errors", {"counters/port_xmit_discards": 1750}, {"counters/port_xmit_discards": 1900}),  # 100/s
    ("rdma-transport-errors", {"hw_counters/local_ack_timeout_err": 25},
     {"hw_counters/local_ack_timeout_err": 40}),  # 1/s
    ("rdma-transport-errors", {"hw_counters/roce_slow_restart": 200}, {"hw_counters/roce_slow_restart": 260}),  # 10/s
]


@pytest.mark.parametrize(("kind", "below", "above"), CASES, ids=[f"{k}-{next(iter(b))}" for k, b, _ in CASES])
def test_each_rate_limited_rule_below_and_above(tmp_path, kind, below, above):
    (low,) = _findings(tmp_path / "below", below, kind)
    (high,) = _findings(tmp_path / "above", above, kind)
    name = next(iter(below)).rsplit("/", 1)[-1]
    metric = next(m for m, s in rdma_rules.RATE_LIMITS.items() if m in {e.metric.removesuffix(".delta")
                                                                       for e in low.evidence})
    limit = rdma_rules.RATE_LIMITS[metric]
    assert low.summary.startswith(f"mlx5_0/1: {name} +{below[next(iter(below))]} (")
    # the point estimate is over the limit: before the test, this was major
    assert low.evidence[0].value / INTERVAL_S > limit.per_s
    assert (low.kind, low.severity) == (kind, Severity.MINOR)
    assert f"; not above the {limit.per_unit:g}/{limit.unit} limit, p = " in low.summary
    assert (high.kind, high.severity) == (kind, Severity.MAJOR)
    assert f"; above the {limit.per_unit:g}/{limit.unit} limit, p = " in high.summary
    for f, expect_above in ((low, False), (high, True)):
        delta, p_limit = f.evidence
        assert delta.metric == f"{metric}.delta" and p_limit.metric == f"{metric}.p_limit"
        assert (p_limit.unit, p_limit.baseline, p_limit.source, p_limit.snapshot) == (
            "p-value", RATE_LIMIT_ALPHA, delta.source, 1)
        assert (p_limit.value <= RATE_LIMIT_ALPHA) is expect_above
        stated = float(re.search(r"p = ([0-9.e+-]+)\)", f.summary).group(1))
        assert stated == pytest.approx(p_limit.value, rel=0.05)


def test_symbol_errors_summary_in_words(tmp_path):
    (low,) = _findings(tmp_path / "a", {"counters/symbol_error": 1}, "rdma-symbol-errors")
    assert low.summary == "mlx5_0/1: symbol_error +1 (212/h; not above the 120/h limit, p = 0.43) in 17 s"
    (high,) = _findings(tmp_path / "b", {"counters/symbol_error": 40}, "rdma-symbol-errors")
    assert high.summary == "mlx5_0/1: symbol_error +40 (8.47e+03/h; above the 120/h limit, p = 9.6e-59) in 17 s"


@pytest.mark.parametrize(("kind", "increase"), [
    ("rdma-link-flap", {"counters/link_downed": 1}),
    ("rdma-port-errors", {"counters/local_link_integrity_errors": 1}),
    ("rdma-transport-errors", {"hw_counters/rnr_nak_retry_err": 1}),
])
def test_fatal_counters_stay_major_on_any_increase(tmp_path, kind, increase):
    (f,) = _findings(tmp_path, increase, kind)
    assert f.severity == Severity.MAJOR
    assert "limit" not in f.summary and not any(e.metric.endswith(".p_limit") for e in f.evidence)


def test_a_fatal_counter_keeps_the_port_major_when_its_limited_neighbour_is_below(tmp_path):
    (f,) = _findings(tmp_path, {"counters/link_downed": 1, "counters/link_error_recovery": 1}, "rdma-link-flap")
    assert f.severity == Severity.MAJOR
    assert f.summary.startswith("mlx5_0/1: link_downed +1 (3.53/min), link_error_recovery +1 (3.53/min; not above")


def test_no_interval_means_no_rate_to_test(tmp_path):
    files = _port("mlx5_0", {"counters/symbol_error": 40})
    hc = write_host(tmp_path, "gpu001", files, interval_s=None)
    samples = rdma_rules.samples(hc)
    findings = rdma_rules.rdma_symbol_errors(hc, samples)
    assert [(f.severity, f.summary) for f in findings] == [
        (Severity.MINOR, "mlx5_0/1: symbol_error +40 (no interval: not tested against the 120/h limit) between "
                         "snapshots")]
    assert [e.metric for e in findings[0].evidence] == ["phy.symbol_errors_uncorrected.delta"]


# --------------------------------------------------------------------------------------------- through analyze()


def _analyzed(tmp_path, increases):
    # Two ports: too few to judge against a fleet, so nothing downgrades the rule's own verdict as background.
    files = _port("mlx5_0", {}) | _port("mlx5_3", increases)
    hc = write_host(tmp_path, "gpu001", files, interval_s=INTERVAL_S)
    return [f for f in analyze(make_capture(tmp_path, [hc])) if f.component == "rdma:mlx5_3/1"]


def test_one_symbol_error_in_17_s_is_no_major_finding(tmp_path):
    findings = _analyzed(tmp_path, {"counters/symbol_error": 1})
    assert [(f.kind, f.severity) for f in findings] == [("rdma-symbol-errors", Severity.MINOR)]
    assert "within the fleet's background" not in findings[0].summary  # the rule decided, not the fleet


def test_forty_symbol_errors_in_17_s_are_a_major_finding(tmp_path):
    findings = {f.kind: f for f in _analyzed(tmp_path, {"counters/symbol_error": 40})}
    assert findings["rdma-symbol-errors"].severity == Severity.MAJOR


def test_the_docs_list_every_rate_limit_and_the_level():
    from pathlib import Path

    docs = Path(__file__).parents[2] / "docs"
    for name in ("findings.md", "fleet-statistics.md"):
        text = (docs / name).read_text()
        assert f"{RATE_LIMIT_ALPHA:g}" in text and "RATE_LIMIT_ALPHA" in text, name
        rows = re.findall(r"^\| `rdma-[a-z-]+` \| ([^|]+) \| ([0-9]+/[a-z]+) \|$", text, re.M)
        listed = {metric: limit for counter, limit in rows for metric in re.findall(r"`([^`]+)`", counter)}
        for metric, limit in rdma_rules.RATE_LIMITS.items():
            assert listed.get(metric) == f"{limit.per_unit:g}/{limit.unit}", (name, metric, rows)
