"""ethtool parsers against every real capture of their kind, and the formats ethtool prints."""

from __future__ import annotations

import pytest

from fabricase.analysis.ethernet import normalize
from fabricase.parsers.ethtool import (
    parse_ethtool_driver,
    parse_ethtool_fec,
    parse_ethtool_link,
    parse_ethtool_module,
    parse_ethtool_stats,
    split_sections,
)

from .conftest import FIXTURES

ETHQ = FIXTURES / "ethernet" / "ethtool-S_isc-ethq"


def _stats(driver: str):
    return parse_ethtool_stats((ETHQ / f"ethtool-S_{driver}.txt").read_text())


# driver -> (number of counters, {counter: value a fabric engineer would look at})
REAL_STATS = {
    "mlx5_core": (751, {"rx_packets": 845320277, "rx_crc_errors_phy": 0, "rx_pcs_symbol_err_phy": 0,
                        "rx_corrected_bits_phy": 0, "link_down_events_phy": 0, "rx_discards_phy": 0,
                        "rx_out_of_buffer": 0, "tx_pci_signal_integrity": 34, "rx_prio0_packets": 845715962,
                        "rx15_packets": 50228252}),
    "bnxt_en": (499, {"[0]: rx_discards": 11763190, "rx_total_ring_discards": 655430134, "rx_stat_discard": 49337,
                      "rx_bits": 4621497487696704, "rx_buffer_passed_threshold": 417, "rx_pcs_symbol_err": 0,
                      "rx_fec_uncorrectable_blocks": 0, "pfc_pri3_rx_duration_us": 0, "link_down_events": 0}),
    "ice": (602, {"rx_crc_errors.nic": 0, "rx_dropped.nic": 0, "tx_priority_3_xoff.nic": 0, "tx_queue_0_packets": 5,
                  "rx_bytes.nic": 848255752}),
    "i40e": (202, {"rx_packets": 371706048609, "port.rx_crc_errors": 0, "port.rx_dropped": 0,
                   "port.rx_priority_7_xon_2_xoff": 0, "tx-11.tx_bytes": 4319338748501}),
    "ena": (104, {"tx_timeout": 0, "interface_up": 1, "queue_0_tx_cnt": 2005711, "ena_admin_q_submitted_cmd": 28}),
}  # fmt: skip


@pytest.mark.parametrize("driver", sorted(REAL_STATS))
def test_every_real_ethtool_stats_capture(driver):
    count, expected = REAL_STATS[driver]
    table = _stats(driver)
    assert table.errors == []
    assert len(table) == count
    assert {name: table[name] for name in expected} == expected


def test_bnxt_per_ring_names_stay_apart_from_port_counters():
    table = _stats("bnxt_en")
    assert table["[0]: rx_errors"] == 0 and "rx_errors" not in table
    assert sum(1 for name in table if name.startswith("[")) == 288


REAL_NORMALIZED = {
    "mlx5_core": {"phy.symbol_errors_uncorrected": ("rx_pcs_symbol_err_phy",), "phy.fcs_errors": ("rx_crc_errors_phy",),
                  "rx.discards_nobuf_port": ("rx_discards_phy",), "rx.discards_nobuf_host": ("rx_out_of_buffer",),
                  "pcie.nic_signal_integrity": ("rx_pci_signal_integrity", "tx_pci_signal_integrity")},
    "bnxt_en": {"phy.symbol_errors_uncorrected": ("rx_pcs_symbol_err",), "phy.fcs_errors": ("rx_fcs_err_frames",),
                "phy.rx_bits": ("rx_bits",), "pfc.rx_pause_us.p3": ("pfc_pri3_rx_duration_us",),
                "pfc.tx_pause_frames.p3": ("tx_pfc_ena_frames_pri3",),
                "rx.discards_nobuf_host": ("rx_total_ring_discards",),
                "pfc.pause_storm_events": ("continuous_pause_events", "continuous_roce_pause_events")},
    "ice": {"phy.fcs_errors": ("rx_crc_errors.nic",), "pfc.rx_pause_frames.p3": ("rx_priority_3_xoff.nic",)},
    "i40e": {"phy.fcs_errors": ("port.rx_crc_errors",), "rx.discards_nobuf_port": ("port.rx_dropped",)},
    "ena": {},
}  # fmt: skip


@pytest.mark.parametrize("driver", sorted(REAL_NORMALIZED))
def test_vendor_names_map_to_the_normalized_schema(driver):
    chosen = normalize(_stats(driver), None)
    assert {m: chosen.get(m) for m in REAL_NORMALIZED[driver]} == REAL_NORMALIZED[driver]
    # mlx5 with PFC off has no per-priority pause counters: absent, not zero
    if driver == "mlx5_core":
        assert not any(m.startswith("pfc.") for m in chosen)
    if driver == "ena":
        assert chosen == {}


def test_stats_header_indent_and_unreadable_lines():
    text = "NIC statistics:\n     rx_packets: 12\n     [3]: rx_discards: 7\n  garbage here\n     tx_bytes: 1x\n"
    table = parse_ethtool_stats(text)
    assert dict(table) == {"rx_packets": 12, "[3]: rx_discards": 7}
    assert table.errors == ["line 4: not a counter: 'garbage here'", "line 5: not a counter: 'tx_bytes: 1x'"]
    repeated = parse_ethtool_stats("a: 1\na: 2\n")
    assert dict(repeated) == {"a": 1} and repeated.errors == ["repeated counter 'a' ignored"]
    assert dict(parse_ethtool_stats("big: 18446744073709551615\n")) == {"big": 2**64 - 1}


def test_sections_split_per_device():
    text = "### eth0\nNIC statistics:\n     a: 1\n### eth1\n### eth2\n     a: 3\n"
    sections, errors = split_sections(text)
    assert list(sections) == ["eth0", "eth1", "eth2"] and sections["eth1"] == "" and errors == []
    assert dict(parse_ethtool_stats(sections["eth2"])) == {"a": 3}
    sections, errors = split_sections("stray\n### eth0\nx\n### eth0\ny\n")
    assert sections == {"eth0": "x\n"}
    assert errors == ["output before the first ### section header", "repeated section 'eth0' ignored"]
    assert split_sections(None) == ({}, [])


def test_real_azure_link_settings():
    link = parse_ethtool_link((FIXTURES / "ethernet/azhpc-diagnostics-samples/endure_ethtool.out").read_text())
    assert (link.interface, link.speed_mbps, link.duplex, link.link_detected, link.autoneg) == (
        "eth1", 54000, "Full", True, False)
    assert link.lanes is None and link.port == "Other" and link.errors == []


LINK_400G = """Settings for eth3:
\tSupported ports: [ Backplane ]
\tSupported link modes:   100000baseKR2/Full
\t                        400000baseCR4/Full
\tSupported FEC modes: None\t RS\t BASER\t LLRS
\tSpeed: 400000Mb/s
\tLanes: 4
\tDuplex: Full
\tAuto-negotiation: on
\tPort: Direct Attach Copper
\tLink detected: yes
"""


def test_link_settings_with_lanes_and_no_link():
    link = parse_ethtool_link(LINK_400G)
    assert (link.speed_mbps, link.lanes, link.port) == (400000, 4, "Direct Attach Copper")
    down = parse_ethtool_link("Settings for eth9:\n\tSpeed: Unknown!\n\tDuplex: Unknown! (255)\n\tLink detected: no\n")
    assert (down.speed_mbps, down.duplex, down.link_detected, down.errors) == (None, None, False, [])
    assert parse_ethtool_link("Speed: fast\n").errors == ["unreadable speed 'fast'", "no 'Settings for' line"]


def test_fec_old_and_new_wording():
    old = parse_ethtool_fec("FEC parameters for eth0:\nSupported/Configured FEC encodings: Auto RS\n"
                            "Active FEC encoding: RS\n")
    new = parse_ethtool_fec("FEC parameters for eth0:\nConfigured FEC encodings: Auto\nActive FEC encoding: Off\n")
    assert (old.configured, old.active) == (["Auto", "RS"], "RS")
    assert (new.configured, new.active) == (["Auto"], "Off")
    assert parse_ethtool_fec("").errors == [] and parse_ethtool_fec("nonsense").errors


def test_driver_info():
    info = parse_ethtool_driver("driver: mlx5_core\nversion: 24.10-1.1.4\nfirmware-version: 28.39.1002 (MT_0000000838)"
                                "\nexpansion-rom-version: \nbus-info: 0000:1a:00.0\nsupports-statistics: yes\n")
    assert (info.driver, info.version, info.firmware_version, info.bus_info) == (
        "mlx5_core", "24.10-1.1.4", "28.39.1002 (MT_0000000838)", "0000:1a:00.0")
    assert info.expansion_rom_version is None and info.errors == []


QSFP = """\tIdentifier                                : 0x11 (QSFP28)
\tVendor name                               : FINISAR CORP
\tVendor PN                                 : FTLC9551REPM
\tModule temperature                        : 45.22 degrees C / 113.39 degrees F
\tModule voltage                            : 3.3359 V
\tLaser tx bias current (Channel 1)         : 8.162 mA
\tTransmit avg optical power (Channel 1)    : 1.0391 mW / 0.17 dBm
\tRcvr signal avg optical power(Channel 1)  : 0.9603 mW / -0.18 dBm
\tRcvr signal avg optical power(Channel 2)  : 0.0000 mW / -inf dBm
\tLaser tx power high alarm threshold       : 1.0000 mW / 0.00 dBm
\tModule temperature high alarm             : Off
\tLaser rx power low alarm (Channel 2)      : On
"""
SFP = """\tIdentifier                                : 0x03 (SFP)
\tLaser bias current                        : 3.634 mA
\tLaser output power                        : 0.3181 mW / -4.97 dBm
\tReceiver signal average optical power     : 0.3444 mW / -4.63 dBm
\tModule temperature                        : 35.32 degrees C / 95.58 degrees F
"""


def test_module_diagnostics_qsfp_and_sfp():
    qsfp = parse_ethtool_module(QSFP)
    assert (qsfp.identifier, qsfp.vendor_name, qsfp.temperature_c, qsfp.voltage_v) == (
        "0x11 (QSFP28)", "FINISAR CORP", 45.22, 3.3359)
    assert qsfp.rx_power_mw == {1: 0.9603, 2: 0.0} and qsfp.tx_power_mw == {1: 1.0391} and qsfp.tx_bias_ma == {1: 8.162}
    assert qsfp.alarms == ["Laser rx power low alarm (Channel 2)"]
    sfp = parse_ethtool_module(SFP)
    assert (sfp.tx_power_mw, sfp.rx_power_mw, sfp.tx_bias_ma, sfp.temperature_c) == (
        {1: 0.3181}, {1: 0.3444}, {1: 3.634}, 35.32)
    unsupported = parse_ethtool_module("Cannot get module EEPROM information: Operation not supported\n")
    assert unsupported.temperature_c is None and unsupported.errors
