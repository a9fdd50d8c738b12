"""Topology correlation on hand-made fleets where the right answer is known."""

import math

import pytest

from fabricase.analysis.topology import (
    benjamini_hochberg,
    hypergeom_sf,
    shared_component_findings,
)
from fabricase.models import Finding, Severity


def fleet(n_hosts: int, hosts_per_leaf: int = 8, hosts_per_rack: int = 16):
    hosts = [f"gpu{i:04d}" for i in range(n_hosts)]
    placements = {
        h: [f"switch:leaf-{i // hosts_per_leaf}", f"rack:r{i // hosts_per_rack}"] for i, h in enumerate(hosts)
    }
    return hosts, placements


def link_error(host, severity=Severity.MAJOR, component="rdma:mlx5_0/1", kind="rdma-port-errors"):
    return Finding(kind, severity, host, component, f"{host}: symbol errors")


def test_hypergeom_sf_matches_the_definition():
    N, K, n = 50, 7, 10
    for k in range(0, 9):
        direct = sum(math.comb(K, x) * math.comb(N - K, n - x) for x in range(k, min(n, K) + 1)) / math.comb(N, n)
        assert hypergeom_sf(k, N, K, n) == pytest.approx(direct, rel=1e-12)
    assert hypergeom_sf(0, N, K, n) == 1.0
    assert hypergeom_sf(8, N, K, n) == 0.0  # more than K flagged cannot happen
    assert hypergeom_sf(3, 10, 8, 5) == 1.0  # 5 of 10 with 8 flagged: at least 3 always


def test_hypergeom_sf_matches_scipy():
    from scipy import stats  # a dependency of fabricase: never skipped
    for N, K, n, k in [(1024, 7, 8, 6), (1024, 40, 16, 3), (64, 2, 4, 2), (2048, 100, 32, 5)]:
        assert hypergeom_sf(k, N, K, n) == pytest.approx(stats.hypergeom.sf(k - 1, N, K, n), rel=1e-9)


def test_benjamini_hochberg():
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.5])
    assert benjamini_hochberg([]) == []
    assert benjamini_hochberg([1.0, 1.0]) == [1.0, 1.0]


def test_bad_leaf_named_as_the_switch():
    hosts, placements = fleet(1024)
    under_leaf_3 = hosts[24:32]
    findings = [link_error(h) for h in under_leaf_3]
    findings.append(link_error(hosts[24], Severity.CRITICAL, "netdev:eth3", "netdev-errors"))
    findings.append(Finding("nvidia-xid", Severity.MAJOR, hosts[25], "gpu:3", "xid 79"))  # not a link: not linked
    findings.append(link_error(hosts[500]))  # background noise elsewhere
    shared, updated = shared_component_findings(findings, placements, hosts)

    assert [f.component for f in shared] == ["switch:leaf-3"]  # rack:r1 explains the same hosts less sharply
    s = shared[0]
    assert s.kind == "shared-component-fault" and s.host is None
    assert s.severity is Severity.CRITICAL  # the worst linked host finding
    assert s.q_value < 1e-12 and s.confidence == 1.0
    assert s.summary.startswith("8 of the 8 hosts under switch:leaf-3 show link errors, against 9 of 1,024 fleet-wide")
    assert s.summary.endswith(": investigate the switch, not the hosts")
    ev = {e.metric: e.value for e in s.evidence}
    assert ev == {"flagged_under": 8, "hosts_under": 8, "flagged_fleet": 9, "fleet_size": 1024}
    assert s.related == sorted([f"{h}/rdma:mlx5_0/1" for h in under_leaf_3] + [f"{hosts[24]}/netdev:eth3"])

    # Every flagging finding under the switch now points at it; the others are untouched, the inputs unchanged.
    assert len(updated) == len(findings)
    for before, after in zip(findings, updated, strict=True):
        linked = before.host in under_leaf_3 and before.kind != "nvidia-xid"
        assert after.related == (["switch:leaf-3"] if linked else [])
        assert before.related == []
        assert (after is before) is not linked


def test_flagged_hosts_spread_evenly_raise_no_shared_finding():
    hosts, placements = fleet(1024)
    findings = [link_error(h) for h in hosts[::64]]  # 16 hosts, each under a different leaf and rack
    shared, updated = shared_component_findings(findings, placements, hosts)
    assert shared == []
    assert updated == findings


def test_two_flagged_hosts_sharing_a_rack_in_a_tiny_fleet_are_not_significant():
    hosts = ["a", "b", "c", "d", "e", "f"]
    placements = {h: ["rack:r1" if h in "abc" else "rack:r2"] for h in hosts}
    findings = [link_error("a"), link_error("b")]
    shared, updated = shared_component_findings(findings, placements, hosts)
    assert shared == [] and updated == findings


def test_unreachable_hosts_count_and_minor_findings_do_not():
    hosts, placements = fleet(256)
    findings = [Finding("host-unreachable", Severity.MAJOR, h, "host", "no route") for h in hosts[0:6]]
    findings += [link_error(h, Severity.MINOR) for h in hosts[8:16]]  # minor: not flagging
    shared, _ = shared_component_findings(findings, placements, hosts)
    assert [f.component for f in shared] == ["switch:leaf-0"]
    assert "6 of the 8 hosts under switch:leaf-0 are unreachable, against 6 of 256" in shared[0].summary


def test_nvlink_and_config_drift_findings_are_not_topology_evidence():
    hosts, placements = fleet(256)
    findings = [link_error(h, component="nvlink:0/3", kind="nvlink-errors") for h in hosts[0:8]]
    findings += [link_error(h, component="netdev:eth2", kind="config-drift") for h in hosts[8:16]]
    assert shared_component_findings(findings, placements, hosts) == ([], findings)


def test_min_flagged_and_alpha():
    hosts = [f"h{i}" for i in range(400)]
    placements = {h: [f"network-node:nn-{i // 200}", f"network-node:leaf-{i // 2}"] for i, h in enumerate(hosts)}
    findings = [link_error("h0"), link_error("h1")]  # both hosts of leaf-0 flagged, 2 of 400
    # p = 1 / C(400, 2) = 1.25e-5 over 202 nodes: q = 0.0025
    shared, _ = shared_component_findings(findings, placements, hosts)
    assert [f.component for f in shared] == ["network-node:leaf-0"]
    assert shared[0].q_value == pytest.approx(202 / 79800)
    assert "(q = 0.0025): investigate the network node, not the hosts" in shared[0].summary
    assert shared_component_findings(findings, placements, hosts, min_flagged=3)[0] == []
    assert shared_component_findings(findings, placements, hosts, alpha=0.001)[0] == []


def test_two_independent_bad_switches_and_outermost_tie_break():
    hosts, placements = fleet(512, hosts_per_leaf=8, hosts_per_rack=8)  # rack == leaf: identical host sets
    findings = [link_error(h) for h in hosts[0:8] + hosts[80:86]]
    shared, updated = shared_component_findings(findings, placements, hosts)
    assert [f.component for f in shared] == ["switch:leaf-0", "switch:leaf-10"]
    assert {e.metric: e.value for e in shared[0].evidence}["same_hosts_as"] == "rack:r0"
    assert all(f.related in (["switch:leaf-0"], ["switch:leaf-10"]) for f in updated)


def test_hosts_outside_the_fleet_and_missing_placements_are_ignored():
    hosts, placements = fleet(64)
    placements = {**placements, "ghost1": ["switch:leaf-0"], "ghost2": ["switch:leaf-0"]}
    del placements[hosts[7]]
    findings = [link_error(h) for h in hosts[0:7]] + [link_error("ghost1")]
    shared, _ = shared_component_findings(findings, placements, hosts)
    ev = {e.metric: e.value for e in shared[0].evidence}
    assert ev["hosts_under"] == 7 and ev["flagged_under"] == 7 and ev["flagged_fleet"] == 7
    assert ev["fleet_size"] == 64


def test_empty_inputs():
    assert shared_component_findings([], {}, []) == ([], [])
    f = [link_error("a")]
    assert shared_component_findings(f, {}, ["a"]) == ([], f)


def test_deterministic():
    hosts, placements = fleet(1024)
    findings = [link_error(h) for h in hosts[24:30]] + [link_error(h) for h in hosts[::100]]
    a = shared_component_findings(findings, placements, hosts)
    b = shared_component_findings(list(findings), dict(reversed(placements.items())), list(reversed(hosts)))
    assert [f.to_dict() for f in a[0]] == [f.to_dict() for f in b[0]]
