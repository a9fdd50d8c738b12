"""The netdev rules read only the metrics rules._RULE_READS names (the per-interface dicts hold only those)."""

from __future__ import annotations

from capture_builder import HEALTHY_COUNTERS, degraded_eth2, sysfs_net, write_host

from fabricase.analysis import rules
from fabricase.analysis.netdev import netdev_samples
from rule_reads import WALKED, recorded_reads


def test_the_netdev_rules_read_only_the_metrics_they_declare(tmp_path, monkeypatch):
    down = dict(HEALTHY_COUNTERS, operstate="down\n", carrier="0\n")
    files = {**degraded_eth2(), **sysfs_net("eth3", down, down)}
    hosts = iter(range(10))

    def run() -> list:
        hc = write_host(tmp_path / f"c{next(hosts)}", "gpu001", files)  # fresh: the grouping is memoized on it
        samples = netdev_samples(hc)
        return [f for rule in rules.RULES for f in rule(hc, samples)]

    seen, findings, unfiltered = recorded_reads(monkeypatch, rules, "_group_interfaces", run)
    assert {"rx_crc_errors", "carrier_changes", "operstate"} <= seen
    assert WALKED not in seen
    assert seen - rules._RULE_READS == set()
    assert {f.kind for f in findings} >= {"netdev-errors", "link-flap", "link-down"} and findings == unfiltered
