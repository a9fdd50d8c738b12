"""build_bundle: byte-for-byte deterministic archives with a manifest first."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import struct
import tarfile

import pytest
from bundle_helpers import EXTRA, FILES, LONG_NAME, MTIME, make_capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricase.bundler import archive, build_bundle, capture_mtime
from fabricase.errors import BundleError


@pytest.fixture
def capture(tmp_path):
    return make_capture(tmp_path / "cap")


def test_same_capture_gives_the_same_bytes_and_id(capture, tmp_path):
    a = build_bundle(capture, tmp_path / "a.tar.gz", extra=EXTRA, mtime=MTIME)
    b = build_bundle(capture, tmp_path / "out" / "b.tar.gz", extra=EXTRA, mtime=MTIME)
    assert a.path.read_bytes() == b.path.read_bytes()
    assert a.bundle_id == b.bundle_id
    assert (a.members, a.size) == (len(FILES) + len(EXTRA), a.path.stat().st_size)


def test_bytes_ignore_file_times_modes_location_and_extra_order(capture, tmp_path):
    first = build_bundle(capture, tmp_path / "a.tar.gz", extra=EXTRA, mtime=MTIME)
    moved = tmp_path / "elsewhere" / "deeper" / "capture-copy"
    shutil.copytree(capture, moved)
    for i, path in enumerate(sorted(p for p in moved.rglob("*") if p.is_file())):
        os.utime(path, (1_900_000_000 + i, 1_900_000_000 + i))
        path.chmod(0o600 if i % 2 else 0o664)
    again = build_bundle(moved, tmp_path / "b.tar.gz", extra=dict(reversed(list(EXTRA.items()))), mtime=MTIME)
    assert again.path.read_bytes() == first.path.read_bytes()
    assert again.bundle_id == first.bundle_id


def test_a_different_mtime_changes_the_bytes_but_not_the_id(capture, tmp_path):
    a = build_bundle(capture, tmp_path / "a.tar.gz", extra=EXTRA, mtime=MTIME)
    b = build_bundle(capture, tmp_path / "b.tar.gz", extra=EXTRA, mtime=MTIME + 1)
    assert a.path.read_bytes() != b.path.read_bytes()
    assert a.bundle_id == b.bundle_id  # the id names the content, not the packaging


def test_members_are_normalized_and_the_manifest_comes_first(capture, tmp_path):
    b = build_bundle(capture, tmp_path / "b.tar.gz", extra=EXTRA, mtime=MTIME)
    with tarfile.open(b.path, "r:gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[0] == "MANIFEST.json"
    assert names[1:] == sorted(["capture/" + n for n in FILES] + list(EXTRA))
    assert "capture/" + LONG_NAME in names
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mode, m.mtime) == (0, 0, "", "", 0o644, MTIME)
        assert m.isreg()
    raw = b.path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert raw[3] == 0  # no FNAME: the output file name is not recorded
    assert struct.unpack("<I", raw[4:8])[0] == MTIME
    assert gzip.decompress(raw)[:512].startswith(b"MANIFEST.json\0")


def test_manifest_lists_every_member_with_size_and_sha256(capture, tmp_path):
    b = build_bundle(capture, tmp_path / "b.tar.gz", extra=EXTRA, mtime=MTIME)
    with tarfile.open(b.path, "r:gz") as tar:
        raw = tar.extractfile("MANIFEST.json").read()
    assert b.bundle_id == hashlib.sha256(raw).hexdigest()
    assert raw.endswith(b"}\n")
    doc = json.loads(raw)
    assert raw == (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()
    assert (doc["format"], doc["format_version"], doc["capture_format_version"]) == ("fabricase-bundle", 1, 1)
    expected = {"capture/" + k: v for k, v in FILES.items()} | EXTRA
    assert [m["path"] for m in doc["members"]] == sorted(expected)
    for m in doc["members"]:
        data = expected[m["path"]]
        assert (m["size"], m["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())


def test_capture_without_capture_json_has_null_format_version(tmp_path):
    cap = make_capture(tmp_path / "cap", {"hosts/a/host.json": b"{}"})
    b = build_bundle(cap, tmp_path / "b.tar.gz", extra={}, mtime=0)
    with tarfile.open(b.path, "r:gz") as tar:
        assert json.load(tar.extractfile("MANIFEST.json"))["capture_format_version"] is None


def test_symlink_is_refused_by_name_and_nothing_is_written(capture, tmp_path):
    link = capture / "hosts" / "gpu001" / "s0" / "cmd" / "link"
    link.symlink_to("/etc/passwd")
    out = tmp_path / "out" / "b.tar.gz"
    with pytest.raises(BundleError, match="symlink") as err:
        build_bundle(capture, out, extra=EXTRA, mtime=MTIME)
    assert err.value.where == str(link)
    assert not out.exists()


def test_a_failed_write_leaves_neither_bundle_nor_temporary_file(capture, tmp_path, monkeypatch):
    def half_written(fh, *args):
        fh.write(b"\x1f\x8b partial")
        raise BundleError("file changed while the bundle was written", where="x")

    monkeypatch.setattr(archive, "_write_archive", half_written)
    out = tmp_path / "out" / "b.tar.gz"
    out.parent.mkdir()
    with pytest.raises(BundleError, match="changed"):
        build_bundle(capture, out, extra=EXTRA, mtime=MTIME)
    assert list(out.parent.iterdir()) == []


def test_symlinked_directory_is_refused(capture, tmp_path):
    (tmp_path / "real").mkdir()
    (capture / "hosts" / "gpu002").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(BundleError, match="symlink"):
        build_bundle(capture, tmp_path / "b.tar.gz", extra={}, mtime=MTIME)


def test_fifo_is_refused(capture, tmp_path):
    os.mkfifo(capture / "pipe")
    with pytest.raises(BundleError, match="not a regular file"):
        build_bundle(capture, tmp_path / "b.tar.gz", extra={}, mtime=MTIME)


@pytest.mark.parametrize("name", ["", "a/b", "..", "MANIFEST.json", "capture"])
def test_extra_names_must_be_plain_top_level_names(capture, tmp_path, name):
    with pytest.raises(BundleError, match="plain file name"):
        build_bundle(capture, tmp_path / "b.tar.gz", extra={name: b"x"}, mtime=MTIME)


@pytest.mark.parametrize("mtime", [-1, 2**32, 1.5, "0", True])
def test_mtime_must_fit_the_gzip_header(capture, tmp_path, mtime):
    with pytest.raises(BundleError, match="mtime"):
        build_bundle(capture, tmp_path / "b.tar.gz", extra={}, mtime=mtime)


def test_bundle_inside_the_capture_is_refused(capture):
    with pytest.raises(BundleError, match="inside the capture"):
        build_bundle(capture, capture / "b.tar.gz", extra={}, mtime=MTIME)


def test_missing_capture_directory(tmp_path):
    with pytest.raises(BundleError, match="not found"):
        build_bundle(tmp_path / "nope", tmp_path / "b.tar.gz", extra={}, mtime=MTIME)


def test_existing_bundle_is_replaced_whole(capture, tmp_path):
    out = tmp_path / "b.tar.gz"
    out.write_bytes(b"old")
    b = build_bundle(capture, out, extra={}, mtime=MTIME)
    assert out.read_bytes()[:2] == b"\x1f\x8b" and b.size == out.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.tar.gz", "cap"]


def test_capture_mtime_reads_created_at(capture, tmp_path):
    assert capture_mtime(capture) == MTIME
    (capture / "capture.json").write_text('{"created_at": "2024-05-14T08:30:00"}')
    with pytest.raises(BundleError, match="time zone"):
        capture_mtime(capture)
    with pytest.raises(BundleError, match="created_at"):
        capture_mtime(tmp_path)


_names = st.text(alphabet="abcxyz019_.-", min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.dictionaries(
        st.lists(_names, min_size=1, max_size=3).map("/".join), st.binary(max_size=300), min_size=1, max_size=6
    )
)
def test_any_tree_builds_identically_twice(tmp_path_factory, files):
    # a path cannot be both a file and a folder
    if any(other.startswith(name + "/") for name in files for other in files):
        return
    base = tmp_path_factory.mktemp("prop")
    cap = make_capture(base / "cap", files)
    a = build_bundle(cap, base / "a.tar.gz", extra={"x.md": b"x"}, mtime=MTIME)
    b = build_bundle(cap, base / "b.tar.gz", extra={"x.md": b"x"}, mtime=MTIME)
    assert a.path.read_bytes() == b.path.read_bytes()
    with tarfile.open(a.path, "r:gz") as tar:
        assert tar.getnames()[1:] == sorted(["capture/" + n for n in files] + ["x.md"])
