"""Placements travel in the bundle as capture/placements.json, and bundles stay byte-for-byte reproducible."""

from __future__ import annotations

import hashlib

from bundle_helpers import EXTRA, MTIME, make_capture

from fabricase.bundler import build_bundle, extract_bundle, read_manifest, verify_bundle
from fabricase.capturedir import PLACEMENTS_FILE, load_placements, write_placements
from fabricase.models import Placement

PLACEMENTS = [
    Placement(host=f"gpu{i:03d}", provider="static", topology=[f"switch:leaf-{i // 8}", f"rack:r{i // 16}"],
              source="inventory:/etc/fabricase/inventory.json")
    for i in range(24)
]


def test_placements_are_a_manifest_member_and_read_back_after_extraction(tmp_path):
    cap = make_capture(tmp_path / "cap")
    stored = write_placements(cap, PLACEMENTS)
    bundle = build_bundle(cap, tmp_path / "b.tar.gz", extra=EXTRA, mtime=MTIME)
    listed = {m["path"]: m for m in read_manifest(bundle.path)["members"]}
    member = listed[f"capture/{PLACEMENTS_FILE}"]
    data = stored.read_bytes()
    assert member["size"] == len(data) and member["sha256"] == hashlib.sha256(data).hexdigest()
    assert verify_bundle(bundle.path).ok
    out = extract_bundle(bundle.path, tmp_path / "x")
    assert load_placements(out / "capture") == PLACEMENTS


def test_placements_written_in_any_order_give_the_same_bundle_bytes(tmp_path):
    a, b = make_capture(tmp_path / "a"), make_capture(tmp_path / "b")
    write_placements(a, PLACEMENTS)
    write_placements(b, list(reversed(PLACEMENTS)))
    one = build_bundle(a, tmp_path / "one.tar.gz", extra=EXTRA, mtime=MTIME)
    two = build_bundle(b, tmp_path / "two.tar.gz", extra=EXTRA, mtime=MTIME)
    assert one.path.read_bytes() == two.path.read_bytes() and one.bundle_id == two.bundle_id


def test_the_bundle_id_changes_with_the_placements(tmp_path):
    a, b = make_capture(tmp_path / "a"), make_capture(tmp_path / "b")
    write_placements(a, PLACEMENTS)
    moved = [*PLACEMENTS[:-1], Placement(host="gpu023", provider="static", topology=["switch:leaf-0"])]
    write_placements(b, moved)
    one = build_bundle(a, tmp_path / "one.tar.gz", extra=EXTRA, mtime=MTIME)
    two = build_bundle(b, tmp_path / "two.tar.gz", extra=EXTRA, mtime=MTIME)
    assert one.bundle_id != two.bundle_id
