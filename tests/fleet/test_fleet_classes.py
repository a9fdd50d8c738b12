"""Comparable classes (vendor, link layer, speed), one test per counter, and NCCL evidence in the ranking."""

from __future__ import annotations

import numpy as np

from fabricase.analysis import _background, _nccl_links, sort_findings
from fabricase.analysis.fleet import fleet_findings, fleet_inputs
from fabricase.models import Evidence, Finding, MetricSample, Severity

SYM = "phy.symbol_errors_uncorrected"
INTERVAL = 5.0


def _port(host, comp, delta, vendor, layer, speed):
    src = f"/sys/class/infiniband/{comp[5:].split('/')[0]}/ports/1/counters/symbol_error"
    return [
        MetricSample(host, comp, SYM, float(delta), "errors", src, float(delta), delta / INTERVAL),
        MetricSample(host, comp, "port.vendor", None, "vendor", None, note=vendor),
        MetricSample(host, comp, "link.layer", None, "layer", src, note=layer),
        MetricSample(host, comp, "link.speed_gbps", speed, "Gb/s", src),
    ]


def _mixed_fleet(seed, suspect_delta):
    """60 hosts: 4 ConnectX InfiniBand 400G ports that are quiet, and 4 EFA 100G ports that always count a few
    symbol errors. gpu0007's mlx5_2 shows `suspect_delta` errors: the EFA background, but not ConnectX's."""
    rng = np.random.default_rng(seed)
    fleet = {}
    for h in range(60):
        host, samples = f"gpu{h:04d}", []
        for p in range(4):
            delta = suspect_delta if (h, p) == (7, 2) else rng.poisson(0.02)
            samples += _port(host, f"rdma:mlx5_{p}/1", delta, "mlx5", "InfiniBand", 400.0)
        for p in range(4):
            samples += _port(host, f"rdma:rdmap{p}s0/1", rng.poisson(12), "efa", "Ethernet", 100.0)
        fleet[host] = samples
    return fleet


def test_ports_are_judged_against_their_own_class():
    findings = fleet_findings(_mixed_fleet(3, suspect_delta=12))
    assert [(f.host, f.component) for f in findings] == [("gpu0007", "rdma:mlx5_2/1")]
    f = findings[0]
    assert "mlx5 InfiniBand 400 Gb/s ports" in f.summary
    assert {e.metric: e.value for e in f.evidence}["fleet.comparable_components"] == 240
    assert {e.metric: e.value for e in f.evidence}["fleet.comparable_class"] == "mlx5 InfiniBand 400 Gb/s"


def test_without_classes_the_same_port_hides_in_the_mixed_fleet():
    # The control: strip the class gauges and the suspect's 12 errors are ordinary next to the EFA ports.
    fleet = {h: [s for s in v if s.metric == SYM] for h, v in _mixed_fleet(3, suspect_delta=12).items()}
    assert fleet_findings(fleet) == []


def test_one_odd_port_in_a_large_fleet_is_not_a_too_small_fleet():
    fleet = _mixed_fleet(4, suspect_delta=0)
    fleet["gpu0003"] = [s if s.metric != "link.speed_gbps" or s.component != "rdma:mlx5_1/1"
                        else MetricSample(s.host, s.component, s.metric, 200.0, "Gb/s", s.source)
                        for s in fleet["gpu0003"]]
    fleet["gpu0003"] = [MetricSample(s.host, s.component, s.metric, 3.0, s.unit, s.source, 3.0, 0.6)
                        if s.metric == SYM and s.component == "rdma:mlx5_1/1" else s for s in fleet["gpu0003"]]
    assert [f.kind for f in fleet_findings(fleet)] == []


def test_raw_counter_under_its_normalized_name_is_tested_once():
    src = "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"
    other = "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence"
    samples = [
        MetricSample("h", "rdma:mlx5_0/1", SYM, 5, "errors", src, 5, 1.0),
        MetricSample("h", "rdma:mlx5_0/1", "raw:symbol_error", 5, "count", src, 5, 1.0),
        MetricSample("h", "rdma:mlx5_0/1", "raw:out_of_sequence", 2, "count", other, 2, 0.4),
        MetricSample("h", "rdma:mlx5_0/1", "link.state", 4, "state", src),
    ]
    kept = [s.metric for s in fleet_inputs(samples)]
    assert kept == [SYM, "raw:out_of_sequence"]


def _rule(host, comp, confidence, severity=Severity.MAJOR, kind="rdma-symbol-errors"):
    return Finding(kind, severity, host, comp, f"{comp} on {host}: symbol errors",
                   [Evidence("x.delta", 3, "errors")], confidence)


def test_nccl_blame_raises_confidence_and_rank():
    blamed = _rule("gpu0002", "rdma:mlx5_1/1", 0.8)
    unblamed = _rule("gpu0001", "rdma:mlx5_1/1", 0.85)
    nccl = Finding("nccl-nic-errors", Severity.MAJOR, "gpu0002", "rdma:mlx5_1/1", "NCCL: completion errors", [], 0.9)
    ranked = [f for f in sort_findings(_nccl_links([unblamed, blamed, nccl])) if not f.kind.startswith("nccl-")]
    assert [f.host for f in ranked] == ["gpu0002", "gpu0001"]
    assert ranked[0].confidence == 0.9 and "nccl-log:gpu0002/rdma:mlx5_1/1" in ranked[0].related
    assert ranked[1].confidence == 0.85 and ranked[1].related == []


def test_nccl_blamed_component_is_not_background():
    blamed = _rule("gpu0002", "rdma:mlx5_1/1", 0.95)
    quiet = _rule("gpu0001", "rdma:mlx5_1/1", 0.95)
    nccl = Finding("nccl-nic-errors", Severity.MAJOR, "gpu0002", "rdma:mlx5_1/1", "NCCL: completion errors", [], 0.9)
    out = {f.host: f.severity for f in _background([blamed, quiet, nccl], [], {"rdma"}) if f.kind.startswith("rdma")}
    assert out == {"gpu0002": Severity.MAJOR, "gpu0001": Severity.MINOR}
