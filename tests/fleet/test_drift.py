"""Configuration drift on hand-made host_config records."""

from fabricase.analysis.drift import config_drift_findings, fleet_majority
from fabricase.models import Severity


def record(host, **overrides):
    base = {
        "host": host,
        "kernel": "5.15.0-1053-nvidia",
        "module.mlx5_core.version": "24.04-0.6.6",
        "module.efa.version": None,
        "netdev.eth0.mtu": 1500,  # front-end port: no RDMA, no PFC
        "netdev.eth0.pfc_enabled": "",
        "netdev.eth0.bus_info": f"0000:{host[-2:]}:00.0",
        "netdev.eth2.mtu": 4200,
        "netdev.eth2.pfc_enabled": "3",
        "netdev.eth2.trust": "dscp",
        "netdev.eth2.ecn_np_enabled": "3",
        "netdev.eth2.ecn_rp_enabled": "3",
        "netdev.eth2.firmware": "28.39.1002",
        "netdev.eth2.driver_version": "24.04-0.6.6",
        "netdev.eth2.speed_mbps": 400000,
        "rdma.mlx5_2/1.netdev": "eth2",
        "rdma.mlx5_2/1.gid_types": "IB/RoCE v1,RoCE v2",
    }
    base.update({k.replace("__", "."): v for k, v in overrides.items()})
    return base


def fleet(n=10, **odd):
    """n identical hosts; odd maps host -> overrides (keys with "__" for ".")."""
    hosts = [f"gpu{i:03d}" for i in range(n)]
    return {h: record(h, **odd.get(h, {})) for h in hosts}


def test_clean_fleet_has_no_drift():
    assert config_drift_findings(fleet(16)) == []


def test_pfc_off_on_the_roce_priority_is_major():
    configs = fleet(1024, gpu042={"netdev__eth2__pfc_enabled": ""})
    [f] = config_drift_findings(configs)
    assert (f.kind, f.severity, f.host, f.component) == ("config-drift", Severity.MAJOR, "gpu042", "netdev:eth2")
    assert f.summary == "gpu042 eth2 has PFC off on priority 3 while 1,023 of 1,024 hosts enable it"
    [e] = f.evidence
    assert (e.metric, e.value, e.baseline, e.unit) == ("netdev.eth2.pfc_enabled", "", "3", "config")
    assert f.confidence == round(1023 / 1024, 3)


def test_several_settings_on_one_port_make_one_finding():
    configs = fleet(10, gpu003={"netdev__eth2__mtu": 1500, "netdev__eth2__trust": "pcp",
                                "netdev__eth2__ecn_rp_enabled": "", "netdev__eth2__pfc_enabled": "3,4",
                                "netdev__eth2__firmware": "28.36.1010"})
    [f] = config_drift_findings(configs)
    assert f.severity is Severity.MAJOR and f.component == "netdev:eth2"
    assert [e.metric for e in f.evidence] == [
        "netdev.eth2.ecn_rp_enabled", "netdev.eth2.firmware", "netdev.eth2.mtu", "netdev.eth2.pfc_enabled",
        "netdev.eth2.trust",
    ]
    assert f.summary == (
        "gpu003 eth2 has ECN (reaction point) off on priority 3 while 9 of 10 hosts enable it; "
        "MTU 1500 while 9 of 10 hosts use 4200; PFC on priority 4 while 9 of 10 hosts leave it off; "
        "trust mode pcp while 9 of 10 hosts use dscp; firmware 28.36.1010 while 9 of 10 hosts run 28.39.1002"
    )


def test_versions_are_minor_and_on_the_host():
    configs = fleet(8, gpu001={"kernel": "6.8.0-1", "module__mlx5_core__version": "23.10"},
                    gpu002={"netdev__eth2__driver_version": "23.10"})
    findings = config_drift_findings(configs)
    assert [(f.host, f.component, f.severity) for f in findings] == [
        ("gpu001", "host", Severity.MINOR), ("gpu002", "netdev:eth2", Severity.MINOR)]
    assert findings[0].summary == (
        "gpu001 has kernel 6.8.0-1 while 7 of 8 hosts run 5.15.0-1053-nvidia; "
        "mlx5_core module version 23.10 while 7 of 8 hosts run 24.04-0.6.6"
    )
    assert findings[1].summary == "gpu002 eth2 has driver version 23.10 while 7 of 8 hosts run 24.04-0.6.6"


def test_mtu_on_a_front_end_port_is_minor_and_unknown_keys_are_compared():
    configs = fleet(6, gpu005={"netdev__eth0__mtu": 9000, "rdma__mlx5_2/1__gid_types": "RoCE v2"})
    findings = config_drift_findings(configs)
    assert [(f.component, f.severity) for f in findings] == [
        ("netdev:eth0", Severity.MINOR), ("rdma:mlx5_2/1", Severity.MINOR)]
    assert findings[1].summary == "gpu005 mlx5_2/1 has gid_types = RoCE v2 while 5 of 6 hosts have IB/RoCE v1,RoCE v2"


def test_a_port_the_fleet_runs_pfc_on_is_a_fabric_port_without_rdma_mapping():
    configs = fleet(6, gpu000={"netdev__eth2__mtu": 1500})
    for r in configs.values():
        del r["rdma.mlx5_2/1.netdev"]
    [f] = config_drift_findings(configs)
    assert f.severity is Severity.MAJOR


def test_no_majority_no_finding():
    # 5 of 10 on one value: below 60 %, nothing is "the" configuration.
    configs = fleet(10, **{f"gpu00{i}": {"netdev__eth2__mtu": 9000} for i in range(5)})
    assert config_drift_findings(configs) == []
    # 6 of 10 is a majority: the 4 others drift.
    configs = fleet(10, **{f"gpu00{i}": {"netdev__eth2__mtu": 9000} for i in range(4)})
    assert [f.host for f in config_drift_findings(configs)] == ["gpu000", "gpu001", "gpu002", "gpu003"]


def test_too_few_hosts_or_values_not_captured():
    assert config_drift_findings(fleet(3, gpu000={"netdev__eth2__mtu": 1500})) == []
    # None is "not captured": neither drift nor counted toward the majority.
    configs = fleet(6, gpu000={"netdev__eth2__trust": None}, gpu001={"netdev__eth2__trust": None},
                    gpu002={"netdev__eth2__trust": None}, gpu003={"netdev__eth2__trust": "pcp"})
    assert config_drift_findings(configs) == []  # 2 of 3 reporting agree, but only 3 report
    # A host without the port at all does not drift either.
    configs = fleet(6)
    configs["gpu000"] = {k: v for k, v in configs["gpu000"].items() if not k.startswith("netdev.eth2.")}
    assert config_drift_findings(configs) == []


def test_skipped_keys():
    configs = fleet(6, gpu001={"netdev__eth2__speed_mbps": 200000})  # link state: the link rules judge it
    assert config_drift_findings(configs) == []  # bus_info differs on every host and is not compared either


def test_fleet_majority():
    assert fleet_majority({"a": 1, "b": 1, "c": 1, "d": 2}) == (1, 3, 4)
    assert fleet_majority({"a": 1, "b": 1, "c": 2, "d": 2}) is None
    assert fleet_majority({"a": 1, "b": 1, "c": 1, "d": None}) is None


def test_deterministic_order():
    odd = {"gpu009": {"netdev__eth2__trust": "pcp"}, "gpu001": {"kernel": "x"}, "gpu005": {"netdev__eth0__mtu": 9000}}
    a = config_drift_findings(fleet(10, **odd))
    b = config_drift_findings(dict(reversed(list(fleet(10, **odd).items()))))
    assert [f.to_dict() for f in a] == [f.to_dict() for f in b]
    assert [f.host for f in a] == ["gpu001", "gpu005", "gpu009"]
