"""Malformed capture directories: one line naming the file (and host), or the host loaded as failed; never an
internal error, a hang or a whole-stream read. The mutation engine is benchmarks/bench_capture_fuzz.py (10,000
there, 300 here)."""

from __future__ import annotations

import json
import os
import sys
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase import capture_records, capturedir
from fabricase.caps import MAX_ITEM_BYTES, MAX_MEMBER_BYTES
from fabricase.capturedir import load_capture
from fabricase.cli import cli
from fabricase.collectors.framing import parse_stream
from fabricase.errors import CaptureError, CorruptItemError
from fabricase.models import HostStatus

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import bench_capture_fuzz as fuzz  # noqa: E402


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fuzz.build_capture(tmp_path_factory.mktemp("fuzz") / "pristine")


@pytest.fixture
def capture(pristine: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(pristine, tmp_path / "capture"))


def _status(root: Path) -> dict[str, tuple[str, str | None]]:
    capture, _ = fuzz.diagnose_dir(root)
    return {hc.host: (str(hc.status), hc.reason) for hc in capture.hosts}


def test_300_mutated_capture_directories_give_no_internal_error(tmp_path):
    summary = fuzz.fuzz(300, seed=14, work=tmp_path)
    assert summary.internal == [], "\n".join(f"{o.mutation}: {o.message}" for o in summary.internal[:10])
    # The mutations reach every outcome: refused in one line, loaded with a failed host, harmless.
    assert summary.counts["error"] > 50 and summary.counts["failed-host"] > 50 and summary.counts["ok"] > 10
    assert summary.worst_s < fuzz.RUN_LIMIT_S


def test_a_damaged_host_record_fails_that_host_only(capture):
    (capture / "hosts/gpu001/index.json").write_text('{"items": [' * 100_000)
    meta = json.loads((capture / "hosts/gpu003/host.json").read_text())
    meta["status"] = ["ok"]
    (capture / "hosts/gpu003/host.json").write_text(json.dumps(meta))
    status = _status(capture)
    assert status["gpu001"] == ("failed", "capture directory: hosts/gpu001/index.json: unreadable JSON "
                                          "(nested too deep)")
    assert status["gpu003"] == ("failed", "capture directory: hosts/gpu003/host.json: status must be a string, "
                                          "not a list")
    assert status["gpu002"] == ("ok", None)


@pytest.mark.parametrize("field,value,expected", [
    ("offset", -5, "item 3: offset is out of range"),
    ("bytes", "12", "item 3: bytes must be an integer, not a string"),
    ("bytes", MAX_ITEM_BYTES + 1, "over the 64 MiB cap on one item"),
    ("snapshot", [1], "item 3: snapshot must be an integer, not a list"),
    ("path", "../../capture.json", "an offset, but the path '../../capture.json' is not the host's stream"),
    ("source", "cmd:../x", "source 'cmd:../x' cannot be stored"),
])
def test_index_entries_of_the_wrong_type_or_range_are_named(capture, field, value, expected):
    index = json.loads((capture / "hosts/gpu002/index.json").read_text())
    index["items"][3][field] = value
    (capture / "hosts/gpu002/index.json").write_text(json.dumps(index))
    state, reason = _status(capture)["gpu002"]
    assert state == "failed" and reason.startswith("capture directory: hosts/gpu002/index.json: ")
    assert expected in reason


def test_a_duplicate_item_fails_the_host(capture):
    index = json.loads((capture / "hosts/gpu002/index.json").read_text())
    index["items"].append(dict(index["items"][0]))
    (capture / "hosts/gpu002/index.json").write_text(json.dumps(index))
    assert "twice" in _status(capture)["gpu002"][1]


def test_symlinks_out_of_the_capture_and_fifos_are_refused_without_reading(capture, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes((capture / "hosts/gpu001/host.json").read_bytes())  # valid, but not the capture's
    (capture / "hosts/gpu001/host.json").unlink()
    (capture / "hosts/gpu001/host.json").symlink_to(outside)
    (capture / "hosts/gpu002/stream.fc1").unlink()
    (capture / "hosts/gpu002/stream.fc1").symlink_to("/dev/zero")
    (capture / "hosts/gpu003/index.json").unlink()
    os.mkfifo(capture / "hosts/gpu003/index.json")  # reading it would block for ever
    status = _status(capture)
    assert status["gpu001"][1].endswith("hosts/gpu001/host.json: a symlink to outside the capture directory "
                                        "(refused)")
    assert status["gpu002"][1].endswith("hosts/gpu002/stream.fc1: a symlink to outside the capture directory "
                                        "(refused)")
    assert status["gpu003"][1].endswith("hosts/gpu003/index.json: not a plain file (a directory, FIFO or device; "
                                        "refused)")


@pytest.mark.parametrize("hosts,expected", [
    (["gpu001", ".."], "hosts: '..' cannot name a host folder"),
    (["gpu001", "a\x1b[2Jb"], "hosts: 'a\\x1b[2Jb' cannot name a host folder"),
    (["gpu001", "gpu001"], "hosts: 'gpu001' is listed twice"),
    ("gpu001", "hosts must be a list of host names, not a string"),
])
def test_capture_json_host_lists_that_name_no_folder_are_one_line(capture, hosts, expected):
    meta = json.loads((capture / "capture.json").read_text())
    meta["hosts"] = hosts
    (capture / "capture.json").write_text(json.dumps(meta))
    with pytest.raises(CaptureError) as info:
        load_capture(capture)
    assert str(info.value) == f"{capture / 'capture.json'}: {expected}"
    assert "\n" not in str(info.value) and "\x1b" not in str(info.value)


@pytest.mark.parametrize("text,expected", [
    (b'{"format": "fabricase-capture", "format_version": 2, "interval_s": NaN}', "NaN is not a number"),
    (b'{"format": "fabricase-capture", "format_version": 2, "interval_s": 1' + b"0" * 5000 + b"}",
     "a number of over 4,300 digits"),
    (b'{"format": "fabricase-capture", "format_version": true}', "capture format true"),
    (b'{"format": "fabricase-\xff"}', "not UTF-8 at byte 22"),
    (b"[" * 100_000, "nested too deep"),
])
def test_capture_json_of_the_wrong_kind_is_one_line(capture, text, expected):
    (capture / "capture.json").write_bytes(text)
    with pytest.raises(CaptureError) as info:
        load_capture(capture)
    assert expected in str(info.value).replace("True", "true") and "\n" not in str(info.value)


def test_the_analyze_command_says_one_line_or_names_the_failed_host(capture, tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FABRICASE_DEBUG", raising=False)
    runner = CliRunner()
    (capture / "hosts/gpu003/index.json").write_text('{"items": {}}')
    result = runner.invoke(cli, ["analyze", str(capture)])
    assert result.exit_code == 0, result.output
    assert "gpu003: failed: capture directory: hosts/gpu003/index.json: items must be a list" in " ".join(
        result.stderr.split())
    (capture / "capture.json").write_text('{"format": "fabricase-capture", "format_version": 2, "hosts": {}}')
    result = runner.invoke(cli, ["analyze", str(capture)])
    assert result.exit_code == 1 and "internal error" not in result.output and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "hosts must be a list" in result.stderr


def _pad_stream(capture: Path, size: int) -> Path:
    stream = capture / "hosts/gpu001/stream.fc1"
    with open(stream, "r+b") as fh:
        fh.truncate(size)  # zeros after the END marker, as a sparse file: every item stays valid
    return stream


def test_a_300_mb_stream_is_read_by_item_not_whole(capture):
    """Loading (with sha256 verification) and diagnosing read each item at its offset: the Python heap stays far
    below the stream's size."""
    _pad_stream(capture, 300 * 10**6)
    tracemalloc.start()
    try:
        status = _status(capture)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status["gpu001"] == ("ok", None)
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MiB"


def test_a_stream_over_the_member_cap_fails_its_host_unread(capture):
    _pad_stream(capture, MAX_MEMBER_BYTES + 1)
    state, reason = _status(capture)["gpu001"]
    assert state == "failed"
    assert reason == (f"capture directory: hosts/gpu001/stream.fc1: {MAX_MEMBER_BYTES + 1:,} bytes, over the "
                      "512 MiB cap on one file")


def test_item_by_item_reads_and_verification_match_whole_reads(capture, monkeypatch):
    whole = {hc.host: [hc.read(it) for it in hc.items] for hc in load_capture(capture).hosts}
    monkeypatch.setattr(capturedir, "_WHOLE_READ_BYTES", 0)  # every stream read item by item, with pread
    monkeypatch.setattr(capturedir, "_CHUNK", 7)  # and digests over several reads per item
    assert {hc.host: [hc.read(it) for it in hc.items] for hc in load_capture(capture).hosts} == whole
    stream = capture / "hosts/gpu002/stream.fc1"
    item = load_capture(capture).host("gpu002").items[-1]
    raw = bytearray(stream.read_bytes())
    raw[item.offset + item.bytes - 1] ^= 1
    stream.write_bytes(bytes(raw))
    with pytest.raises(CorruptItemError, match=f"stream.fc1 item {item.source} .*sha256"):
        load_capture(capture)


def test_a_bundles_capture_error_names_the_bundle_not_the_temporary_folder(capture, tmp_path, monkeypatch):
    import shutil

    from fabricase import pipeline
    from fabricase.bundler import verify

    def extract(bundle: Path, dest: Path) -> Path:  # what extract_bundle leaves: the capture under capture/
        shutil.copytree(capture, dest / "capture")
        return dest

    monkeypatch.setattr(verify, "extract_bundle", extract)
    (capture / "hosts/gpu002/stream.fc1").write_bytes(b"")
    bundle = tmp_path / "case.tar.gz"
    bundle.write_bytes(b"not read: extract is replaced")
    with pytest.raises(CorruptItemError) as info:
        pipeline.load_input(bundle)
    assert info.value.where.startswith(f"{bundle}: capture/hosts/gpu002/stream.fc1 item ")


def test_parse_stream_refuses_items_over_the_cap_and_odd_numbers():
    big = parse_stream(f"@@FC1 BEGIN 1 1\n@@FC1 I t file 0 0 {MAX_ITEM_BYTES + 1} 0 - - /a\n".encode())
    assert big.items == [] and "over the 64 MiB cap on one item" in big.error
    for size in (b"1_0", b" 1", b"9" * 5000, b"\xd9\xa3"):
        odd = parse_stream(b"@@FC1 BEGIN 1 1\n@@FC1 I t file 0 0 " + size + b" 0 - - /a\n0123456789\n@@FC1 END\n")
        assert odd.items == [] and odd.error.startswith("malformed item header")
    marks = parse_stream(b"@@FC1 BEGIN 1 1\n@@FC1 S 99999999 1e999 nan\n@@FC1 END\n")
    assert marks.error.startswith("malformed snapshot marker")
    ok = parse_stream(b"@@FC1 BEGIN 1 1\n@@FC1 S 0 nan inf\n@@FC1 END\n")
    assert ok.error is None and ok.snapshots[0].epoch_start is None and ok.snapshots[0].uptime_start is None


def test_a_capture_format_1_host_with_items_as_files_still_loads(capture):
    """Items stored as files of their own (format 1) go through the same checks: inside the host folder, at
    the path their source gives."""
    hc = load_capture(capture).host("gpu001")
    it = hc.items[0]
    data = hc.read(it)
    rel = capture_records.item_path(it.source, it.snapshot, it.kind)
    (capture / "hosts/gpu001" / rel).parent.mkdir(parents=True)
    (capture / "hosts/gpu001" / rel).write_bytes(data)
    index = json.loads((capture / "hosts/gpu001/index.json").read_text())
    index["items"][0].update(path=rel, offset=None)
    (capture / "hosts/gpu001/index.json").write_text(json.dumps(index))
    loaded = load_capture(capture).host("gpu001")
    assert loaded.status == HostStatus.OK and loaded.read(loaded.items[0]) == data
    (capture / "hosts/gpu001" / rel).unlink()
    (capture / "hosts/gpu001" / rel).symlink_to("/etc/hostname")
    assert "a symlink to outside the capture directory" in load_capture(capture).host("gpu001").reason


STREAM = b"@@FC1 BEGIN 1 1\n@@FC1 I t file 0 0 3 0 - - /a\nok\n\n@@FC1 END\n"


@pytest.mark.parametrize("version", [2, 3])
def test_a_stream_that_cannot_be_indexed_fails_its_host_and_the_capture_goes_on(tmp_path, monkeypatch, version):
    from fabricase import pipeline
    from fabricase.collectors.plan import CapturePlan
    from fabricase.transports import HostRun

    # Format 2 indexes the parsed items (host_capture_from_stream), format 3 the stream itself (scan_host).
    name = "scan_host" if version == 3 else "host_capture_from_stream"
    real = getattr(pipeline, name)

    calls = []

    def index(*args):
        calls.append(args)
        if len(calls) == 2:  # the second host's, "bad"
            raise OverflowError("odd bytes")
        return real(*args)

    monkeypatch.setattr(pipeline, name, index)
    root = tmp_path / "cap"
    plan = CapturePlan(collectors=(), interval_s=0)
    root.mkdir()
    capturedir.write_capture_meta(root, plan=plan, targets={}, hosts=["good", "bad"], created_at="", version=version)
    for host in ("good", "bad"):
        pipeline._record_run(root, HostRun(host, HostStatus.OK, stdout=STREAM, rc=0), plan, "fake", version)
    loaded = load_capture(root)
    assert [(h.host, h.status, len(h.items)) for h in loaded.hosts] == [
        ("good", HostStatus.OK, 1), ("bad", HostStatus.FAILED, 0)]
    assert loaded.host("bad").reason == "capture stream: cannot be indexed (OverflowError: odd bytes)"
