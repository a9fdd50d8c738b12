"""Hundreds of tampered bundles made from one real built bundle (tamper_cases, by the part each changes): verify
and extraction reject every one that differs from what was built (content, names, framing, header fields, the
manifest and its command list), and accept the original. What verify leaves out on purpose (docs/bundles.md, "What
verify checks") is a list of its own, asserted accepted with the bundle id it reports, so that the decision is
visible and tested. The members and the manifest tampered one way each, by name: test_tampered_members.py and
test_tampered_manifest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tamper_cases import tampered, uncovered
from tamper_helpers import Built, build_reference, gzipped

from fabricase.bundler import extract_bundle, verify_bundle
from fabricase.errors import BundleError


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return build_reference(tmp_path_factory.mktemp("tampered"))


def _verdict(path: Path, dest: Path) -> tuple[bool, bool, list[str]]:
    """(verify rejects, extraction refuses, every message verify and extraction gave)."""
    texts: list[str] = []
    try:
        report = verify_bundle(path)
        rejected = not report.ok
        texts += report.problems
    except BundleError as exc:
        rejected = True
        texts.append(str(exc))
    try:
        extract_bundle(path, dest)
        refused = False
    except BundleError as exc:
        refused = True
        texts.append(str(exc))
        texts += getattr(exc, "problems", [])
    return rejected, refused, texts


def _unsafe_text(texts: list[str]) -> list[str]:
    return [t for t in texts if not t.isprintable() or "verify: OK" in t.split(": ", 1)[0]]


def test_the_original_verifies_and_extracts(built, tmp_path):
    path = tmp_path / "b.tar.gz"
    path.write_bytes(built.gz)
    report = verify_bundle(path)
    assert report.ok and report.problems == [] and report.bundle_id == built.bundle_id
    assert (extract_bundle(path, tmp_path / "x") / "capture" / "capture.json").is_file()


def test_every_tampered_bundle_is_rejected_by_verify_and_extraction(built, tmp_path):
    cases = tampered(built)
    assert len(cases) >= 220 and len({c.name for c in cases}) == len(cases)
    same = [c.name for c in cases if c.data == built.gz]
    assert same == [], "mutations that changed nothing"
    path = tmp_path / "t.tar.gz"
    passed, unsafe = [], []
    for i, case in enumerate(cases):
        path.write_bytes(case.data)
        rejected, refused, texts = _verdict(path, tmp_path / f"x{i}")
        if not (rejected and refused):
            passed.append(f"{case.name}: verify {'rejects' if rejected else 'accepts'}, "
                          f"extraction {'refuses' if refused else 'extracts'}")
        unsafe += [f"{case.name}: {t!r}" for t in _unsafe_text(texts)]
        assert not (tmp_path / f"x{i}").exists() or not refused
    assert passed == [], f"{len(passed)} of {len(cases)} tampered bundles passed:\n" + "\n".join(passed)
    assert unsafe == [], "messages not safe to print:\n" + "\n".join(unsafe)


def test_what_verify_leaves_out_on_purpose_is_accepted(built, tmp_path):
    path = tmp_path / "t.tar.gz"
    for i, (case, same_id) in enumerate(uncovered(built)):
        path.write_bytes(case.data)
        report = verify_bundle(path)
        assert report.ok, (case.name, report.problems)
        assert (report.bundle_id == built.bundle_id) is same_id, case.name
        assert (extract_bundle(path, tmp_path / f"x{i}") / "capture").is_dir()


def test_trailing_data_is_named_with_the_same_bundle_id(built, tmp_path):
    path = tmp_path / "t.tar.gz"
    path.write_bytes(built.gz + b"\0" * 64)
    report = verify_bundle(path)
    assert report.bundle_id == built.bundle_id
    assert report.problems == ["64 bytes of trailing data after the gzip stream"]
    path.write_bytes(built.gz + gzipped(b"\0" * 1024))
    assert verify_bundle(path).problems[0].startswith("a second gzip member after the bundle's")
    members_end = max(m.offset_data + -(-m.size // 512) * 512 for m, _ in built.members)
    path.write_bytes(gzipped(built.tar + b"x"))
    assert verify_bundle(path).problems == [f"trailing data after the tar's end-of-archive blocks (byte {members_end})"]
