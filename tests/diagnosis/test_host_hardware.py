"""host_hardware on captured hosts: the golden HGX host (recorded tree, real nvidia-smi output) maps every RDMA port
to its netdev and PCI function, gives netdevs their MACs and GPUs their serial, UUID and PCI address; hostile
content never raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suspect_builders import write_host

from fabricase.analysis.gpu import SMI_XML
from fabricase.diagnosis import HostHardware, host_hardware, pci_key
from fabricase.diagnosis.hardware import normalize_guid
from fabricase.pipeline import CollectOptions, collect, diagnose_capture
from fabricase.targets import Targets
from hosttrees.ethernet import GPU_BDFS, NIC_BDFS
from hosttrees.hosts import hgx_mlx5_host

SHARED_REAL = Path(__file__).parents[3] / "shared/fixtures/real"


@pytest.fixture(scope="module")
def hgx(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hgx")
    root = hgx_mlx5_host(tmp / "root", degraded=True)
    return collect(Targets(hosts=("localhost",)), CollectOptions(interval_s=0, root=str(root)), tmp / "cap")


def test_every_rdma_port_of_the_hgx_host_maps_to_its_netdev_and_pci_function(hgx):
    hw = host_hardware(hgx.hosts[0])
    assert sorted(hw.ports) == [f"mlx5_{i}/1" for i in range(8)]
    for i in range(8):
        port = hw.ports[f"mlx5_{i}/1"]
        assert port["netdev"] == f"eth{i}"
        assert hw.netdevs[f"eth{i}"]["rdma"] == f"mlx5_{i}/1"
        assert port["pci"] == f"0000:{0x18 + 0x10 * i:02x}:00.0"  # the RDMA device's uevent
        assert hw.pci[port["pci"]] == ("rdma", f"mlx5_{i}")
        assert port["node_guid"] == f"0xa088c20300da{0x6300 + i:04x}"
        assert port["firmware"] == "28.41.1000" and port["link_layer"] == "Ethernet"
        assert "port_guid" not in port  # RoCE: the GIDs come from IP addresses, there is no port GUID


def test_every_netdev_of_the_hgx_host_has_its_mac_pci_and_driver(hgx):
    hw = host_hardware(hgx.hosts[0])
    for i in range(8):
        netdev = hw.netdevs[f"eth{i}"]
        # No /sys/class/net/*/address in this tree: the MAC comes from `ip -s -d link`.
        assert netdev["mac"] == f"0c:42:a1:00:00:{i + 2:02x}"
        assert netdev["pci"] == NIC_BDFS[i] and hw.pci[NIC_BDFS[i]] == ("netdev", f"eth{i}")
        assert netdev["driver"] == "mlx5_core" and netdev["firmware"]
        assert hw.ports[f"mlx5_{i}/1"]["mac"] == netdev["mac"]


def test_every_gpu_of_the_hgx_host_has_serial_uuid_and_pci(hgx):
    hw = host_hardware(hgx.hosts[0])
    assert sorted(hw.gpus) == [str(i) for i in range(8)]
    for i in range(8):
        gpu = hw.gpus[str(i)]
        assert gpu["pci"] == GPU_BDFS[i] and hw.pci[GPU_BDFS[i]] == ("gpu", str(i))
        assert gpu["serial"] and gpu["uuid"].startswith("GPU-") and "H100" in gpu["model"]


def test_the_hgx_hosts_identity_carries_its_ec2_instance_id(hgx):
    hw = host_hardware(hgx.hosts[0])
    assert hw.identity["instance_id"] == "i-0fab00000000c0de1"
    assert hw.identity["provider"] == "aws" and hw.identity["product_name"] == "p5.48xlarge"


def test_the_degraded_hgx_hosts_suspects_carry_the_identity_their_owner_needs(hgx):
    suspects = diagnose_capture(hgx).diagnosis.suspects
    by_name = {s.name: s for s in suspects}
    port = by_name["localhost mlx5_3/1 (eth3)"]
    assert {k: port.identity[k] for k in ("netdev", "mac", "node_guid", "pci", "instance_id")} == {
        "netdev": "eth3", "mac": "0c:42:a1:00:00:05", "node_guid": "0xa088c20300da6303", "pci": "0000:48:00.0",
        "instance_id": "i-0fab00000000c0de1"}
    gpu = by_name["localhost GPU 6"]
    assert gpu.verdict == "gpu-off-bus"
    assert {"serial", "uuid", "pci", "instance_id"} <= set(gpu.identity)
    # Each fault is one suspect: the port's six findings are one, the GPUs' one each, the x8 NIC link one.
    assert len(suspects) == 6
    assert all(s.findings for s in suspects)


def test_an_infiniband_ports_guid_is_read_from_gid_0_and_its_ipoib_netdev_by_pci(tmp_path):
    ib = "/sys/class/infiniband/mlx5_0"
    files = {
        (0, f"{ib}/node_guid"): "a088:c203:00da:6300\n",
        (0, f"{ib}/device/uevent"): "DRIVER=mlx5_core\nPCI_SLOT_NAME=0000:18:00.0\n",
        (0, f"{ib}/ports/1/link_layer"): "InfiniBand\n",
        (0, f"{ib}/ports/1/gids/0"): "fe80:0000:0000:0000:a088:c203:00da:6300\n",
        (0, "cmd:ethtool-driver"): "### ib0\ndriver: mlx5_core[ib_ipoib]\nbus-info: 0000:18:00.0\n",
        (0, "/sys/class/net/ib0/address"): "00:00:10:49:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:da:63:00\n",
    }
    hw = host_hardware(write_host(tmp_path, "ib001", files))
    port = hw.ports["mlx5_0/1"]
    assert port["port_guid"] == "0xa088c20300da6300" and port["node_guid"] == "0xa088c20300da6300"
    assert port["netdev"] == "ib0" and hw.netdevs["ib0"]["rdma"] == "mlx5_0/1"
    assert "mac" not in hw.netdevs["ib0"]  # a 20-byte IPoIB hardware address is not a MAC


@pytest.mark.parametrize("text, guid", [("a088:c203:00da:6300", "0xa088c20300da6300"),
                                        ("0xA088C20300DA6300", "0xa088c20300da6300"),
                                        ("0000:0000:0000:0000", None), ("fe80::1", None), ("", None), (None, None)])
def test_normalize_guid(text, guid):
    assert normalize_guid(text) == guid


@pytest.mark.parametrize("address, key", [("0000:9b:00", "0000:9b:00.0"), ("00000000:9B:00.0", "0000:9b:00.0"),
                                          ("9b:00.1", "0000:9b:00.1"), ("garbage", None), (None, None)])
def test_pci_key(address, key):
    assert pci_key(address) == key


def test_real_nvidia_smi_xml_gives_gpus_their_identity(tmp_path):
    xml = (SHARED_REAL / "nvidia-smi-xml_netdata/nvidia-smi-q-x_tesla-p100.xml")
    if not xml.exists():
        pytest.skip(f"{xml} is not here")
    hw = host_hardware(write_host(tmp_path, "p100", {(0, SMI_XML): xml.read_bytes()}))
    assert hw.gpus
    for facts in hw.gpus.values():
        assert facts["pci"] and (facts.get("serial") or facts.get("uuid"))


_HOSTILE_SOURCES = (
    "/sys/class/infiniband/mlx5_0/device/uevent", "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0",
    "/sys/class/infiniband/mlx5_0/ports/1/gids/0", "/sys/class/infiniband/mlx5_0/ports/1/link_layer",
    "/sys/class/infiniband/mlx5_0/node_guid", "/sys/class/net/eth0/address", "cmd:ethtool-driver", "cmd:ip-link",
    "cmd:nvidia-smi-xml", "cmd:nvidia-smi-q", "/sys/class/dmi/id/board_asset_tag",
)
_text = st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                  st.sampled_from([b"<?xml version='1.0'?><nvidia_smi_log><gpu id='zz'><uuid/></gpu>",
                                   b"### \n### eth0\nbus-info: 0000:zz:00.0\n", b"PCI_SLOT_NAME=\n",
                                   b"InfiniBand\n", b"fe80::\n", b"\xff\xfe\x00",
                                   b"1: eth0: <UP>\n    link/ether x\n"]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(_HOSTILE_SOURCES), _text, min_size=1))
def test_host_hardware_never_raises_on_hostile_input(tmp_path_factory, contents):
    hc = write_host(tmp_path_factory.mktemp("h"), "bad001", {(0, k): v for k, v in contents.items()})
    hw = host_hardware(hc)
    assert isinstance(hw, HostHardware) and hw.host == "bad001"
    for facts in [*hw.ports.values(), *hw.netdevs.values(), *hw.gpus.values()]:
        assert all(isinstance(v, str) for v in facts.values())
