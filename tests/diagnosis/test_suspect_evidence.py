"""A suspect's evidence: at most five lines, each against the fleet where there is one, the strongest q-value last;
a fixed-limit test reads as an exact Poisson p-value."""

from __future__ import annotations

from suspect_builders import CRITICAL, finding, nic_port_hardware, outcomes

from fabricase.diagnosis import diagnose
from fabricase.diagnosis.evidence import MAX_LINES
from fabricase.models import Evidence, MetricSample


def test_evidence_is_at_most_five_lines_with_the_q_value_last():
    many = [Evidence(f"phy.counter_{i}.delta", 10 + i, "errors", 0) for i in range(8)]
    findings = [finding("fleet-outlier", "netdev:ens4np0", severity=CRITICAL, q_value=1e-9, confidence=1.0,
                        evidence=many[:4]),
                finding("phy-errors", "netdev:ens4np0", evidence=many[4:])]
    [s] = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()}).suspects
    assert len(s.evidence) == MAX_LINES == 5
    assert s.evidence[-1] == "q = 1e-09 (fleet-outlier; confidence 1)"
    assert s.evidence[0] == "phy.counter_0 10 errors; fleet 0"  # a fleet outlier's baseline is the fleet's


def test_a_counter_reads_against_the_fleets_median_and_p99():
    samples = {f"gpu00{i}": [MetricSample(f"gpu00{i}", "rdma:mlx5_3/1", "phy.symbol_errors_uncorrected", None,
                                          "errors", delta=40 if i == 1 else 0, rate=8.0 if i == 1 else 0.0)]
               for i in range(1, 9)}
    f = finding("rdma-symbol-errors", "rdma:mlx5_3/1",
                evidence=[Evidence("phy.symbol_errors_uncorrected.delta", 40, "errors", 0),
                          Evidence("phy.symbol_errors_uncorrected.p_limit", 7.8e-80, "p-value", 0.001)])
    [s] = diagnose([f], hosts=outcomes(*samples), samples=samples).suspects
    assert s.evidence == [
        "phy.symbol_errors_uncorrected +40 (8/s); fleet median 0/s, p99 8/s over 8 ports",
        "phy.symbol_errors_uncorrected above its limit: exact Poisson p = 7.8e-80 at false-alarm level 0.001"]
    # The terminal's key number is the compact form of the first line: it fits one column at 80.
    assert s.key_number == "symbol_errors_uncorrected 8/s, fleet p99 8/s"
