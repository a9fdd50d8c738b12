"""verify_bundle, read_manifest and extract_bundle: tampering is named, hostile archives are refused."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest
from bundle_helpers import EXTRA, FILES, MTIME, crafted, make_capture, members_of, regular, tree, write_tar

from fabricase.bundler import build_bundle, extract_bundle, read_manifest, verify_bundle
from fabricase.errors import BundleError, VerifyError

UNAME = "capture/hosts/gpu001/s0/cmd/uname"


@pytest.fixture
def capture(tmp_path):
    return make_capture(tmp_path / "cap")


@pytest.fixture
def bundle(capture, tmp_path):
    return build_bundle(capture, tmp_path / "b.tar.gz", extra=EXTRA, mtime=MTIME)


def rebuilt(bundle, path, edit):
    """The bundle re-packed after `edit` changed its list of (TarInfo, data) members."""
    members = members_of(bundle.path)
    edit(members)
    return write_tar(path, members)


def test_round_trip_build_verify_extract(capture, bundle, tmp_path):
    report = verify_bundle(bundle.path)
    assert report.ok and report.problems == []
    assert (report.bundle_id, report.members) == (bundle.bundle_id, len(FILES) + len(EXTRA))
    dest = extract_bundle(bundle.path, tmp_path / "x" / "out")
    assert dest == tmp_path / "x" / "out"
    assert tree(dest / "capture") == tree(capture)
    for name, data in EXTRA.items():
        assert (dest / name).read_bytes() == data
    assert json.loads((dest / "MANIFEST.json").read_bytes())["format"] == "fabricase-bundle"
    assert (dest / "capture" / "capture.json").stat().st_mtime == MTIME
    assert sorted(p.name for p in dest.parent.iterdir()) == ["out"]  # the staging folder is gone


def test_extract_into_an_existing_empty_folder(bundle, tmp_path):
    (tmp_path / "empty").mkdir()
    assert (extract_bundle(bundle.path, tmp_path / "empty") / "capture" / "capture.json").is_file()


def test_extract_refuses_a_non_empty_folder(bundle, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("mine")
    with pytest.raises(BundleError, match="not an empty folder"):
        extract_bundle(bundle.path, tmp_path / "full")
    assert (tmp_path / "full" / "keep").read_text() == "mine"


def test_read_manifest(bundle):
    doc = read_manifest(bundle.path)
    assert doc["format_version"] == 1 and len(doc["members"]) == bundle.members


def test_one_flipped_byte_inside_a_member_is_named(bundle, tmp_path):
    # patch the member's data in the raw tar (headers untouched) and re-gzip
    raw = bytearray(gzip.decompress(bundle.path.read_bytes()))
    with tarfile.open(fileobj=io.BytesIO(bytes(raw))) as tar:
        offset = tar.getmember(UNAME).offset_data
    raw[offset] ^= 0x01
    patched = tmp_path / "patched.tar.gz"
    patched.write_bytes(gzip.compress(bytes(raw), mtime=MTIME))
    report = verify_bundle(patched)
    assert not report.ok
    assert report.problems == [f"changed: {UNAME} (sha256 mismatch)"]
    assert report.bundle_id == bundle.bundle_id


def test_a_member_of_another_size_is_named(bundle, tmp_path):
    def grow(members):
        i = next(i for i, (m, _) in enumerate(members) if m.name == UNAME)
        members[i] = (members[i][0], members[i][1] + b"!")

    report = verify_bundle(rebuilt(bundle, tmp_path / "t.tar.gz", grow))
    n = len(FILES[UNAME.removeprefix("capture/")])
    assert report.problems == [f"size: {UNAME} ({n + 1} bytes, manifest says {n})"]


def test_extra_and_missing_members_are_named(bundle, tmp_path):
    def edit(members):
        members[:] = [(m, d) for m, d in members if m.name != "ticket.md"]
        members.append(regular("capture/hosts/gpu001/planted", b"x"))

    report = verify_bundle(rebuilt(bundle, tmp_path / "t.tar.gz", edit))
    assert report.problems == ["extra: capture/hosts/gpu001/planted", "missing: ticket.md"]
    assert not report.ok


def test_duplicate_member_is_a_problem(bundle, tmp_path):
    def dup(members):
        members.append(regular(UNAME, FILES[UNAME.removeprefix("capture/")]))

    assert verify_bundle(rebuilt(bundle, tmp_path / "t.tar.gz", dup)).problems == [f"duplicate: {UNAME}"]


def test_unsafe_members_are_reported_by_verify(tmp_path):
    link = tarfile.TarInfo("capture/evil")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    report = verify_bundle(crafted(tmp_path / "t.tar.gz", {"a": b"1"}, link))
    assert report.problems == ["unsafe: capture/evil (symlink to /etc/shadow)"]


def test_tampered_bundle_is_not_extracted(bundle, tmp_path):
    def edit(members):
        members[:] = [(m, d) for m, d in members if m.name != UNAME]

    with pytest.raises(VerifyError, match="missing") as err:
        extract_bundle(rebuilt(bundle, tmp_path / "t.tar.gz", edit), tmp_path / "dest")
    assert err.value.problems == [f"missing: {UNAME}"]
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"just some text\n", b"\x1f\x8b\x08", b"PK\x03\x04 a zip file"],
    ids=["empty", "text", "gzip-magic-only", "zip"],
)
def test_not_a_bundle_raises_one_line_naming_the_file(tmp_path, content):
    path = tmp_path / "not.tar.gz"
    path.write_bytes(content)
    with pytest.raises(BundleError) as err:
        verify_bundle(path)
    assert err.value.where == str(path) and "\n" not in str(err.value)
    assert err.value.__cause__ is not None


def test_uncompressed_tar_is_refused(bundle, tmp_path):
    plain = tmp_path / "plain.tar"
    plain.write_bytes(gzip.decompress(bundle.path.read_bytes()))
    with pytest.raises(BundleError, match="not a readable bundle"):
        verify_bundle(plain)


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9, -8])
def test_truncated_bundle_raises(bundle, tmp_path, keep):
    raw = bundle.path.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(raw[: int(len(raw) * keep)] if keep > 0 else raw[:keep])  # -8: only the gzip trailer lost
    for reader in (verify_bundle, lambda p: extract_bundle(p, tmp_path / "dest")):
        with pytest.raises(BundleError) as err:
            reader(cut)
        assert err.value.where == str(cut) and "\n" not in str(err.value)
    assert not (tmp_path / "dest").exists()


def test_corrupt_compressed_data_raises(bundle, tmp_path):
    raw = bytearray(bundle.path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(BundleError, match="not a readable bundle"):
        verify_bundle(bad)


def test_missing_file_raises(tmp_path):
    with pytest.raises(BundleError) as err:
        verify_bundle(tmp_path / "nope.tar.gz")
    assert err.value.where == str(tmp_path / "nope.tar.gz")


def test_tar_without_manifest_raises(tmp_path):
    path = write_tar(tmp_path / "t.tar.gz", [regular("capture/a", b"1")])
    for reader in (verify_bundle, read_manifest):
        with pytest.raises(BundleError, match="no MANIFEST.json"):
            reader(path)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (b"{not json", "not JSON"),
        (b'{"format": "something-else"}', "not a fabricase-bundle manifest"),
        (b'{"format": "fabricase-bundle", "format_version": 2, "members": []}', "format_version 2"),
        (b'{"format": "fabricase-bundle", "format_version": 1, "members": [{"path": "a"}]}', "malformed"),
    ],
)
def test_bad_manifest_raises(tmp_path, manifest, message):
    path = write_tar(tmp_path / "t.tar.gz", [regular("MANIFEST.json", manifest)])
    with pytest.raises(BundleError, match=message) as err:
        verify_bundle(path)
    assert str(tmp_path / "t.tar.gz") in str(err.value)


def _special(name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


@pytest.mark.parametrize(
    ("hostile", "reason"),
    [
        (lambda: regular("../x", b"owned"), "'..' path component"),
        (lambda: regular("capture/../../x", b"owned"), "'..' path component"),
        (lambda: regular("/etc/x", b"owned"), "absolute path"),
        (lambda: (_special("capture/link", tarfile.SYMTYPE, "/etc/passwd"), None), "symlink"),
        (lambda: (_special("capture/hard", tarfile.LNKTYPE, "capture/a"), None), "hard link"),
        (lambda: (_special("capture/dev", tarfile.CHRTYPE), None), "device or fifo"),
        (lambda: (_special("capture/fifo", tarfile.FIFOTYPE), None), "device or fifo"),
    ],
    ids=["dotdot", "nested-dotdot", "absolute", "symlink", "hardlink", "chardev", "fifo"],
)
def test_extraction_refuses_hostile_members(tmp_path, hostile, reason):
    info, data = hostile()
    files = {"capture/a": b"1"} | ({info.name: data} if data is not None else {})
    members = [regular("MANIFEST.json", _manifest(files)), regular("capture/a", b"1"), (info, data)]
    path = write_tar(tmp_path / "t.tar.gz", members)
    dest = tmp_path / "deep" / "dest"
    with pytest.raises(BundleError, match=reason) as err:
        extract_bundle(path, dest)
    assert info.name in str(err.value)
    assert not dest.exists() and not (tmp_path / "x").exists() and not (tmp_path / "deep" / "x").exists()


def test_extraction_refuses_an_oversized_member(tmp_path):
    files = {"capture/small": b"12345", "capture/big": b"x" * 5000}
    path = crafted(tmp_path / "t.tar.gz", files)
    assert verify_bundle(path).ok
    with pytest.raises(BundleError, match="capture/big: 5000 bytes, over the 4096-byte limit"):
        extract_bundle(path, tmp_path / "dest", max_member_bytes=4096)
    assert not (tmp_path / "dest").exists()
    assert (extract_bundle(path, tmp_path / "ok", max_member_bytes=5000) / "capture" / "big").stat().st_size == 5000


def test_directory_members_are_accepted(tmp_path):
    d = _special("capture/hosts", tarfile.DIRTYPE)
    path = crafted(tmp_path / "t.tar.gz", {"capture/hosts/a": b"1"}, d)
    assert verify_bundle(path).ok
    assert (extract_bundle(path, tmp_path / "dest") / "capture" / "hosts" / "a").read_bytes() == b"1"


def _manifest(files):
    from bundle_helpers import manifest_for

    return manifest_for(files)
