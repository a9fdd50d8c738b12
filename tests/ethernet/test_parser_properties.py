"""Property tests for this part's parsers: any text (random, truncated real captures, undecodable bytes after
errors="replace", huge numbers, unknown counters) parses without an exception, and nothing comes out that was not
in the text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabricase.parsers.ethtool import (
    parse_ethtool_driver,
    parse_ethtool_fec,
    parse_ethtool_link,
    parse_ethtool_module,
    parse_ethtool_stats,
    split_sections,
)
from fabricase.parsers.fabric_config import parse_dcb, parse_dcbtool_pfc, parse_mlnx_qos
from fabricase.parsers.iplink import parse_ip_link
from fabricase.parsers.pcie import parse_aer_counters, parse_lspci_vvv, parse_pci_tree, parse_pcie_speed

from .conftest import FIXTURES

_WORDS = st.sampled_from(
    ["### eth0\n", "### ", "NIC statistics:\n", "     rx_packets: ", "[0]: ", ": ", ":", "12", "0", "-1",
     "18446744073709551615", "9" * 60, "\n", " ", "\t", "Speed: ", "400000Mb/s", "Lanes: ", "Link detected: yes",
     "Active FEC encoding: RS", "driver: mlx5_core", "Module temperature", " degrees C", "mW / -inf dBm",
     "(Channel 1)", "2: eth0: <UP,LOWER_UP> mtu 9000 state UP\n", "    RX:  bytes packets errors\n", "vf 0 ",
     "3b:00.0 3D controller: NVIDIA\n", "\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (ok)\n", "LnkCap:",
     "RxErr 3\n", "TOTAL_ERR_COR 3\n", "PFC configuration:\n", "\tpriority 0 1 2 3\n", "\tenabled 0 0 0 1\n",
     "prio-pfc 3:on 4:off", "order: dscp", "pfcup: 00010000", "Priority trust state: dscp", " -> ../../../devices/",
     "0000:17:00.0/0000:19:00.0", "\ufffd", "\r"]
)  # fmt: skip
TEXT = st.one_of(st.text(), st.lists(st.one_of(_WORDS, st.text(max_size=3))).map("".join))
REAL = [p.read_text() for p in sorted((FIXTURES / "ethernet/ethtool-S_isc-ethq").glob("*.txt"))] + [
    (FIXTURES / "pcie/leptonai-gpud/lspci_gb200.txt").read_text(),
    (FIXTURES / "ethernet/ip-link_local-vm/ip-s-s-d-link.txt").read_text(),
]


def _numbers_in(text: str, values) -> None:
    for value in values:
        assert str(value) in text or repr(value) in text or f"{value:g}" in text


@settings(max_examples=300)
@given(TEXT)
def test_stats_values_and_names_come_from_the_text(text):
    table = parse_ethtool_stats(text)
    for name, value in table.items():
        assert name in text and str(value) in text and 0 <= value < 10**40
    sections, _ = split_sections(text)
    for name, body in sections.items():
        assert f"### {name}" in text and body in text


@given(TEXT)
def test_ethtool_records_come_from_the_text(text):
    link = parse_ethtool_link(text)
    _numbers_in(text, [v for v in (link.speed_mbps, link.lanes) if v is not None])
    fec = parse_ethtool_fec(text)
    assert fec.active is None or fec.active in text
    info = parse_ethtool_driver(text)
    assert all(v is None or v in text for v in (info.driver, info.version, info.firmware_version, info.bus_info))
    module = parse_ethtool_module(text)
    readings = [module.temperature_c, module.voltage_v, *module.rx_power_mw.values(), *module.tx_power_mw.values()]
    assert all(v is None or str(v).rstrip("0").rstrip(".") in text or str(v) in text for v in readings)


@given(TEXT)
def test_ip_link_values_come_from_the_text(text):
    report = parse_ip_link(text)
    for name, link in report.links.items():
        assert f"{name}" in text
        _numbers_in(text, link.counters.values())
        if link.mtu is not None:
            assert f"mtu {link.mtu}" in " ".join(text.split())


@given(TEXT)
def test_pcie_values_come_from_the_text(text):
    for bdf, dev in parse_lspci_vvv(text).devices.items():
        assert bdf[-7:].lower() in text.lower()
        for width in (dev.cap_width, dev.sta_width):
            assert width is None or f"x{width}" in text
    aer = parse_aer_counters(text)
    _numbers_in(text, [*aer.counters.values(), *([aer.total] if aer.total is not None else [])])
    speed = parse_pcie_speed(text)
    assert speed is None or "GT/s" in text
    for child, parent in parse_pci_tree(text).items():
        assert child[-7:] in text and parent[-7:] in text


@given(TEXT)
def test_qos_values_come_from_the_text(text):
    for cfg in (parse_mlnx_qos(text), parse_dcb(text), parse_dcbtool_pfc(text)):
        assert cfg.trust is None or cfg.trust in text
        assert cfg.pfc_enabled is None or all(0 <= p <= 7 for p in cfg.pfc_enabled)
        if cfg.pfc_enabled:
            assert "1" in text or ":on" in text


@settings(max_examples=200)
@given(st.sampled_from(REAL), st.integers(0, 20000), st.binary(max_size=40))
def test_truncated_and_corrupted_real_captures(real, cut, junk):
    text = real[:cut] + junk.decode("utf-8", errors="replace")
    for parse in (parse_ethtool_stats, parse_ip_link, parse_lspci_vvv, parse_ethtool_link, parse_ethtool_module,
                  parse_mlnx_qos, parse_aer_counters):
        parse(text)
    table = parse_ethtool_stats(text)
    full = parse_ethtool_stats(real)
    # a cut never invents a counter: a name is from the capture, or from the lines the junk is part of (junk such
    # as b"*:0" is itself a counter line); every complete line before the cut keeps its value
    tail = text[real.rfind("\n", 0, cut) + 1:]
    assert all(name in real or name in tail for name in table)
    for name in list(table)[:-1]:
        if name in full:
            assert table[name] == full[name]


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_.]{0,20}", fullmatch=True), st.integers(0, 2**64 - 1),
                       max_size=30))
def test_stats_round_trip_unknown_counters(counters):
    text = "NIC statistics:\n" + "".join(f"     {name}: {value}\n" for name, value in counters.items())
    table = parse_ethtool_stats(text)
    assert dict(table) == counters and table.errors == []


def test_aer_totals_memoized_by_text_agree_with_the_parser_and_keep_no_long_text():
    from fabricase.analysis import pcie
    from fabricase.parsers.pcie import parse_aer_counters

    short = "RxErr 0\nBadTLP 3\nTOTAL_ERR_COR 3\n"
    long = short + "Timeout 0\n" * 400  # past the memo's limit: parsed every time, never kept
    pcie._short_aer_total.cache_clear()
    for text in (short, short, "17\n", long, long, "", "garbage"):
        assert pcie._aer_total(text) == parse_aer_counters(text).total
    assert pcie._aer_total(None) is None
    info = pcie._short_aer_total.cache_info()
    assert (info.hits, info.currsize) == (1, 4)  # short twice (one hit), "17", "", "garbage"
