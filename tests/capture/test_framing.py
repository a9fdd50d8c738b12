"""The capture stream: framing is unambiguous, binary-safe, and a cut stream keeps what came before."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fabricase.collectors.framing import parse_stream


def frame(source: str, content: bytes, *, kind: str = "file", snap: int = 0, rc: int = 0, trunc: int = 0) -> bytes:
    head = f"@@FC1 I test {kind} {snap} {rc} {len(content)} {trunc} - - {source}\n".encode()
    return head + content + b"\n"


def stream(*frames: bytes, end: bool = True) -> bytes:
    body = b"@@FC1 BEGIN 1 42\n@@FC1 S 0 1700000000.5 100.25\n" + b"".join(frames) + b"@@FC1 E 0 1700000000.6 100.35\n"
    return body + (b"@@FC1 END\n" if end else b"")


def test_items_and_snapshot_marks():
    r = parse_stream(stream(frame("/proc/net/snmp", b"Tcp: a\nTcp: 1\n"),
                            frame("cmd:uname", b"Linux\n", kind="command")))
    assert r.complete and r.error is None
    assert [(i.source, i.kind, i.content) for i in r.items] == [
        ("/proc/net/snmp", "file", b"Tcp: a\nTcp: 1\n"),
        ("cmd:uname", "command", b"Linux\n"),
    ]
    assert r.snapshots[0].uptime_start == 100.25 and r.snapshots[0].epoch_end == 1700000000.6


def test_content_that_looks_like_a_frame_header_is_just_content():
    evil = b"@@FC1 END\n@@FC1 I x file 0 0 999 0 - - /etc/passwd\n\x00\xff"
    r = parse_stream(stream(frame("/tmp/evil", evil), frame("/tmp/next", b"")))
    assert r.complete
    assert [i.content for i in r.items] == [evil, b""]


def test_empty_item_and_source_with_spaces():
    r = parse_stream(stream(frame("/sys/class/net/my if/x", b"")))
    assert r.items[0].source == "/sys/class/net/my if/x" and r.items[0].content == b""


def test_cut_inside_an_item_keeps_the_items_before():
    data = stream(frame("/a", b"1\n"), frame("/b", b"x" * 100))
    cut = data[: data.index(b"x" * 10) + 10]
    r = parse_stream(cut)
    assert not r.complete
    assert [i.source for i in r.items] == ["/a"]
    assert "cut inside item /b" in r.error


def test_stream_without_end_marker_is_flagged():
    r = parse_stream(stream(frame("/a", b"1\n"), end=False))
    assert not r.complete and "before the END marker" in r.error and len(r.items) == 1


def test_garbage_is_an_error_not_a_crash():
    r = parse_stream(b"Permission denied (publickey).\n")
    assert r.items == [] and "not a frame header" in r.error
    assert parse_stream(b"").error.startswith("empty stream")


def test_malformed_header():
    r = parse_stream(b"@@FC1 BEGIN 1 1\n@@FC1 I x file zero 0 5 0 - - /a\nhello\n")
    assert "malformed item header" in r.error


@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_crash(data):
    r = parse_stream(data)
    assert r.complete or r.error


_NAME_CHARS = st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",), min_codepoint=32)


@given(st.lists(st.tuples(st.text(alphabet=_NAME_CHARS, min_size=1, max_size=30),
                          st.binary(max_size=300)), max_size=8))
def test_round_trip_any_content(pairs):
    frames = [frame("/" + name, content) for name, content in pairs]
    r = parse_stream(stream(*frames))
    assert r.complete
    assert [(i.source, i.content) for i in r.items] == [("/" + n, c) for n, c in pairs]
