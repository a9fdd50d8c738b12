"""A tampered manifest command list: verify names each difference from the bundled index, one problem each. The
sweep over every part of the bundle, the manifest included, is test_tampered_bundles.py.
"""

from __future__ import annotations

import pytest
from tamper_helpers import Built, build_reference, manifest_edited

from fabricase.bundler import verify_bundle


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return build_reference(tmp_path_factory.mktemp("tampered"))


def test_the_manifest_command_list_names_each_difference(built, tmp_path):
    def edit(doc):
        c = doc["capture"]["commands"]
        next(e for e in c["gpu001"] if e["command"] == "cmd:uname")["rc"] = 1
        c["gpu001"].remove(next(e for e in c["gpu001"] if e["command"] == "cmd:ibstat" and e["snapshot"] == 1))
        c["gpu002"].append({"command": "cmd:ethtool", "snapshot": 0, "rc": 0, "truncated": False})

    path = tmp_path / "t.tar.gz"
    path.write_bytes(manifest_edited(built, edit))
    problems = verify_bundle(path).problems
    index = "capture/hosts/gpu001/index.json"
    assert problems == [
        f"commands: gpu001 cmd:ibstat (snapshot 1) ran ({index}) but is not in the manifest",
        "commands: gpu001 cmd:uname (snapshot 0): rc 0 in the index, the manifest says 1",
        "commands: gpu002 cmd:ethtool (snapshot 0) is listed in the manifest but not in "
        "capture/hosts/gpu002/index.json",
    ]
