"""Tampered members, one way each, named: a hostile name stays inside its one-line problem, a member over a cap
stops verify and extraction alike at its header, and the builder refuses the names and sizes verify would. The
sweep over every part of the bundle is test_tampered_bundles.py.
"""

from __future__ import annotations

import tarfile

import pytest
from bundle_helpers import MTIME, make_capture
from tamper_helpers import FILES, Built, build_reference, gzipped, regular_member, repacked

from fabricase import caps
from fabricase.bundler import build_bundle, extract_bundle, verify_bundle
from fabricase.errors import BundleError


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return build_reference(tmp_path_factory.mktemp("tampered"))


def test_a_fake_ok_line_in_a_member_name_stays_inside_its_problem(built, tmp_path):
    path = tmp_path / "t.tar.gz"
    path.write_bytes(repacked(built, lambda ms: ms.append(regular_member("capture/x\n verify: OK", b"1"))))
    report = verify_bundle(path)
    assert report.problems == ["unsafe: 'capture/x\\n verify: OK' (control character U+000A in the name)"]
    assert all("\n" not in p for p in report.problems)


@pytest.mark.parametrize("cap", ["MAX_MEMBER_BYTES", "MAX_TOTAL_BYTES", "MAX_MEMBERS"])
def test_caps_are_enforced_alike_by_verify_and_extraction(built, tmp_path, monkeypatch, cap):
    path = tmp_path / "b.tar.gz"
    path.write_bytes(built.gz)
    largest = max(len(d or b"") for _, d in built.members)
    total = sum(len(d or b"") for _, d in built.members)
    monkeypatch.setattr(caps, cap, {"MAX_MEMBER_BYTES": largest - 1, "MAX_TOTAL_BYTES": total - 1,
                                    "MAX_MEMBERS": len(built.members) - 1}[cap])
    try:
        said = verify_bundle(path).problems[-1]
    except BundleError as exc:  # the manifest itself is over the cap: no report to give
        said = str(exc)
    assert "over the" in said and "stopped here" in said
    with pytest.raises(BundleError, match="over the"):
        extract_bundle(path, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_declared_3_gib_member_is_refused_from_its_header(built, tmp_path):
    head = tarfile.TarInfo("capture/hosts/gpu001/huge")
    head.size, head.mtime = 3 * 1024**3, MTIME
    members_end = max(m.offset_data + -(-m.size // 512) * 512 for m, _ in built.members)
    path = tmp_path / "t.tar.gz"
    path.write_bytes(gzipped(built.tar[:members_end] + head.tobuf(tarfile.PAX_FORMAT) + b"\0" * 4096))
    report = verify_bundle(path)
    assert report.problems == [f"unsafe: capture/hosts/gpu001/huge ({3 * 1024**3} bytes, over the "
                               f"{caps.MAX_MEMBER_BYTES}-byte limit; verification stopped here)"]


@pytest.mark.parametrize("bad", ["hosts/gpu001/x\n verify: OK", "hosts/gpu001/\x1b[2J", "hosts/gpu001/a\u202eb",
                                 "hosts/gpu001/a\\b", "hosts/gpu001/\udcff", "hosts/" + "/".join(["d" * 100] * 11)])
def test_the_builder_refuses_names_verify_would_refuse(tmp_path, bad):
    cap = make_capture(tmp_path / "cap", {"capture.json": FILES["capture.json"]})
    (cap / bad).parent.mkdir(parents=True, exist_ok=True)
    try:
        (cap / bad).write_bytes(b"1")
    except OSError:
        pytest.skip("this file system refuses the name itself")
    with pytest.raises(BundleError) as err:
        build_bundle(cap, tmp_path / "b.tar.gz", extra={}, mtime=MTIME)
    assert str(err.value).isprintable() and not (tmp_path / "b.tar.gz").exists()


def test_the_builder_refuses_a_member_over_the_cap(tmp_path, monkeypatch):
    cap = make_capture(tmp_path / "cap", {"capture.json": FILES["capture.json"], "hosts/a/big": b"x" * 100})
    monkeypatch.setattr(caps, "MAX_MEMBER_BYTES", 99)
    with pytest.raises(BundleError, match="over the 99-byte limit"):
        build_bundle(cap, tmp_path / "b.tar.gz", extra={}, mtime=MTIME)
