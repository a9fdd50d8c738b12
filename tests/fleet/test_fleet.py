"""Fleet outlier findings (fabricase.analysis.fleet) on synthetic fleets where the right answer is known."""

from __future__ import annotations

import time

import numpy as np
import pytest

from fabricase.analysis import findings_to_json
from fabricase.analysis.fleet import fleet_findings, is_error_metric, is_traffic_scaled
from fabricase.models import MetricSample, Severity

SYM = "phy.symbol_errors_uncorrected"
INTERVAL = 5.0


def _counter(host, component, metric, delta, interval=INTERVAL, unit="errors"):
    return MetricSample(host=host, component=component, metric=metric, value=float(delta), unit=unit,
                        source=f"/sys/class/infiniband/{component[5:].split('/')[0]}/ports/1/counters/x",
                        delta=float(delta), rate=delta / interval)


def _fleet(seed, hosts, ports=8, bad=None, factor=50.0, mean_rate=0.2, shape=0.7, metrics=(SYM,)):
    """hosts x ports RDMA ports; per-port rate gamma-distributed (heavy-tailed background); `bad` = (host
    index, port) gets factor x the mean rate."""
    rng = np.random.default_rng(seed)
    out = {}
    for h in range(hosts):
        host = f"gpu{h:04d}"
        samples = []
        for p in range(ports):
            comp = f"rdma:mlx5_{p}/1"
            gb = rng.uniform(1, 50)
            for metric in metrics:
                lam = rng.gamma(shape, mean_rate / shape)
                if bad == (h, p) and metric == metrics[0]:
                    lam = factor * mean_rate
                # transport errors scale with traffic (mean_rate per 25 GB), physical ones with time
                exposure = gb / 25 if is_traffic_scaled(metric) else INTERVAL
                samples.append(_counter(host, comp, metric, rng.poisson(lam * exposure)))
            samples.append(_counter(host, comp, "rx.bytes", 1e9 * gb, unit="bytes"))
        out[host] = samples
    return out


def test_metric_selection():
    assert is_error_metric(SYM) and is_error_metric("rx_crc_errors") and is_error_metric("link.down_events")
    assert is_error_metric("nvlink.replay_errors") and is_error_metric("rdma.ack_timeout")
    assert not is_error_metric("rx.bytes") and not is_error_metric("tx_packets") and not is_error_metric("cnp.sent")
    assert not is_error_metric("phy.fec_corrected_blocks")
    assert is_traffic_scaled("rdma.retransmits") and not is_traffic_scaled(SYM)


def test_one_bad_port_in_1000_heavy_tailed():
    fleet = _fleet(7, hosts=125, bad=(17, 3))
    findings = fleet_findings(fleet)
    assert [(f.host, f.component) for f in findings] == [("gpu0017", "rdma:mlx5_3/1")]
    f = findings[0]
    assert f.kind == "fleet-outlier" and f.severity in (Severity.MAJOR, Severity.CRITICAL)
    assert f.q_value is not None and f.q_value <= 0.01 and f.confidence == pytest.approx(1 - f.q_value, abs=1e-6)
    assert f.summary.startswith("rdma:mlx5_3/1 on gpu0017 logged ") and "1,000 ports" in f.summary
    metrics = [e.metric for e in f.evidence]
    assert metrics[:3] == [f"{SYM}.delta", f"{SYM}.rate", f"{SYM}.q_value"]
    assert "fleet.expected_false_alarms" in metrics
    assert f.evidence[1].baseline < f.evidence[1].value


def test_twenty_clean_fleets_at_most_one_false_alarm():
    total = 0
    for seed in range(20):
        total += len(fleet_findings(_fleet(100 + seed, hosts=125, metrics=(SYM, "rx.errors", "link.down_events"))))
    assert total <= 1


def test_critical_when_extreme():
    fleet = _fleet(3, hosts=64, bad=(5, 0), factor=1000.0, mean_rate=0.05)
    (f,) = fleet_findings(fleet)
    assert f.severity == Severity.CRITICAL and f.q_value < 1e-6


def test_small_fleet_says_so():
    fleet = {f"gpu{h}": [_counter(f"gpu{h}", "rdma:mlx5_0/1", SYM, 3 if h == 0 else 0)] for h in range(4)}
    (f,) = fleet_findings(fleet)
    assert f.kind == "fleet-too-small" and f.severity == Severity.INFO and f.host is None
    assert f.summary == "fleet statistics need at least 8 comparable components; got 4"


def test_all_zero_counts_no_findings():
    fleet = {f"gpu{h:03d}": [_counter(f"gpu{h:03d}", f"rdma:mlx5_{p}/1", SYM, 0) for p in range(8)]
             for h in range(32)}
    assert fleet_findings(fleet) == []


def test_interval_from_argument_when_rate_zero():
    # without rates there is no interval to infer: only the intervals argument makes the test possible
    fleet = _fleet(11, hosts=32, bad=(2, 2), factor=200.0)
    for samples in fleet.values():
        for s in samples:
            s.rate = None
    assert fleet_findings(fleet) == []  # no interval known at all: nothing to test
    found = fleet_findings(fleet, intervals={h: INTERVAL for h in fleet})
    assert [(f.host, f.component) for f in found] == [("gpu0002", "rdma:mlx5_2/1")]


def test_per_gb_for_traffic_scaled_metrics():
    fleet = _fleet(5, hosts=32, bad=(9, 1), metrics=("rdma.retransmits",), factor=60.0)
    (f,) = fleet_findings(fleet)
    assert (f.host, f.component) == ("gpu0009", "rdma:mlx5_1/1")
    assert any(e.unit.endswith("/GB") for e in f.evidence) and "GB moved" in f.summary


def test_deterministic_json():
    a = findings_to_json(fleet_findings(_fleet(7, hosts=40, bad=(1, 1))))
    b = findings_to_json(fleet_findings(_fleet(7, hosts=40, bad=(1, 1))))
    assert a == b and "fleet-outlier" in a


def test_speed_1024_hosts_smoke():
    fleet = _fleet(9, hosts=1024, metrics=(SYM, "rx.errors", "tx.discards", "rdma.retransmits"))
    t = time.perf_counter()
    fleet_findings(fleet)
    assert time.perf_counter() - t < 5.0
