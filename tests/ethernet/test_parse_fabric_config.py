"""QoS configuration parsers: mlnx_qos, dcb and dcbtool in the layouts those tools print, and the real mlx5 ECN
enable files of the procfs fixture."""

from __future__ import annotations

from fabricase.parsers.fabric_config import ecn_enabled_priorities, parse_dcb, parse_dcbtool_pfc, parse_mlnx_qos

from .conftest import FIXTURES

# The layout of mlnx_qos's pretty_print (Mellanox/mlnx-tools python/mlnx_qos), MLNX_OFED 5.x and later.
MLNX_QOS = (
    "DCBX mode: OS controlled\n"
    "Priority trust state: dscp\n"
    "dscp2prio mapping:\n"
    "\tprio:0 dscp:07,06,05,04,03,02,01,00,\n"
    "\tprio:3 dscp:31,30,29,28,27,26,25,24,\n"
    "default priority:\n"
    "Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,total_size=1048320\n"
    "Cable len: 7\n"
    "PFC configuration:\n"
    "\tpriority    0   1   2   3   4   5   6   7\n"
    "\tenabled     0   0   0   1   0   0   0   0   \n"
    "\tbuffer      0   0   0   1   0   0   0   0   \n"
    "tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%\n"
    "\t priority:  0\n"
)
# MLNX_OFED 4.x printed colons after the row names.
MLNX_QOS_OLD = """Priority trust state: pcp
PFC configuration:
        priority:  0   1   2   3   4   5   6   7
        enabled:   1   0   0   1   1   0   0   0
tc: 0 ratelimit: unlimited, tsa: ets, bw: 12%
"""


def test_mlnx_qos():
    cfg = parse_mlnx_qos(MLNX_QOS)
    assert (cfg.pfc_enabled, cfg.trust, cfg.dcbx_mode, cfg.errors) == ([3], "dscp", "OS controlled", [])
    old = parse_mlnx_qos(MLNX_QOS_OLD)
    assert (old.pfc_enabled, old.trust, old.dcbx_mode) == ([0, 3, 4], "pcp", None)
    off = parse_mlnx_qos(MLNX_QOS.replace("0   0   0   1   0   0   0   0   \n\tbuffer", "0   0   0   0   0   0   0"
                                                                                          "   0   \n\tbuffer"))
    assert off.pfc_enabled == []
    truncated = parse_mlnx_qos("Priority trust state: dscp\nPFC configuration:\n\tpriority    0   1\n")
    assert truncated.pfc_enabled is None and truncated.errors == ["PFC configuration without an enabled row"]
    bad = parse_mlnx_qos("PFC configuration:\n\tpriority 0 1 2\n\tenabled 1 0\n")
    assert bad.pfc_enabled is None and bad.errors == ["unreadable PFC enabled row: 'enabled 1 0'"]
    unsupported = parse_mlnx_qos("Priority trust state is not supported on your system\n")
    assert (unsupported.trust, unsupported.pfc_enabled) == (None, None)


def test_dcb_pfc_and_apptrust():
    cfg = parse_dcb("pfc-cap 8 macsec-bypass off delay 4096\nprio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:on 7:on\n"
                    "order: dscp pcp\n")
    assert (cfg.pfc_enabled, cfg.trust, cfg.errors) == ([6, 7], "dscp", [])
    one_line = parse_dcb("pfc-cap 8 prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off delay 0\n")
    assert (one_line.pfc_enabled, one_line.trust) == ([3], None)
    assert parse_dcb("prio-pfc\n").errors == ["unreadable prio-pfc: 'prio-pfc'"]


def test_dcbtool_pfcup_both_layouts():
    spaced = parse_dcbtool_pfc("Command:    Get Config\nFeature:    Priority Flow Control\nStatus:     Successful\n"
                               "pfcup:      0       0       1       1       1       0       1       0\n")
    assert spaced.pfc_enabled == [2, 3, 4, 6]
    assert parse_dcbtool_pfc("pfcup: 00010000\n").pfc_enabled == [3]
    assert parse_dcbtool_pfc("pfcup: 0001\n").errors == ["unreadable pfcup: '0001'"]
    assert parse_dcbtool_pfc("Connection refused\n").pfc_enabled is None


def test_real_mlx5_ecn_enable_files():
    ecn = FIXTURES / "ethernet/prometheus-procfs-sysfs/sys/class/net/eth0/ecn"
    for role, expected in (("roce_np", [0, 1, 3, 4, 6, 7]), ("roce_rp", [0, 1, 3, 4, 6])):
        files = {int(f.name): f.read_text() for f in (ecn / role / "enable").iterdir()}
        assert len(files) == 8
        assert ecn_enabled_priorities(files) == expected
    assert ecn_enabled_priorities({3: None, 4: ""}) is None
    assert ecn_enabled_priorities({3: "0\n", 4: "junk"}) == []
