"""The optional C extension (fabricase._native) against the Python it stands in for: the same result on real,
mutated, generated and hostile inputs, or a refusal that sends the input to the Python code. With the extension
built, the rest of the suite runs the C path; these tests also run each caller with the C path turned off, so the
Python path stays tested too. CI builds the extension (a C compiler and Python's headers are on its image): there a
missing extension is a failure, not a skip."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture.test_framing_speedup import (  # noqa: F401 - host_streams: a fixture
    _mutate,
    _suite_stream_literals,
    framed_streams,
    host_streams,
)
from fabricase import capture_scan, native, pipeline
from fabricase.caps import MAX_ITEM_BYTES
from fabricase.collectors import framing
from fabricase.errors import CaptureError
from fabricase.parsers import ethtool

if not native.IN_USE:
    if os.environ.get("CI") == "true" and not os.environ.get("FABRICASE_NO_NATIVE"):
        pytest.fail("fabricase._native is not built (setup.py's extension: a C compiler and Python.h)",
                    pytrace=False)
    pytest.skip("fabricase._native is not built", allow_module_level=True)

from fabricase import _native  # noqa: E402

ETHTOOL = Path(__file__).parent / "fixtures/real/ethernet/ethtool-S_isc-ethq"


def _real_ethtool_texts() -> list[str]:
    texts = [p.read_text() for p in sorted(ETHTOOL.glob("ethtool-S_*.txt"))]
    assert len(texts) >= 5  # bnxt_en, ena, i40e, ice, mlx5_core
    return texts


def _plain_or_declined(text: str, hints: tuple[tuple[str, ...], ...] = ()) -> None:
    got = _native.plain_counters(text)
    if not text.isascii():
        assert got is NotImplemented
        return
    want = ethtool._plain_table(text)
    assert got == want
    if got is not None:
        assert list(got) == list(want)  # output order
    for names in (*hints, tuple(want or ()), tuple(want or ())[:-1], tuple(reversed(list(want or ())))):
        hinted = _native.plain_counters(text, names)  # a layout read before: the values alone when it fits
        if type(hinted) is list:
            assert want is not None and names == tuple(want) and hinted == list(want.values())
        else:
            assert hinted == want


def _python_parse(text: str, monkeypatch) -> ethtool.CounterTable:
    with monkeypatch.context() as m:
        m.setattr(native, "plain_counters", None)
        return ethtool.parse_ethtool_stats(text)


def _assert_parse_same(text: str, monkeypatch) -> None:
    got, want = ethtool.parse_ethtool_stats(text), _python_parse(text, monkeypatch)
    assert (dict(got), list(got), got.errors) == (dict(want), list(want), want.errors)


def test_real_ethtool_outputs_read_the_same(monkeypatch):
    plain = 0
    for text in _real_ethtool_texts():
        _plain_or_declined(text)
        plain += bool(_native.plain_counters(text))
        _assert_parse_same(text, monkeypatch)
    assert plain >= 4  # all but bnxt_en's per-ring "[0]: rx_..." lines, which the line parser reads


def test_mutated_ethtool_outputs_read_the_same(monkeypatch):
    rng = random.Random(18)
    alphabet = " \t\r\n:_.-0123456789aZ#\x0b\x0c\x1c\x85"
    texts = _real_ethtool_texts()
    for _ in range(400):
        text = rng.choice(texts)
        for _ in range(rng.randrange(1, 4)):
            spot = rng.randrange(len(text))
            edit = rng.randrange(3)
            if edit == 0:
                text = text[:spot] + rng.choice(alphabet) + text[spot + 1:]
            elif edit == 1:
                text = text[:spot] + text[spot + 1:]
            else:
                line = text[text.rfind("\n", 0, spot) + 1:text.find("\n", spot) + 1]
                text = text[:spot] + line + text[spot:]  # a repeated counter, or a torn line
        _plain_or_declined(text)
        _assert_parse_same(text, monkeypatch)


_lines = st.lists(st.one_of(
    st.tuples(st.sampled_from(["", " ", "\t", "  \t"]), st.text("az_.-09Z", min_size=0, max_size=6),
              st.sampled_from(["", " ", "\t"]), st.sampled_from([":", "", "::", ": "]),
              st.sampled_from(["", " ", "\r", "\t "]), st.text("0123456789", max_size=42),
              st.sampled_from(["", " ", "\r", " \r", "x"])).map("".join),
    st.sampled_from(["", "   ", "NIC statistics:", "  NIC statistics: ", "\x0bstatistics:\x1c", "statistics",
                     "     [0]: rx_ucast_packets: 1", "rx_bytes.nic: 5", "rx: 99999999999999999999", "rx:12",
                     "rx: -1", "rx: 1 2", "rx: 0x10", "\u00a0rx: 1", "rx: \u0661", "a: 1\r\r", "\r"]),
), max_size=12)


@settings(max_examples=500, deadline=None)
@given(_lines, st.sampled_from(["\n", "\r\n"]), st.booleans(),
       st.lists(st.tuples(st.sampled_from(["rx", "a", "rx_bytes.nic", "", "tx"])).map(tuple), max_size=3))
def test_generated_counter_texts_read_the_same(lines, newline, trailing, names):
    text = newline.join(lines) + (newline if trailing else "")
    _plain_or_declined(text, (tuple(n for (n,) in names),))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_reads_the_same(text):
    _plain_or_declined(text)


def test_large_values_and_their_limits():
    assert _native.plain_counters("a: " + "9" * 40) == {"a": int("9" * 40)}
    assert _native.plain_counters("a: " + "9" * 41) is None
    assert _native.plain_counters("a: 18446744073709551615\nb: 999999999999999999") == {
        "a": 18446744073709551615, "b": 999999999999999999}
    assert _native.plain_counters("a: 1\na: 2") is None  # repeated: the line parser names it
    assert _native.plain_counters("") == {}
    with pytest.raises(TypeError):
        _native.plain_counters(b"a: 1")
    with pytest.raises(TypeError):
        _native.plain_counters("a: 1", ["a"])
    assert _native.plain_counters("a: 1\nb: 2", ("a", "b")) == [1, 2]
    assert _native.plain_counters("a: 1\nb: 2", ("a", 7)) == {"a": 1, "b": 2}  # not a name: read without it
    assert _native.plain_counters("a: 1\nb: 2", ("a", "b\u00e9")) == {"a": 1, "b": 2}
    assert _native.plain_counters("NIC statistics:\n\n", ()) == []
    assert _native.plain_counters("stats:\n\n", ()) is None  # not a header: not a plain table


def test_ports_of_one_layout_read_by_the_names_learned(monkeypatch):
    """parse_ethtool_stats learns a port's names and reads the next output of as many lines by them: the same
    table, and a port with other names (or another value) is read for what it is."""
    monkeypatch.setattr(ethtool, "_NAMES", {})
    mlx5 = (ETHTOOL / "ethtool-S_mlx5_core.txt").read_text()
    first = ethtool.parse_ethtool_stats(mlx5)
    assert ethtool._NAMES[mlx5.count("\n")] == tuple(first)
    again = mlx5.replace(": 0\n", ": 7\n", 3)
    _assert_parse_same(again, monkeypatch)
    renamed = mlx5.replace("rx_", "rz_", 1)
    _assert_parse_same(renamed, monkeypatch)
    assert ethtool.parse_ethtool_stats(renamed) != ethtool.parse_ethtool_stats(again)


# --- the stream's item frames --------------------------------------------------------------------------------


def _scan(data: bytes) -> tuple[list, framing.StreamResult]:
    result = framing.StreamResult()
    return list(framing.scan_stream(data, result)), result


def _assert_scan_same(data: bytes, monkeypatch) -> None:
    got = _scan(data)
    with monkeypatch.context() as m:
        m.setattr(native, "scan_items", None)
        want = _scan(data)
    assert got == want


def test_real_streams_scan_the_same(host_streams, monkeypatch):  # noqa: F811 - the fixture
    for data in host_streams.values():
        items, result = _scan(data)
        assert result.complete and result.error is None and len(items) > 100
        _assert_scan_same(data, monkeypatch)
        batch, stop = _native.scan_items(data, 0, MAX_ITEM_BYTES)
        assert batch == [] and data.startswith(b"@@FC1 BEGIN", stop)  # stops at the first frame not an item


def _mutated(data: bytes, seed: int, count: int) -> Iterator[bytes]:
    """`count` hostile variants of a real stream (one to three edits each), each whole and then cut."""
    rng = random.Random(seed)
    for _ in range(count):
        mutated = data
        for _ in range(rng.randrange(1, 4)):
            mutated = _mutate(mutated, rng)
        yield mutated
        yield mutated[:rng.randrange(len(mutated) + 1)]


def test_mutated_and_cut_streams_scan_the_same(host_streams, monkeypatch):  # noqa: F811 - the fixture
    for data in _mutated(host_streams["efa"], 3, 150):
        _assert_scan_same(data, monkeypatch)


@settings(max_examples=400, deadline=None)
@given(framed_streams())
def test_generated_streams_scan_the_same(data):
    with pytest.MonkeyPatch.context() as m:
        got = _scan(data)
        m.setattr(native, "scan_items", None)
        assert _scan(data) == got


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(-5, 400))
def test_scan_items_never_reads_past_its_input(data, pos):
    stream = b"@@FC1 I " + data
    batch, stop = _native.scan_items(stream, pos, MAX_ITEM_BYTES)
    assert 0 <= stop <= max(len(stream), pos)
    for start, _key, _source, at, end in batch:
        assert start < at <= end < len(stream) and stream[end] == 10


def test_declared_sizes_at_and_over_the_cap():
    for size in (MAX_ITEM_BYTES, MAX_ITEM_BYTES + 1, 10**18, 10**17 * 9):
        data = b"@@FC1 I c file 0 0 %d 0 - - /a\nx\n" % size
        assert _native.scan_items(data, 0, MAX_ITEM_BYTES) == ([], 0)
    assert _native.scan_items(b"@@FC1 I c file 0 0 -0 0 - - /a\n\n", 0, 10) == (
        [(0, b"c file 0 0 -0 0 - - ", "/a", 31, 31)], 32)
    assert _native.scan_items(bytearray(b"@@FC1 I c file 0 0 1 0 - - /\xff\nx\n"), 0, 10)[0][0][2] == "/\udcff"


# --- recording: the stream's items into the capture index ------------------------------------------------------

PLAN = pipeline._plan(pipeline.CollectOptions(interval_s=0))


def _recorded(scan, data: bytes):
    """What a scan makes of a stream: the index, item count, snapshots and the stream's state, or the error."""
    try:
        got = scan(data, PLAN)
    except CaptureError as exc:  # a value out of the index format's range, raised by both paths alike
        return ("error", str(exc))
    assert got is not None
    return got.index, got.items, got.snapshots, (got.result.error, got.result.began, got.result.complete,
                                                 got.result.snapshots)


def _assert_recorded_same(data: bytes) -> None:
    want = _recorded(capture_scan._scan_python, data)
    assert _recorded(capture_scan._scan_native, data) == want
    with pytest.MonkeyPatch.context() as m:  # built without OpenSSL: the Python code hashes
        m.setattr(native, "HASHES", False)
        assert _recorded(capture_scan._scan_native, data) == want


def test_real_streams_record_the_same(host_streams):  # noqa: F811 - the fixture
    for data in host_streams.values():
        _assert_recorded_same(data)
        index, items, _, (error, _, complete, _) = _recorded(capture_scan._scan_native, data)
        assert complete and error is None and items > 100


def test_the_suite_stream_literals_and_their_cuts_record_the_same():
    for data in _suite_stream_literals():
        for cut in range(0, len(data) + 1, 3):
            _assert_recorded_same(data[:cut])


def test_mutated_streams_record_the_same(host_streams):  # noqa: F811 - the fixture
    for data in _mutated(host_streams["efa"], 7, 120):
        _assert_recorded_same(data)


@settings(max_examples=300, deadline=None)
@given(framed_streams())
def test_generated_streams_record_the_same(data):
    _assert_recorded_same(data)


def test_failed_commands_and_duplicates_record_the_same():
    data = (b"@@FC1 BEGIN 1 1\n@@FC1 S 0 1.0 2.0\n"
            b"@@FC1 I rdma command 0 1 2 0 1.0 1.5 cmd:rdma-statistic\nab\n"
            b"@@FC1 I rdma file 0 2 1 0 - - /sys/x\nq\n"
            b"@@FC1 I rdma file 0 0 1 0 - - /sys/x\nr\n"  # a second read of one path: the first wins
            b"@@FC1 I rdma file 0 0 1 0 - - /sys/../etc/passwd\nr\n"  # refused
            b"@@FC1 I rdma file 0 0 1 0 - - /sys/..\nr\n"  # refused
            b"@@FC1 I rdma command 0 124 0 0 1.0 9.0 cmd:ibstat\n\n"
            b"@@FC1 I rdma stderr 0 - 4 0 - - cmd:rdma-statistic\noops\n"
            b"@@FC1 I rdma stderr 0 - 5 0 - - cmd:rdma-statistic\nlater\n"  # the last stderr words the error
            b"@@FC1 I rdma command 0 0 1 0 - - cmd:bad name\nx\n"
            b"@@FC1 E 0 3.0 4.0\n@@FC1 END\n")
    _assert_recorded_same(data)
    index, items, _, _ = _recorded(capture_scan._scan_native, data)
    assert items == 9


def test_an_item_left_to_python_reads_the_whole_stream_in_python(host_streams, monkeypatch):  # noqa: F811
    """Should index_items ever stop at an item that Python takes, the stream is read again by _scan_python."""
    data = host_streams["bnxt"]
    want = _recorded(capture_scan._scan_python, data)
    monkeypatch.setattr(native, "index_items", lambda data, pos, *rest: (0, pos, 0))  # declines everything
    assert capture_scan._scan_native(data, PLAN) is None
    assert _recorded(capture_scan.scan_host, data) == want
