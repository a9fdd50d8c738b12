"""The ethernet rules read only the metrics ethernet._RULE_READS names (the per-port dicts hold only those)."""

from __future__ import annotations

from fabricase.analysis import ethernet
from hosttrees.ethernet import add_roce_netdevs
from rule_reads import WALKED, recorded_reads


def test_the_ethernet_rules_read_only_the_metrics_they_declare(tmp_path, monkeypatch, capture_tree):
    root = tmp_path / "host"
    add_roce_netdevs(root, degraded="eth3", pfc_storm="eth2", discards="eth5", downshift="eth6")

    def run() -> list:
        hc = capture_tree(root, "ethtool")  # a fresh host each time: the grouping is memoized on it
        samples = ethernet.samples(hc)
        return [f for rule in ethernet.RULES for f in rule(hc, samples)]

    seen, findings, unfiltered = recorded_reads(monkeypatch, ethernet, "_group_ports", run)
    assert {"phy.symbol_errors_uncorrected", "pfc.pause_storm_events", "phy.ber_post_fec"} <= seen
    assert WALKED not in seen
    assert seen - ethernet._RULE_READS == set()
    assert len(findings) >= 4 and findings == unfiltered
