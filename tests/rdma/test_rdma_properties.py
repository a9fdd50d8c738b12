"""Property tests: the RDMA parsers never raise and never report a value that is not in their input."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fabricase.parsers.ibtools import (
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_rdma_link,
    parse_rdma_statistic,
)
from fabricase.parsers.rdma import NORMALIZED, parse_phys_state, parse_port_state, parse_rate, parse_rdma_port

# Fragments of the real formats: more paths are reached than with uniform unicode.
_WORDS = st.sampled_from([
    "CA 'mlx5_0'\n", "\tPort 1:\n", "\t\tState: Active\n", "\t\tPhysical state: Polling\n", "\t\tRate: 400\n",
    "Infiniband device 'mlx5_1' port 1 status:\n", "\tstate:\t4: ACTIVE\n", "\trate:\t200 Gb/sec (4X HDR)\n",
    "hca_id:\tmlx4_1\n", "\t\tport:\t2\n", "\t\t\tstate:\t\tPORT_DOWN (1)\n", "\t\t\tactive_width:\t4X (2)\n",
    "\t\t\tactive_speed:\t2.5 Gbps (1)\n", "link mlx5_0/1 ", "state ACTIVE ", "physical_state LINK_UP ",
    "netdev eth0 ", "1/1: mlx5_0/1: ", "out_of_sequence ", "12 ", "18446744073709551616 ", "-3 ", "x ",
    "optional-counters ", "cc_rx_ce_pkts,cc_tx_cnp_pkts ", "$ rdma statistic\n", "ibpanic: failed\n", "\n", " ",
    "\t", ":", "(", ")", "/", "\ufffd", "5: LinkUp", "0: <unknown>", "Gb/sec", "4X", "NDR",
])  # fmt: skip
TEXT = st.one_of(st.text(), st.lists(st.one_of(_WORDS, st.text(max_size=3))).map("".join))
BYTES_AS_TEXT = st.binary().map(lambda b: b.decode("utf-8", errors="replace"))


def _numbers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"[0-9]+", text)}


@settings(max_examples=300)
@given(st.one_of(TEXT, BYTES_AS_TEXT))
def test_tool_parsers_never_raise_and_take_devices_from_the_text(text):
    for parse in (parse_ibstat, parse_ibstatus, parse_ibv_devinfo, parse_rdma_link):
        report = parse(text)
        for p in report.ports:
            assert p.device in text and str(p.port) in text
            assert p.state_code is None or str(p.state_code) in text or p.state is not None
            assert p.rate_gbps is None or p.rate_gbps >= 0
        assert all(isinstance(e, str) for e in report.errors)


@settings(max_examples=300)
@given(st.one_of(TEXT, BYTES_AS_TEXT))
def test_rdma_statistic_values_come_from_the_text(text):
    stats = parse_rdma_statistic(text)
    numbers = _numbers(text)
    for (device, port), counters in stats.links.items():
        assert f"{device}/{port}" in text
        for name, value in counters.items():
            assert name in text and value in numbers and value >= 0


_RELS = st.sampled_from(["state", "phys_state", "rate", "link_layer", "gid_attrs/ndevs/0", "counters/symbol_error",
                         "counters/port_xmit_data", "counters_ext/port_xmit_data_64", "hw_counters/out_of_sequence",
                         "hw_counters/lifespan", "hw_counters/brand_new_counter", "counters/nested/deeper"])


@settings(max_examples=300)
@given(st.dictionaries(_RELS, st.one_of(st.none(), TEXT, BYTES_AS_TEXT, st.integers(-1, 2**80).map(str))))
def test_sysfs_port_never_invents_values(files):
    rec = parse_rdma_port("dev0", 1, files)
    for name, value in rec.raw.items():
        rel = rec.raw_sources[name]
        assert files[rel] is not None and value == int(files[rel].strip())
    for metric, value in rec.normalized.items():
        raws = [(n, s) for n, s in NORMALIZED[metric].sources if n in rec.raw]
        assert value == rec.raw[raws[0][0]] * raws[0][1]
    assert "lifespan" not in rec.raw and "nested/deeper" not in "".join(rec.raw)
    if rec.rate_gbps is not None:
        assert "Gb/sec" in files["rate"]


@given(TEXT)
def test_state_and_rate_helpers_are_total(text):
    for parse in (parse_port_state, parse_phys_state):
        code, name = parse(text)
        assert code is None or str(code) in text or name is not None
    rate, width, speed = parse_rate(text)
    assert (rate is None) or ("Gb/sec" in text)
