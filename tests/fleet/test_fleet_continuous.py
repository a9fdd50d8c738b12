"""Robust z-scores for continuous measures (pause time, pause frames, CNP and ECN rates) in fleet statistics."""

from __future__ import annotations

import math

import numpy as np

from fabricase.analysis import stats
from fabricase.analysis.fleet import fleet_findings
from fabricase.models import MetricSample, Severity

INTERVAL = 5.0
PAUSE_US = "pfc.tx_pause_us.p3"


def _rate_sample(host, comp, metric, per_s, unit):
    delta = per_s * INTERVAL
    return MetricSample(host, comp, metric, delta, unit, "cmd:ethtool-stats", delta, per_s)


def _fleet(seed, *, hot=None, metric=PAUSE_US, unit="us", hot_rate=400_000.0, share_max=0.05):
    """100 hosts x 2 RoCE ports: time paused per second heavy-tailed between 0 and share_max of the time."""
    rng = np.random.default_rng(seed)
    fleet = {}
    for h in range(100):
        host, samples = f"gpu{h:04d}", []
        for p in range(2):
            comp = f"netdev:ens{p}np{p}"
            rate = min(rng.pareto(1.5) * 2_000.0, share_max * 1e6)
            if (h, p) == hot:
                rate = hot_rate
            samples.append(_rate_sample(host, comp, metric, rate, unit))
            samples.append(MetricSample(host, comp, "speed", 400_000, "Mb/s", f"/sys/class/net/ens{p}np{p}/speed"))
        fleet[host] = samples
    return fleet


def test_normal_upper_tail():
    assert stats.normal_upper_tail([0.0])[0] == 0.5
    assert math.isclose(stats.normal_upper_tail([6.0])[0], 9.865876e-10, rel_tol=1e-5)
    assert stats.normal_upper_tail([float("nan")])[0] == 1.0


def test_one_port_paused_40_percent_is_a_major_congestion_outlier():
    findings = fleet_findings(_fleet(1, hot=(42, 1)))
    assert [(f.kind, f.host, f.component, f.severity) for f in findings] == [
        ("congestion-outlier", "gpu0042", "netdev:ens1np1", Severity.MAJOR)]
    f = findings[0]
    ev = {e.metric: e for e in f.evidence}
    assert ev[f"{PAUSE_US}.rate"].value == 400_000 and ev[f"{PAUSE_US}.robust_z"].value > 3.5
    assert ev["fleet.comparable_class"].value == "400000 Mb/s" and "PFC storm" in f.summary
    assert f.q_value is not None and f.q_value <= 0.01


def test_heavy_tailed_clean_fleets_raise_nothing():
    # Up to 5% of the time paused is a congested fabric doing its job, not a storm: below the floor.
    for seed in range(10):
        assert fleet_findings(_fleet(seed)) == []


def test_a_port_far_above_the_fleet_but_under_the_floor_is_not_reported():
    assert fleet_findings(_fleet(2, hot=(3, 0), hot_rate=90_000.0)) == []


def test_ecn_hotspot_is_context_not_a_fault():
    findings = fleet_findings(_fleet(3, hot=(7, 0), metric="ecn.rx_marked", unit="packets", hot_rate=500_000.0))
    assert [(f.kind, f.host, f.severity) for f in findings] == [("congestion-outlier", "gpu0007", Severity.INFO)]
