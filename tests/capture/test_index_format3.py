"""Capture format 3: the binary per-host index (index.fci). Same items as format 2, read lazily, and hostile
index files are one CaptureError naming the host's index (its host loads as failed), never a traceback."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from fabricase import capture_index
from fabricase.capture_index import INDEX_FILE, RECORD, decode_index, encode_index
from fabricase.capturedir import FORMAT_VERSION, READABLE_VERSIONS, load_capture
from fabricase.errors import CaptureError, CorruptItemError
from fabricase.models import CaptureItem, HostStatus
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from fabricase.transports.local import LocalTransport


def _collect(tmp_path: Path, root: Path, version: int, name: str) -> Path:
    out = tmp_path / name
    collect(Targets(hosts=("localhost",), nodeset="localhost"), CollectOptions(interval_s=0, root=str(root)), out,
            transport=LocalTransport(), load=False, capture_format=version)
    return out


@pytest.fixture
def capture3(tmp_path, fake_root) -> Path:
    return _collect(tmp_path, fake_root, 3, "cap3")


def _host_items(cap: Path) -> list[dict]:
    return [it.to_dict() for it in load_capture(cap, verify=True).host("localhost").items]


def test_format_3_is_written_and_reads_back_the_same_items_as_format_2(tmp_path, fake_root, capture3):
    assert FORMAT_VERSION == 3 and READABLE_VERSIONS == (1, 2, 3)
    assert json.loads((capture3 / "capture.json").read_text())["format_version"] == 3
    hdir = capture3 / "hosts/localhost"
    assert (hdir / INDEX_FILE).is_file() and not (hdir / "index.json").exists()
    cap2 = _collect(tmp_path, fake_root, 2, "cap2")
    assert json.loads((cap2 / "capture.json").read_text())["format_version"] == 2
    v2, v3 = _host_items(cap2), _host_items(capture3)
    # The same host tree and collectors: the same items, but for timings (and the stream offsets they shift).
    varying = ("duration_ms", "offset", "sha256", "bytes")
    assert [{k: v for k, v in d.items() if k not in varying} for d in v3] == \
           [{k: v for k, v in d.items() if k not in varying} for d in v2]
    # Smaller than format 2's JSON index of the same items (about half here; a 32-byte sha256 is most of a record).
    assert (hdir / INDEX_FILE).stat().st_size < 0.6 * (cap2 / "hosts/localhost/index.json").stat().st_size


def test_encode_decode_round_trip_keeps_every_field(tmp_path):
    items = [
        CaptureItem(source="/sys/a", snapshot=0, kind="file", collector="netdev", path="stream.fc1", bytes=3,
                    sha256="ab" * 32, offset=10, duration_ms=None, rc=None),
        CaptureItem(source="cmd:dmesg", snapshot=1, kind="command", collector="kernel", path="stream.fc1", bytes=0,
                    sha256="cd" * 32, rc=-9, duration_ms=12.5, truncated=True, error="timed out after 5s",
                    command="dmesg -T\n| tail", offset=0),
        CaptureItem(source="cmd:dmesg", snapshot=1, kind="stderr", collector="kernel", path="stream.fc1", bytes=2,
                    sha256="ef" * 32, offset=3),
        # Format 1 style: an item stored as its own file (no offset); its path is derived from the source.
        CaptureItem(source="/proc/\udcffodd", snapshot=2, kind="file", collector="x", path="s2/fs/proc/\udcffodd",
                    bytes=1, sha256="01" * 32),
    ]
    table = decode_index(encode_index(items), "idx", stream_bytes=13)
    assert table.items() == items


@pytest.mark.parametrize("kept", [True, False])
def test_items_are_decoded_on_first_use_and_dropped_by_release(capture3, monkeypatch, kept):
    from fabricase import capturedir

    if not kept:  # past the load's budget of kept indexes, a host's index is read again on first use
        monkeypatch.setattr(capturedir, "_KEEP_INDEX_BYTES", 0)
    hc = load_capture(capture3, verify=False).host("localhost")
    assert (hc._table is not None) == kept
    assert hc._item_list is None and hc.item_count > 0  # loading decoded nothing for keeps
    it = hc.item("/sys/class/net/eth1/statistics/rx_crc_errors", 1)
    assert hc.read(it) == b"57\n" and len(hc.items) == hc.item_count
    hc.release()
    assert hc._item_list is None
    assert hc.item("/sys/class/net/eth1/statistics/rx_crc_errors", 1) == it


def test_items_a_caller_assigned_survive_release(capture3):
    """A list set on the host (a caller editing items in memory) is the host's items until replaced: release()
    must not decode the index over it and lose the edits."""
    hc = load_capture(capture3, verify=False).host("localhost")
    edited = list(hc.items)
    edited[0].error = "edited in memory"
    hc.items = edited[:-1]
    hc.release()
    assert hc.items == edited[:-1] and hc.items[0].error == "edited in memory"


def test_a_corrupt_item_is_found_by_verify_in_format_3(capture3):
    stream = capture3 / "hosts/localhost/stream.fc1"
    data = bytearray(stream.read_bytes())
    # A byte inside an item's content (the first "57\n" of the stream may be a snapshot mark's uptime).
    item = next(it for it in load_capture(capture3).host("localhost").items if it.bytes and it.offset is not None)
    at = item.offset
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    stream.write_bytes(bytes(data))
    load_capture(capture3, verify=False)  # bounds are intact
    with pytest.raises(CorruptItemError, match="does not match its sha256"):
        load_capture(capture3, verify=True)


def test_a_stream_cut_short_is_an_integrity_error_naming_the_item(capture3):
    stream = capture3 / "hosts/localhost/stream.fc1"
    stream.write_bytes(stream.read_bytes()[:200])
    with pytest.raises(CorruptItemError, match="bytes short of the item") as info:
        load_capture(capture3, verify=False)
    assert "hosts/localhost/stream.fc1 item " in info.value.where


# -- hostile index files ---------------------------------------------------------------------------------------

def _valid() -> bytes:
    items = [CaptureItem(source=f"/sys/f{n}", snapshot=n % 2, kind="file", collector="c", path="stream.fc1",
                         bytes=4, sha256=f"{n:064x}", offset=4 * n, rc=0) for n in range(6)]
    return encode_index(items)


def _with_record(field: str, value, n: int = 2, **more) -> bytes:
    """The valid index with item n's record changed: field = value (and more fields)."""
    data = bytearray(_valid())
    records = np.frombuffer(data, dtype=RECORD, count=6, offset=len(data) - 6 * RECORD.itemsize).copy()
    for name, new in {field: value, **more}.items():
        records[name][n] = new
    return bytes(data[:len(data) - 6 * RECORD.itemsize]) + records.tobytes()


def _header(data: bytes, **changes) -> bytes:
    fields = dict(zip(("magic", "version", "size", "count", "strings", "nbytes"),
                      capture_index._HEADER.unpack_from(data), strict=True))
    fields.update(changes)
    return capture_index._HEADER.pack(*fields.values()) + data[capture_index._HEADER.size:]


HOSTILE = [
    (b"", "shorter than its 24-byte header"),
    (b"FCIX\x01", "shorter than its 24-byte header"),
    (b"JSON" + _valid()[4:], "no FCIX header"),
    (_header(_valid(), version=9), "index version 9"),
    (_header(_valid(), size=12), "12-byte records is not supported"),
    (_valid()[:-1], "truncated or corrupt"),
    (_valid() + b"\0", "truncated or corrupt"),
    (_header(_valid(), count=2**32 - 1), "4,294,967,295 items"),
    (_header(_valid(), strings=2**32 - 1), "truncated or corrupt"),
    (_header(_valid(), nbytes=2**63), "truncated or corrupt"),
    (_with_record("source", 999), "item 2: its source is not a string of the index"),
    (_with_record("collector", 2**32 - 1), "item 2: its collector is not a string"),
    (_with_record("command", 77), "item 2: its command is not a string"),
    (_with_record("snapshot", 60000), "item 2: snapshot is over 10,000"),
    (_with_record("kind", 3), "item 2: kind is not one of file, command, stderr"),
    (_with_record("flags", 0x80), "item 2: unknown flags"),
    (_with_record("bytes", 2**63), "item 2: over the"),
    (_with_record("offset", 2**64 - 1), "item 2: offset is past any stream"),
    (_with_record("rc", -(2**63)), "item 2: rc is out of range"),
    (_with_record("duration_ms", float("nan")), "item 2: a duration_ms without its flag"),
    (_with_record("flags", 14, duration_ms=float("inf")), "item 2: duration_ms is not a finite number"),
    (_with_record("flags", 8, rc=1), "item 2: an rc without its flag"),
    (_with_record("source", 0), "lists an item (source, snapshot, kind) twice"),
]


@pytest.mark.parametrize(("data", "expected"), HOSTILE)
def test_a_hostile_index_is_one_capture_error(data, expected):
    with pytest.raises(CaptureError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        decode_index(data, "hosts/h/index.fci", stream_bytes=10**6)


def test_a_string_table_out_of_order_or_with_twins_is_refused():
    good = _valid()
    ends_at = capture_index._HEADER.size
    swapped = bytearray(good)
    swapped[ends_at:ends_at + 4] = struct.pack("<I", 10**6)
    with pytest.raises(CaptureError, match="string table is inconsistent"):
        decode_index(bytes(swapped), "i", 10**6)
    twin = encode_index([CaptureItem(source="/a", snapshot=0, kind="file", collector="/b", path="stream.fc1",
                                     bytes=0, sha256="0" * 64, offset=0)])
    with pytest.raises(CaptureError, match="lists a string twice"):
        decode_index(twin.replace(b"/a/b", b"/a/a"), "i", 10**6)


def test_bytes_that_are_not_utf8_read_back_as_surrogate_escapes_never_an_error():
    data = _valid().replace(b"/sys/f1", b"/sys/\xff\xfe")
    items = decode_index(data, "i", 10**6).items()
    assert items[1].source == "/sys/\udcff\udcfe" and items[1].source.encode("utf-8", "surrogateescape") == \
        b"/sys/\xff\xfe"


def test_sources_that_cannot_be_stored_are_refused():
    for bad in (b"sys/f1!", b"/s/../f", b"cmd:a b"):
        data = _valid().replace(b"/sys/f1", bad.ljust(7, b"!")[:7])
        with pytest.raises(CaptureError, match="cannot be stored"):
            decode_index(data, "i", 10**6)


def test_random_mutations_of_an_index_give_one_capture_error_or_items():
    rng = np.random.default_rng(7)
    good = np.frombuffer(_valid(), dtype=np.uint8)
    for _ in range(400):
        data = good.copy()
        at = rng.integers(0, len(data), size=rng.integers(1, 4))
        data[at] = rng.integers(0, 256, size=len(at))
        cut = len(data) if rng.random() < 0.8 else int(rng.integers(0, len(data)))
        try:
            items = decode_index(data[:cut].tobytes(), "i", 10**6).items()
        except CaptureError:
            continue
        assert all(isinstance(it, CaptureItem) for it in items)


def test_index_records_round_trip_for_tools_that_rewrite_an_index():
    data = _valid()
    records = capture_index.index_records(data)
    assert records[0]["path"] == "stream.fc1" and records[0]["offset"] == 0
    assert capture_index.records_index(records) == data
    records[1]["offset"] = 99
    assert decode_index(capture_index.records_index(records), "i").items()[1].offset == 99


def test_a_missing_stream_is_an_integrity_error(capture3):
    (capture3 / "hosts/localhost/stream.fc1").unlink()
    with pytest.raises(CorruptItemError, match="stream missing or unreadable"):
        load_capture(capture3, verify=False)


def test_a_hostile_index_in_a_capture_fails_its_host_with_the_reason(capture3):
    index = capture3 / "hosts/localhost" / INDEX_FILE
    index.write_bytes(index.read_bytes()[:-5])
    hc = load_capture(capture3, verify=False).host("localhost")
    assert hc.status == HostStatus.FAILED and hc.items == []
    assert hc.reason.startswith("capture directory: hosts/localhost/index.fci: index is ")
    index.unlink()
    hc = load_capture(capture3, verify=False).host("localhost")
    assert hc.status == HostStatus.FAILED and hc.reason == "capture directory: hosts/localhost/index.fci: missing"


def test_a_host_that_sent_nothing_has_an_empty_index(tmp_path):
    from fabricase.transports.fake import FakeTransport

    fake = FakeTransport(lambda host: b"", fanout=2, latency_s=(0.0, 0.0), hang_fraction=0.0, seed=1)
    out = tmp_path / "cap"
    collect(Targets(hosts=("gpu1",), nodeset="gpu1"), CollectOptions(interval_s=0), out, transport=fake,
            load=False, capture_format=3)
    assert (out / "hosts/gpu1" / INDEX_FILE).stat().st_size == capture_index._HEADER.size
    hc = load_capture(out, verify=True).host("gpu1")
    assert hc.items == [] and hc.status != HostStatus.OK and hc.reason
