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


# ---- xml_tops: parsers/nvidia_smi.py's whole-document parse of `nvidia-smi -q -x` ----------------------------

import xml.etree.ElementTree as ET  # noqa: E402

from fabricase.parsers import nvidia_smi  # noqa: E402

REAL_XML = sorted(p for p in (Path(__file__).parent / "fixtures/real").rglob("*")
                  if p.is_file() and p.read_bytes().lstrip().startswith(b"<?xml") and b"<nvidia_smi_log" in
                  p.read_bytes())


def _tops_in_python(text: str, max_path: int) -> list[tuple] | None:
    """What xml_tops stands in for: ElementTree's document element's children, each with _flatten_xml's leaves
    for a <gpu>; None where ElementTree cannot parse the text."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    out = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(nvidia_smi, "_MAX_PATH", max_path)
        for element in root:
            raw, cut = nvidia_smi._flatten_xml(element) if element.tag == "gpu" else (None, False)
            out.append((element.tag, element.get("id"), element.text, raw, cut))
    return out


def _reports_alike(text: str) -> nvidia_smi.NvidiaSmiReport:
    fast = nvidia_smi.parse_nvidia_smi_xml(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(native, "xml_tops", None)
        slow = nvidia_smi.parse_nvidia_smi_xml(text)
    assert fast == slow
    return fast


def _tops_alike(text: str, max_path: int, accepted: bool | None = None) -> None:
    got = _native.xml_tops(text, "gpu", max_path)
    want = _tops_in_python(text, max_path)
    if got is not None:
        assert want is not None and got == want
        assert [list(raw) for *_, raw, _cut in got if raw] == [list(raw) for *_, raw, _cut in want if raw]  # order
    if accepted is not None:
        assert (got is not None) is accepted, text[:300]


@pytest.mark.parametrize("path", REAL_XML, ids=lambda p: p.parent.name + "/" + p.name)
def test_real_nvidia_smi_xml_reads_the_same_in_one_pass(path: Path):
    text = path.read_text()
    _tops_alike(text, nvidia_smi._MAX_PATH, accepted=True)  # what nvidia-smi writes is taken
    report = _reports_alike(text)
    assert report.gpus and all(g.bus_id for g in report.gpus)


def test_the_hgx_hosts_report_reads_the_same(tmp_path):
    from hosttrees.hosts import hgx_mlx5_host

    root = hgx_mlx5_host(tmp_path / "root")
    texts = [p.read_text() for p in root.rglob("*") if p.is_file() and b"<nvidia_smi_log" in p.read_bytes()]
    assert texts
    for text in texts:
        _tops_alike(text, nvidia_smi._MAX_PATH, accepted=True)
        assert len(_reports_alike(text).gpus) == 8


_NAMES = st.sampled_from(["gpu", "a", "b_c", "x.y", "n-1", "product_name", "fabric", "state", "L" * 40, "gpux"])
_TEXT = st.text(alphabet=st.sampled_from(list("abc XYZ 09.:/-_\t\n>=\"'")), max_size=12)
_ATTR = st.one_of(st.none(), st.tuples(st.sampled_from(["id", "ver", "id2"]),
                                       st.text(alphabet=st.sampled_from(list("0a:. >-")), max_size=8),
                                       st.sampled_from(['"', "'"])))


@st.composite
def _element(draw, depth: int = 0) -> str:
    name = draw(_NAMES)
    attr = draw(_ATTR)
    head = name + ("" if attr is None else f"{draw(st.sampled_from([' ', '  ', chr(10)]))}{attr[0]}"
                   f"{draw(st.sampled_from(['=', ' = ']))}{attr[2]}{attr[1]}{attr[2]}")
    head += draw(st.sampled_from(["", " ", "\n"]))
    if draw(st.booleans()) and depth > 0 and draw(st.integers(0, 3)) == 0:
        return f"<{head}/>"
    children = draw(st.lists(_element(depth + 1), max_size=3)) if depth < 5 else []
    parts = [draw(_TEXT)]
    for child in children:
        parts += [child, draw(_TEXT)]
    return f"<{head}>{''.join(parts)}</{name}{draw(st.sampled_from(['', ' ', chr(10)]))}>"


_PROLOG = st.sampled_from(["", '<?xml version="1.0" ?>\n', "<?xml version='1.0' encoding='UTF-8'?>",
                           '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n',
                           "<!DOCTYPE nvidia_smi_log>", '<?xml version="1.0" standalone="yes"?>'])


@st.composite
def _documents(draw) -> str:
    tops = draw(st.lists(_element(1), max_size=4))
    return f"{draw(_PROLOG)}<nvidia_smi_log>{''.join(tops)}</nvidia_smi_log>{draw(st.sampled_from(['', chr(10)]))}"


@settings(max_examples=300, deadline=None)
@given(_documents(), st.sampled_from([512, 60, 12, 3, 0]))
def test_generated_plain_documents_are_taken_and_read_the_same(text, max_path):
    _tops_alike(text, max_path, accepted=True)
    _reports_alike(text)


_HOSTILE = st.sampled_from([
    "<!-- a comment -->", "<![CDATA[x<y]]>", "&amp;", "&#65;", "\r", "\r\n", "<?pi x?>", "\x00", "\x0b", "é",
    "<a:b>", "</a:b>", " xmlns='urn:x'", ' b="1" c="2"', ' b="1"b="2"', "]]>", "<", ">", "</", "<1a>", "< a>",
    "\ufeff", "<?xml version='1.0'?>", "<!DOCTYPE x [<!ENTITY e 'v'>]>", "\t", "", "'", '"', "=", "/>",
])  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(_documents(), st.lists(st.tuples(_HOSTILE, st.integers(0, 10**6)), max_size=3),
       st.integers(0, 10**6), st.booleans())
def test_mutated_documents_read_the_same_or_are_declined(text, inserts, cut_at, cut):
    for piece, at in inserts:
        at %= len(text) + 1
        text = text[:at] + piece + text[at:]
    if cut:
        text = text[: cut_at % (len(text) + 1)]
    _tops_alike(text, nvidia_smi._MAX_PATH)
    _reports_alike(text)


@pytest.mark.parametrize("text", [
    "", "   ", "<a>", "<a></b>", "<a/><b/>", "x<a/>", "<a/>x", "  <?xml version='1.0'?><a/>",
    "<?xml version='1.1'?><a/>", "<?xml version='1.0' encoding='latin-1'?><a/>", "<a><gpu id='1' id='2'/></a>",
    "<a>" + "<b>" * 300 + "</b>" * 300 + "</a>",
])  # fmt: skip
def test_edge_documents_read_the_same_or_are_declined(text):
    _tops_alike(text, nvidia_smi._MAX_PATH)
    _reports_alike(text)


def test_xml_tops_is_linear_on_deep_and_long_inputs():
    """Long names at the path's limit and a document of many leaves: one pass, whatever the shape."""
    deep = "<r><gpu>" + "".join(f"<{'n' * 250}{i}>" for i in range(3)) + "<leaf>v</leaf>" + "".join(
        f"</{'n' * 250}{i}>" for i in reversed(range(3))) + "</gpu></r>"
    _tops_alike(deep, 512, accepted=True)
    (_tag, _id, _body, raw, cut), = _native.xml_tops(deep, "gpu", 512)
    assert raw == {} and cut  # the third name did not fit: its subtree left out, as _flatten_xml does
    wide = "<r><gpu>" + "<x>1</x>" * 200_000 + "</gpu></r>"
    (_tag, _id, _body, raw, cut), = _native.xml_tops(wide, "gpu", 512)
    assert raw == {"x": "1"} and not cut
