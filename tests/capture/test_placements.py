"""placements.json: where the hosts sit, stored in the capture directory (write, read, merge, inventories)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fabricase.capturedir import PLACEMENTS_FILE, load_placements, placements_bytes, write_placements
from fabricase.errors import CaptureError, ConfigError, ParseError
from fabricase.models import Placement
from fabricase.placements import inventory_placements, merge_placements

GPU1 = Placement(host="gpu001", provider="aws", instance_id="i-0abc", instance_type="p5.48xlarge",
                 region="us-east-1", zone="us-east-1a", placement_group="pg-1",
                 topology=["network-node:nn-1", "network-node:nn-2", "network-node:nn-3"],
                 extra={"capacity_block": "cb-9"}, source="provider:aws")
GPU2 = Placement(host="gpu002", provider="static", topology=["switch:leaf-3", "rack:r1"],
                 source="inventory:/etc/fabricase/inventory.json")
GPU3 = Placement(host="gpu003", provider="static", source="provider:static")  # nothing known


def test_written_placements_read_back_equal(tmp_path):
    path = write_placements(tmp_path, [GPU3, GPU1, GPU2])
    assert path == tmp_path / PLACEMENTS_FILE
    assert load_placements(tmp_path) == [GPU1, GPU2, GPU3]  # sorted by host
    doc = json.loads(path.read_text())
    assert doc["format"] == "fabricase-placements" and doc["format_version"] == 1
    assert doc["placements"][1] == {
        "host": "gpu002", "provider": "static", "instance_id": None, "instance_type": None, "region": None,
        "zone": None, "placement_group": None, "topology": ["switch:leaf-3", "rack:r1"], "extra": {},
        "source": "inventory:/etc/fabricase/inventory.json",
    }


def test_same_placements_in_any_order_give_the_same_bytes(tmp_path):
    a = placements_bytes([GPU1, GPU2, GPU3])
    assert placements_bytes([GPU3, GPU1, GPU2]) == a
    assert placements_bytes([GPU2, GPU1]) != a


def test_unchanged_placements_are_not_rewritten(tmp_path):
    path = write_placements(tmp_path, [GPU1, GPU2])
    inode = os.stat(path).st_ino
    write_placements(tmp_path, [GPU2, GPU1])
    assert os.stat(path).st_ino == inode  # left alone: a read-only replay can be opened again
    write_placements(tmp_path, [GPU1])
    assert os.stat(path).st_ino != inode and load_placements(tmp_path) == [GPU1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [PLACEMENTS_FILE]  # no temporary file left behind


def test_two_placements_for_one_host_are_refused(tmp_path):
    with pytest.raises(CaptureError, match="more than one placement for host 'gpu001'"):
        write_placements(tmp_path, [GPU1, Placement(host="gpu001", provider="static")])
    assert not (tmp_path / PLACEMENTS_FILE).exists()


def test_a_capture_without_placements_has_none(tmp_path):
    assert load_placements(tmp_path) is None


def test_fields_a_later_version_adds_are_ignored(tmp_path):
    record = {"host": "gpu001", "provider": "gcp", "topology": ["block:b1"], "rack_position": 7}
    doc = {"format": "fabricase-placements", "format_version": 1, "placements": [record], "located_at": "x"}
    (tmp_path / PLACEMENTS_FILE).write_text(json.dumps(doc))
    assert load_placements(tmp_path) == [Placement(host="gpu001", provider="gcp", topology=["block:b1"])]


def _doc(*records, **top):
    return {"format": "fabricase-placements", "format_version": 1, "placements": list(records), **top}


_OK = {"host": "gpu001", "provider": "static"}

MALFORMED = [
    (b'{"format": "fabricase-placements",', "not valid JSON: Expecting"),
    (b"\xff\xfe not utf-8", "cannot read the placements"),
    ([1, 2], "not a fabricase placements document"),
    (_doc(_OK, format="something-else"), "not a fabricase placements document"),
    (_doc(_OK, format_version=2), "placements format 2 is not supported (this fabricase reads 1)"),
    (_doc(_OK, format_version=None), "placements format None is not supported"),
    ({"format": "fabricase-placements", "format_version": 1, "placements": {"gpu001": {}}},
     "'placements' is not a list"),
    (_doc(_OK, "gpu002"), "placement #1 is not an object"),
    (_doc({"provider": "static"}), "placement #0 has no host name"),
    (_doc({"host": "", "provider": "static"}), "placement #0 has no host name"),
    (_doc({"host": "gpu001"}), "placement #0 ('gpu001') has no provider"),
    (_doc({**_OK, "zone": 3}), "placement #0 ('gpu001'): zone must be a string or null"),
    (_doc({**_OK, "source": ["x"]}), "placement #0 ('gpu001'): source must be a string or null"),
    (_doc({**_OK, "topology": "switch:leaf-1"}), "placement #0 ('gpu001'): topology must be a list"),
    (_doc({**_OK, "topology": ["switch:leaf-1", None]}), "topology must be a list of component names"),
    (_doc({**_OK, "topology": [""]}), "topology must be a list of component names"),
    (_doc({**_OK, "extra": []}), "placement #0 ('gpu001'): extra must be an object"),
    (_doc(_OK, {**_OK, "zone": "z1"}), "host 'gpu001' is placed twice"),
]


@pytest.mark.parametrize("content,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_placements_are_one_parse_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / PLACEMENTS_FILE
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    with pytest.raises(ParseError) as info:
        load_placements(tmp_path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text, text
    assert "\n" not in text


def test_merge_keeps_what_a_source_knowing_nothing_would_erase():
    stored = [GPU1, GPU2]
    located = [Placement(host="gpu001", provider="static", source="provider:static"),  # knows nothing of gpu001
               Placement(host="gpu002", provider="static", topology=["switch:leaf-4"], source="provider:static"),
               GPU3]
    merged = merge_placements(stored, located)
    assert merged == [GPU1, located[1], GPU3]
    assert merge_placements([], located) == sorted(located, key=lambda p: p.host)
    assert merge_placements(stored, []) == stored
    # Anything known counts, not only a topology: an instance id alone replaces.
    only_id = Placement(host="gpu002", provider="aws", instance_id="i-0new")
    assert merge_placements(stored, [only_id]) == [GPU1, only_id]


def _inventory(tmp_path: Path, hosts: dict) -> Path:
    path = tmp_path / "inv.json"
    path.write_text(json.dumps({"hosts": hosts}))
    return path


def test_inventory_placements_match_short_names_and_say_where_they_came_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _inventory(tmp_path, {"gpu001": {"switch": "leaf-1", "rack": "r1", "zone": "z1"}, "gpu009": {"switch": "x"}})
    placed = inventory_placements(Path("inv.json"), ["gpu001.cluster.local", "gpu002"])
    source = f"inventory:{tmp_path / 'inv.json'}"  # absolute, whatever path was given
    assert placed == [
        Placement(host="gpu001.cluster.local", provider="static", zone="z1", topology=["switch:leaf-1", "rack:r1"],
                  source=source),
        Placement(host="gpu002", provider="static", source=source),
    ]


def test_a_missing_or_malformed_inventory_is_a_config_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.json: inventory file not found"):
        inventory_placements(tmp_path / "nope.json", ["gpu001"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"hosts": ')
    with pytest.raises(ConfigError, match=r"bad\.json: not valid JSON"):
        inventory_placements(bad, [])  # checked even with no host to place
