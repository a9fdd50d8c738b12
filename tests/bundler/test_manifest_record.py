"""MANIFEST.json says which collectors ran and how every command ended, and no wall-clock duration."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402

from fabricase.bundler import build_bundle  # noqa: E402
from fabricase.capture_index import INDEX_FILE, index_records, records_index  # noqa: E402


def test_manifest_lists_collectors_and_each_command_with_rc_and_truncation(tmp_path):
    scenario = next(s for s in fleetgen.scenarios(16, 1, 0) if s.kind == "xid-79")
    root = tmp_path / "capture"
    fleetgen.build(scenario, root, seed=2)
    index = root / "hosts" / "gpu0003" / INDEX_FILE  # format 3's binary index, edited through its codec
    items = index_records(index.read_bytes())
    cmd = next(it for it in items if it["kind"] == "command")
    cmd["rc"], cmd["truncated"], cmd["duration_ms"] = 124, True, 9999.5  # a command that hit its timeout
    index.write_bytes(records_index(items))
    bundle = build_bundle(root, tmp_path / "b.tar.gz", extra={}, mtime=1796083200)
    with tarfile.open(bundle.path) as tf:
        raw = tf.extractfile("MANIFEST.json").read()
    manifest = json.loads(raw)
    record = manifest["capture"]
    assert record["collectors"] == json.loads((root / "capture.json").read_text())["collectors"]
    assert set(record["commands"]) == set(scenario.hosts)
    hit = [c for c in record["commands"]["gpu0003"]
           if c["command"] == cmd["source"] and c["snapshot"] == cmd["snapshot"]]
    assert hit == [{"command": cmd["source"], "snapshot": cmd["snapshot"], "rc": 124, "truncated": True}]
    assert b"duration" not in raw and b"9999.5" not in raw
