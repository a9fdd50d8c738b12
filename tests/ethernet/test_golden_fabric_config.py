"""Golden end-to-end test of the fabric_config collector and analysis.hostconfig.host_config."""

from __future__ import annotations

import shutil

import pytest

from fabricase import collectors
from fabricase.analysis.hostconfig import host_config
from fabricase.collectors.base import Collector, FileSpec
from hosttrees import write_file
from hosttrees.ethernet import add_fabric_config, add_roce_netdevs

ETH0 = {
    "netdev.eth0.bus_info": "0000:1a:00.0",
    "netdev.eth0.driver": "mlx5_core",
    "netdev.eth0.driver_version": "24.10-1.1.4",
    "netdev.eth0.ecn_np_enabled": "3",
    "netdev.eth0.ecn_rp_enabled": "3",
    "netdev.eth0.fec": "RS",
    "netdev.eth0.firmware": "28.39.1002 (MT_0000000838)",
    "netdev.eth0.lanes": 4,
    "netdev.eth0.mtu": 9000,
    "netdev.eth0.pfc_enabled": "3",
    "netdev.eth0.speed_mbps": 400000,
    "netdev.eth0.trust": "dscp",
}
HOST = {
    "host": "localhost",
    "kernel": "6.8.0-1015-nvidia",
    "module.bnxt_en.version": None,
    "module.bnxt_re.version": None,
    "module.efa.version": None,
    "module.ice.version": None,
    "module.irdma.version": None,
    "module.mlx5_core.version": "24.10-1.1.4",
    "module.mlx5_ib.version": None,
    "module.nvidia.version": "550.90.07",
    "rdma.mlx5_0/1.gid_types": "IB/RoCE v1,RoCE v2",
    "rdma.mlx5_0/1.netdev": "eth0",
    "rdma.mlx5_0/1.roce_v2_gid_indexes": "1,3",
    "rdma.mlx5_0/1.roce_v2_ipv4_gid_index": 3,
}


class GidMap(Collector):
    """The GID-to-netdev files the rdma collector reads (the same specs), so this test needs only this part."""

    name = "gidmap"
    requires_any = ("/sys/class/infiniband",)
    files = tuple(FileSpec(f"/sys/class/infiniband/*/ports/*/{what}/[0-3]") for what in ("gid_attrs/ndevs", "gids"))


@pytest.fixture(autouse=True)
def _gidmap(monkeypatch):
    monkeypatch.setitem(collectors.COLLECTORS, GidMap.name, GidMap)


def _tree(tmp_path, **config):
    root = tmp_path / "host"
    add_roce_netdevs(root, n=4)
    add_fabric_config(root, n=4, **config)
    write_file(root, "/proc/sys/kernel/osrelease", "6.8.0-1015-nvidia\n")
    return root


def test_healthy_host_config(tmp_path, capture_tree):
    hc = capture_tree(_tree(tmp_path), "identity", "netdev", "ethtool", "fabric_config", "gidmap")
    record = host_config(hc)
    assert {k: v for k, v in record.items() if k.startswith("netdev.eth0.")} == ETH0
    assert {k: v for k, v in record.items() if not k.startswith(("netdev.", "rdma.mlx5_1", "rdma.mlx5_2",
                                                                  "rdma.mlx5_3"))} == HOST
    assert list(record) == sorted(record)
    # every port reads the same: nothing drifted
    per_port = [{k.split(".", 2)[2]: v for k, v in record.items() if k.startswith(f"netdev.eth{i}.")}
                for i in range(4)]
    assert all({k: v for k, v in p.items() if k != "bus_info"} == {k: v for k, v in per_port[0].items()
                                                                     if k != "bus_info"} for p in per_port)
    assert host_config(hc) == record  # deterministic


def test_drifted_port_shows_in_the_record(tmp_path, capture_tree):
    root = _tree(tmp_path, overrides={"eth2": {"pfc": (), "trust": "pcp", "ecn": (3, 4)}})
    hc = capture_tree(root, "identity", "netdev", "ethtool", "fabric_config")
    record = host_config(hc)
    assert (record["netdev.eth2.pfc_enabled"], record["netdev.eth2.trust"], record["netdev.eth2.ecn_np_enabled"]) == (
        "", "pcp", "3,4")
    assert record["netdev.eth1.pfc_enabled"] == "3"


def test_dcb_answers_when_mlnx_qos_is_absent(tmp_path, capture_tree):
    root = _tree(tmp_path, pfc=(3, 4))
    (root / ".fabricase/bin/mlnx_qos").unlink()
    shutil.rmtree(root / ".fabricase/out/mlnx_qos")
    hc = capture_tree(root, "ethtool", "fabric_config")
    if hc.text("cmd:mlnx-qos"):  # a machine with MLNX_OFED installed answers for itself
        return
    assert (host_config(hc)["netdev.eth3.pfc_enabled"], host_config(hc)["netdev.eth3.trust"]) == ("3,4", "dscp")


def test_nothing_captured_is_none_not_a_guess(tmp_path, capture_tree):
    root = tmp_path / "host"
    write_file(root, "/sys/class/net/eth0/device/vendor", "0x15b3\n")
    write_file(root, "/sys/class/net/eth0/ecn/roce_np/enable/3", "")  # unreadable, as sysfs can be
    hc = capture_tree(root, "fabric_config")
    record = host_config(hc)
    assert record["netdev.eth0.mtu"] is None and record["netdev.eth0.firmware"] is None
    assert record["netdev.eth0.ecn_np_enabled"] is None and record["module.mlx5_core.version"] is None
