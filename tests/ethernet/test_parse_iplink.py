"""`ip -s -d link` against the real captures of the development VM, and the older iproute2 layout."""

from __future__ import annotations

from fabricase.parsers.iplink import parse_ip_link

from .conftest import FIXTURES

VM = FIXTURES / "ethernet" / "ip-link_local-vm"


def test_real_ip_s_d_link():
    report = parse_ip_link((VM / "ip-s-d-link.txt").read_text())
    assert report.errors == []
    assert list(report.links) == ["lo", "ifb0", "ifb1", "eth0"]
    eth0 = report.links["eth0"]
    assert (eth0.index, eth0.mtu, eth0.state, eth0.link_type, eth0.parentbus, eth0.parentdev) == (
        4, 1400, "UP", "ether", "virtio", "virtio2")
    assert eth0.flags == ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]
    assert set(eth0.counters) == {"rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_missed", "rx_mcast",
                                  "tx_bytes", "tx_packets", "tx_errors", "tx_dropped", "tx_carrier", "tx_collsns"}
    assert eth0.counters["rx_errors"] == 0 and eth0.counters["rx_packets"] > 0
    ifb0 = report.links["ifb0"]
    assert (ifb0.state, ifb0.mtu, ifb0.counters["rx_bytes"]) == ("DOWN", 1500, 0)
    assert report.links["lo"].state == "UNKNOWN" and report.links["lo"].link_type == "loopback"


def test_real_ip_s_s_d_link_error_details():
    report = parse_ip_link((VM / "ip-s-s-d-link.txt").read_text())
    assert report.errors == []
    eth0 = report.links["eth0"].counters
    assert {k: eth0[k] for k in ("rx_errors_crc", "rx_errors_frame", "tx_errors_heartbt")} == {
        "rx_errors_crc": 0, "rx_errors_frame": 0, "tx_errors_heartbt": 0}
    assert eth0["tx_errors_transns"] >= 0


OLD_IPROUTE2 = "3: ens1f0np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4200 qdisc mq state UP mode DEFAULT " + """\
group default qlen 1000
    link/ether 0c:42:a1:00:00:01 brd ff:ff:ff:ff:ff:ff promiscuity 0 numtxqueues 64 numrxqueues 64
    parentbus pci parentdev 0000:3c:00.0
    altname enp60s0f0np0
    RX: bytes  packets  errors  dropped overrun mcast
    98765      4321     17      0       0       12
    TX: bytes  packets  errors  dropped carrier collsns
    12345      678      0       0       0       0
    vf 0     link/ether 00:00:00:00:00:00 brd ff:ff:ff:ff:ff:ff, spoof checking off, link-state auto, trust off
    RX: bytes  packets  mcast   bcast   dropped
    1 2 3 4 5
4: ens1f0np0.100@ens1f0np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4200 qdisc noqueue state UP mode DEFAULT
    link/ether 0c:42:a1:00:00:01 brd ff:ff:ff:ff:ff:ff
    vlan protocol 802.1Q id 100 <REORDER_HDR>
"""


def test_older_layout_vf_blocks_and_vlans():
    report = parse_ip_link(OLD_IPROUTE2)
    port = report.links["ens1f0np0"]
    assert (port.mtu, port.parentbus, port.parentdev, port.altnames) == (4200, "pci", "0000:3c:00.0", ["enp60s0f0np0"])
    assert port.counters == {"rx_bytes": 98765, "rx_packets": 4321, "rx_errors": 17, "rx_dropped": 0,
                             "rx_overrun": 0, "rx_mcast": 12, "tx_bytes": 12345, "tx_packets": 678, "tx_errors": 0,
                             "tx_dropped": 0, "tx_carrier": 0, "tx_collsns": 0}
    vlan = report.links["ens1f0np0.100"]
    assert (vlan.parent, vlan.parentdev, vlan.counters) == ("ens1f0np0", None, {})


def test_truncated_and_stray_lines_are_errors():
    report = parse_ip_link("    RX: bytes packets\n2: eth0: <UP> mtu 9000 state UP\n    RX: bytes packets\n    1\n")
    assert report.links["eth0"].counters == {}
    assert report.errors == ["line 1: outside any interface: 'RX: bytes packets'",
                             "eth0: RX values do not match their columns"]
