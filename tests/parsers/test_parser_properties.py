"""Property tests: any text is parsed without an exception, and nothing comes out that was not in the text."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fabricase.parsers.identity import parse_os_release, parse_uname
from fabricase.parsers.kernel_log import parse_kernel_log
from fabricase.parsers.procnet import parse_proc_net_dev, parse_proc_net_snmp
from fabricase.parsers.sysfs import parse_sysfs_int, parse_sysfs_speed, parse_sysfs_str

# Text shaped like the inputs (digits, colons, separators, keywords) finds more paths than uniform unicode.
_WORDS = st.sampled_from(
    ["Tcp:", "Ip:", "TcpExt:", "eth0:", "|", "face", "bytes", "-1", "0", "12", "x", "NVRM: Xid (PCI:0000:3b:00): ",
     "79", "AER: ", "Link is Down", "Link up", "[ 1.5] ", "kernel: ", "0000:3b:00.0 ", "=", '"', "'", "\\", "\n",
     " ", "\t", "2026-11-29T23:00:00,1+00:00 ", "6,1,2,-;", "x86_64", "GNU/Linux", "#1"]
)  # fmt: skip
TEXT = st.one_of(st.text(), st.lists(st.one_of(_WORDS, st.text(max_size=3))).map("".join))


@given(TEXT)
def test_sysfs_values_come_from_the_text(text):
    value = parse_sysfs_int(text)
    if value is not None:
        assert str(abs(value)) in text or hex(value)[2:] in text.lower()
    speed = parse_sysfs_speed(text)
    assert speed is None or speed == value
    string = parse_sysfs_str(text)
    assert string is None or (string in text and string == string.strip() and string)


@given(TEXT)
def test_snmp_keys_and_values_come_from_the_text(text):
    for prefix, table in parse_proc_net_snmp(text).items():
        assert f"{prefix}:" in text
        for name, value in table.items():
            assert isinstance(value, int)
            assert name in text and str(value).lstrip("-") in text


@given(TEXT)
def test_proc_net_dev_values_come_from_the_text(text):
    for name, counters in parse_proc_net_dev(text).items():
        assert f"{name}" in text and counters
        for value in counters.values():
            assert isinstance(value, int) and str(abs(value)) in text


@given(TEXT)
def test_identity_values_come_from_the_text(text):
    for key in parse_os_release(text):
        assert f"{key}=" in text
    for value in parse_uname(text).values():
        assert value is None or value in text or all(part in text for part in value.split(" "))


@settings(max_examples=300)
@given(TEXT)
def test_kernel_log_events_come_from_the_text(text):
    log = parse_kernel_log(text)
    assert log.total_lines == len(text.splitlines())
    for event in log:
        assert event.message in text
        assert event.kind in {"link-down", "link-up", "nvidia-xid", "nvswitch-sxid", "pcie-aer"}
        for part in (event.device, event.interface, event.timestamp):
            assert part is None or part in text or re.fullmatch(r"\d+\.\d{6}", part)  # kmsg usec -> seconds
        if event.code is not None:
            assert str(event.code) in text


@given(
    st.dictionaries(
        st.from_regex(r"[A-Z][A-Za-z]{0,8}", fullmatch=True),
        st.dictionaries(
            st.from_regex(r"[A-Z][A-Za-z0-9]{0,12}", fullmatch=True), st.integers(-(2**63), 2**64), min_size=1
        ),
        max_size=5,
    )
)
def test_snmp_round_trips_what_the_kernel_writes(tables):
    text = "".join(
        f"{prefix}: {' '.join(table)}\n{prefix}: {' '.join(str(v) for v in table.values())}\n"
        for prefix, table in tables.items()
    )
    assert parse_proc_net_snmp(text) == tables


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True),
        st.lists(st.integers(0, 2**64 - 1), min_size=16, max_size=16),
        max_size=6,
    )
)
def test_proc_net_dev_round_trips(devices):
    lines = ["Inter-|   Receive |  Transmit", " face |bytes packets errs drop fifo frame compressed multicast|"
             "bytes packets errs drop fifo colls carrier compressed"]  # fmt: skip
    lines += [f"{name:>6}: " + " ".join(map(str, values)) for name, values in devices.items()]
    parsed = parse_proc_net_dev("\n".join(lines))
    assert {name: list(c.values()) for name, c in parsed.items()} == devices
