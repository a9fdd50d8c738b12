from pathlib import Path

from fabricase.parsers.procnet import PROC_NET_DEV_COLUMNS, parse_proc_net_dev, parse_proc_net_snmp

PROC = Path(__file__).parents[1] / "fixtures/real/local-vm_procfs-sysfs-net/proc/net"

SNMP = """\
Ip: Forwarding DefaultTTL InReceives
Ip: 2 64 1110
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn RetransSegs
Tcp: 1 200 120000 -1 12
"""


def test_snmp_pairs_headers_with_values():
    assert parse_proc_net_snmp(SNMP) == {
        "Ip": {"Forwarding": 2, "DefaultTTL": 64, "InReceives": 1110},
        "Tcp": {"RtoAlgorithm": 1, "RtoMin": 200, "RtoMax": 120000, "MaxConn": -1, "RetransSegs": 12},
    }


def test_snmp_garbled_value_is_left_out_not_zero():
    text = "Tcp: InSegs OutSegs RetransSegs\nTcp: 10 x 3\n"
    assert parse_proc_net_snmp(text) == {"Tcp": {"InSegs": 10, "RetransSegs": 3}}


def test_snmp_header_without_values_and_stray_lines():
    text = "junk\nTcp: InSegs OutSegs\nUdp: InDatagrams\nUdp: 7\nTcp: 5 6\n: 1 2\n"
    # the Tcp header lost its value line (the next Tcp line follows a Udp pair), so Tcp is not reported
    assert parse_proc_net_snmp(text) == {"Udp": {"InDatagrams": 7}}


def test_snmp_short_value_line_keeps_what_pairs():
    assert parse_proc_net_snmp("Tcp: A B C\nTcp: 1 2\n") == {"Tcp": {"A": 1, "B": 2}}


def test_snmp_empty_and_none():
    assert parse_proc_net_snmp("") == {}
    assert parse_proc_net_snmp(None) == {}


def test_real_proc_net_snmp():
    tables = parse_proc_net_snmp((PROC / "snmp").read_text())
    assert list(tables) == ["Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite"]
    assert tables["Tcp"]["MaxConn"] == -1
    assert tables["Tcp"]["RetransSegs"] == 0
    assert tables["Ip"]["DefaultTTL"] == 64
    assert tables["IcmpMsg"] == {"InType3": 1}
    assert len(tables["Icmp"]) == 29


def test_real_proc_net_netstat():
    text = (PROC / "netstat").read_text()
    tables = parse_proc_net_snmp(text)
    assert set(tables) == {"TcpExt", "IpExt", "MPTcpExt"}
    header = next(line for line in text.splitlines() if line.startswith("TcpExt:"))
    assert len(tables["TcpExt"]) == len(header.split()) - 1
    assert "TCPLostRetransmit" in tables["TcpExt"]


DEV = """\
Inter-|   Receive                                            |  Transmit
 face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed
    lo:    3193  29  0 0 0 0 0 0     3193  29 0 0 0 0 0 0
  eth2: 42640368 1084 57 3 0 9 0 0    88898 812 0 0 0 0 4 0
"""


def test_proc_net_dev():
    devices = parse_proc_net_dev(DEV)
    assert list(devices) == ["lo", "eth2"]
    assert devices["eth2"]["rx_errs"] == 57
    assert devices["eth2"]["rx_frame"] == 9
    assert devices["eth2"]["tx_carrier"] == 4
    assert list(devices["eth2"]) == list(PROC_NET_DEV_COLUMNS)


def test_proc_net_dev_without_header_and_old_format():
    # kernels before 2.6 wrote no space after the colon
    assert parse_proc_net_dev("eth0:100 2 0 0 0 0 0 0 200 3 0 0 0 0 0 0\n")["eth0"]["tx_packets"] == 3


def test_proc_net_dev_garbage():
    assert parse_proc_net_dev("no colon here\n: 1 2\nbad name: 1\nx: y z\n") == {}
    assert parse_proc_net_dev(None) == {}


def test_real_proc_net_dev():
    devices = parse_proc_net_dev((PROC / "dev").read_text())
    assert sorted(devices) == ["eth0", "ifb0", "ifb1", "lo"]
    assert all(len(counters) == 16 for counters in devices.values())
    assert devices["lo"]["rx_bytes"] == devices["lo"]["tx_bytes"]
