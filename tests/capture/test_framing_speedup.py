"""parse_stream was rewritten for speed (issue 18: a fleet's worker spent half its time in it); these tests hold
it to the implementation it replaced, copied below as the oracle, byte for byte of output: the same items,
marks, flags and error text on real host streams, on every stream literal of the test suite, and on cut,
mutated and generated streams (hostile input: the parser must never raise and must stay linear)."""

from __future__ import annotations

import ast
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricase.caps import MAX_ITEM_BYTES
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import MAX_SNAPSHOT, FramedItem, SnapshotMark, StreamResult, parse_stream
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.transports.local import LocalTransport
from hosttrees.hosts import bnxt_host, efa_host, hgx_mlx5_host

# --- the oracle: parse_stream before the rewrite (framing.py as of issue 17), unchanged but for its names -----

_MAGIC = b"@@FC1 "
_MAX_DIGITS = 18


def _num(text: bytes) -> float | None:
    if len(text) > 64:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: bytes) -> int | None:
    digits = text[1:] if text[:1] == b"-" else text
    if not digits or len(digits) > _MAX_DIGITS or not digits.isdigit():
        return None
    return int(text)


def _parse_item_header(fields: list[bytes]) -> tuple[FramedItem, int] | None:
    if len(fields) != 10:
        return None
    collector, kind, snap, rc, size, trunc, t0, t1, source = fields[1:]
    n, snapshot = _int(size), _int(snap)
    if (n is None or n < 0 or snapshot is None or not 0 <= snapshot <= MAX_SNAPSHOT
            or kind not in (b"file", b"command", b"stderr")):
        return None
    item = FramedItem(
        collector=collector.decode("ascii", "replace"), kind=kind.decode(), snapshot=snapshot, rc=_int(rc),
        truncated=trunc == b"1", t0=_num(t0), t1=_num(t1), source=source.decode("utf-8", "surrogateescape"),
        content=b"",
    )
    return item, n


def _mark(result: StreamResult, fields: list[bytes]) -> bool:
    idx = _int(fields[1]) if len(fields) == 4 else None
    if idx is None or not 0 <= idx <= MAX_SNAPSHOT:
        return False
    mark = result.snapshots.setdefault(idx, SnapshotMark(idx))
    if fields[0] == b"S":
        mark.epoch_start, mark.uptime_start = _num(fields[2]), _num(fields[3])
    else:
        mark.epoch_end, mark.uptime_end = _num(fields[2]), _num(fields[3])
    return True


def oracle_parse_stream(data: bytes) -> StreamResult:
    result = StreamResult()
    pos, end = 0, len(data)
    while pos < end:
        nl = data.find(b"\n", pos)
        if nl < 0:
            result.error = f"stream cut inside a frame header at byte {pos}"
            break
        line = data[pos:nl]
        if not line.startswith(_MAGIC):
            result.error = f"unexpected bytes at byte {pos} (not a frame header)"
            break
        fields = line[len(_MAGIC):].split(b" ", 9)
        pos = nl + 1
        tag = fields[0]
        if tag == b"BEGIN":
            result.began = True
        elif tag == b"END":
            result.complete = True
            break
        elif tag in (b"S", b"E"):
            if not _mark(result, fields):
                result.error = f"malformed snapshot marker at byte {pos}"
                break
        elif tag == b"I":
            parsed = _parse_item_header(fields)
            if parsed is None:
                result.error = f"malformed item header at byte {nl - len(line)}"
                break
            item, n = parsed
            if n > MAX_ITEM_BYTES:
                result.error = (f"item {item.source[:200]} (snapshot {item.snapshot}) is {n:,} bytes, over the "
                                f"{MAX_ITEM_BYTES // 2**20} MiB cap on one item, at byte {nl - len(line)}")
                break
            if pos + n + 1 > end or data[pos + n:pos + n + 1] != b"\n":
                result.error = f"stream cut inside item {item.source} (snapshot {item.snapshot}) at byte {pos}"
                break
            item.content = data[pos:pos + n]
            item.offset = pos
            pos += n + 1
            result.items.append(item)
        else:
            result.error = f"unknown frame {tag[:20]!r} at byte {nl - len(line)}"
            break
    if result.error is None and not result.complete:
        result.error = (
            "stream ended before the END marker (capture cut short)"
            if result.began
            else "empty stream: the capture script printed nothing"
        )
    return result


# --- the comparison ------------------------------------------------------------------------------------------


def assert_same(data: bytes) -> StreamResult:
    """parse_stream(data) equals the oracle's result field for field (types included), and neither raised."""
    want, got = oracle_parse_stream(data), parse_stream(data)
    assert got == want, f"differs on {data[:120]!r}: {got.error!r} vs {want.error!r}"
    assert [type(i.content) for i in got.items] == [bytes] * len(got.items)
    assert [(type(i.rc), type(i.t0), type(i.t1)) for i in got.items] == [
        (type(i.rc), type(i.t0), type(i.t1)) for i in want.items]
    return got


def _host_stream(tree: Path) -> bytes:
    plan = CapturePlan(collectors=tuple(select_collectors()), interval_s=0, root=str(tree))
    return LocalTransport().run_one("localhost", compile_script(plan), timeout_s=60).stdout


@pytest.fixture(scope="module")
def host_streams(tmp_path_factory) -> dict[str, bytes]:
    """Real capture streams of the recorded host trees (the capture script run by the local transport)."""
    base = tmp_path_factory.mktemp("trees")
    trees = {"hgx": hgx_mlx5_host(base / "hgx"), "hgx-degraded": hgx_mlx5_host(base / "hgxd", degraded=True),
             "efa": efa_host(base / "efa"), "bnxt": bnxt_host(base / "bnxt")}
    return {name: _host_stream(tree) for name, tree in trees.items()}


def test_real_host_streams_parse_the_same(host_streams):
    for name, data in host_streams.items():
        got = assert_same(data)
        assert got.complete and got.error is None, name
        assert len(got.items) > 100, name  # a real host's stream, not an empty one


def _suite_stream_literals() -> list[bytes]:
    """Every bytes literal of the test suite that holds a frame header: the hand-made streams of other tests."""
    found = []
    for path in sorted(Path(__file__).parents[1].rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        found += [node.value for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, bytes) and b"@@FC1" in node.value]
    return found


def test_stream_literals_of_the_suite_parse_the_same():
    literals = _suite_stream_literals()
    assert len(literals) >= 20  # the suite's fixtures are found (framing, malformed capture, relay, ...)
    for data in literals:
        assert_same(data)
        for cut in range(len(data) + 1):
            assert_same(data[:cut])


def test_cuts_of_a_real_stream_around_its_headers(host_streams):
    data = host_streams["efa"]
    starts = [n for n in range(len(data)) if data.startswith(b"@@FC1 ", n)]
    cuts = set()
    for start in starts[::max(len(starts) // 40, 1)] + starts[-5:]:
        nl = data.find(b"\n", start)
        cuts.update({start - 1, start, start + 3, start + 8, (start + nl) // 2, nl - 1, nl, nl + 1, nl + 2})
    for cut in sorted(c for c in cuts if 0 <= c <= len(data)):
        assert_same(data[:cut])


_TOKENS = [b"", b"-", b"0", b"1", b"7", b"-1", b"-0", b"00", b"1_0", b" 7", b"+5", b"1e3", b"nan", b"inf", b"-inf",
           b"1.5", b"9" * 18, b"9" * 19, b"-" + b"9" * 18, str(MAX_SNAPSHOT).encode(), str(MAX_SNAPSHOT + 1).encode(),
           str(MAX_ITEM_BYTES).encode(), str(MAX_ITEM_BYTES + 1).encode(), b"10" * 40, b"\xff\xfe", b"\r",
           b"file", b"command", b"stderr", b"files", b"\xe9t\xe9", b"x" * 70, b"1" * 65, b"0x10", b"\xd9\xa3"]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    """One hostile edit of a stream: a header field replaced, a byte flipped, a line dropped or repeated."""
    starts = [n for n in range(len(data)) if data.startswith(b"@@FC1 ", n)] or [0]
    start = rng.choice(starts)
    nl = data.find(b"\n", start)
    nl = len(data) if nl < 0 else nl
    fields = data[start:nl].split(b" ")
    edit = rng.randrange(5)
    if edit == 0 and len(fields) > 1:
        fields[rng.randrange(1, len(fields))] = rng.choice(_TOKENS)
        line = b" ".join(fields)
    elif edit == 1:
        line = b" ".join(fields[:rng.randrange(len(fields) + 1)])
    elif edit == 2:
        line = data[start:nl] + b" " + rng.choice(_TOKENS)
    elif edit == 3:
        spot = rng.randrange(len(data))
        return data[:spot] + bytes([rng.choice(b" \n@0-\x00\xff")]) + data[spot + 1:]
    else:
        return data[:start] + data[nl + 1:] if rng.random() < 0.5 else data[:nl + 1] + data[start:]
    return data[:start] + line + data[nl:]


def test_mutated_real_streams_parse_the_same(host_streams):
    rng = random.Random(18)
    small = host_streams["efa"]
    for _ in range(150):
        data = small
        for _ in range(rng.randrange(1, 4)):
            data = _mutate(data, rng)
        assert_same(data)
        assert_same(data[:rng.randrange(len(data) + 1)])


def test_huge_declared_sizes_fail_the_same_without_allocating():
    head = b"@@FC1 BEGIN 1 1\n@@FC1 I c file 0 0 %s 0 - - /a\nx\n@@FC1 END\n"
    for size in (b"99999999999999999", b"9" * 18, b"9" * 19, str(MAX_ITEM_BYTES + 1).encode(),
                 str(MAX_ITEM_BYTES).encode(), b"2", b"1"):
        assert_same(head % size)


_token = st.one_of(st.sampled_from(_TOKENS), st.binary(max_size=6).filter(lambda b: b" " not in b))
_header = st.one_of(
    st.tuples(st.sampled_from([b"c", b"", b"\xff"]), st.sampled_from([b"file", b"command", b"stderr", b"x"]),
              _token, _token, _token, _token, _token, _token, st.binary(max_size=12)).map(
        lambda f: b"@@FC1 I " + b" ".join(f)),
    st.tuples(st.sampled_from([b"S", b"E", b"BEGIN", b"END", b"I", b"Q", b""]),
              st.lists(_token, max_size=5)).map(lambda t: b" ".join([b"@@FC1", t[0], *t[1]])),
)


@st.composite
def framed_streams(draw) -> bytes:
    """Streams of plausible frames (items whose declared size may or may not match their content)."""
    out = [b"@@FC1 BEGIN 1 1\n"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 8))):
        content = draw(st.binary(max_size=40))
        if draw(st.booleans()):
            out.append(b"@@FC1 I c file %d 0 %d 0 - - /p\n" % (draw(st.integers(0, 3)), len(content)) + content
                       + b"\n")
        else:
            out.append(draw(_header) + b"\n" + (content + b"\n" if draw(st.booleans()) else b""))
    if draw(st.booleans()):
        out.append(b"@@FC1 END\n")
    data = b"".join(out)
    return data[:draw(st.integers(0, len(data)))] if draw(st.booleans()) else data


@settings(max_examples=400, deadline=None)
@given(framed_streams())
def test_generated_streams_parse_the_same(data):
    assert_same(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_parse_the_same(data):
    assert_same(data)
    assert_same(b"@@FC1 BEGIN 1 1\n@@FC1 I " + data)


def test_bytearray_and_memoryview_read_as_their_bytes(host_streams):
    data = host_streams["bnxt"]
    want = oracle_parse_stream(data)
    assert parse_stream(bytearray(data)) == want
    assert parse_stream(memoryview(data)) == want


def test_linear_in_a_stream_of_many_tiny_items():
    """A million-header stream: each header is read once (a quadratic scan would not finish)."""
    data = b"@@FC1 BEGIN 1 1\n" + b"@@FC1 I c file 0 0 0 0 - - /a\n\n" * 200_000 + b"@@FC1 END\n"
    got = parse_stream(data)
    assert got.complete and len(got.items) == 200_000
    assert got.items[-1].offset == len(data) - len(b"\n@@FC1 END\n")
