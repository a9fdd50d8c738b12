"""Evidence is never overwritten: `attach --capture DIR` of a new capture in a folder of the same name as the one
`open` bundled makes a second bundle file, and the filed one keeps its bytes. Before, both were named
`FC-1-<folder>.tar.gz`: the second overwrote the first, and the tracker kept the first one's id."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from click.testing import CliRunner

from fabricase.cli import cli

from .test_open_with_desks import write_fleet


def _run(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_attach_of_a_capture_in_a_folder_of_the_same_name_keeps_the_filed_bundle(home, tmp_path):
    first = write_fleet(tmp_path / "a" / "capture")
    opened = _run("open", "--replay", str(first), "--symptom", "busbw fell", "--provider", "static", "--json")
    filed = Path(opened["bundle_path"])
    digest = hashlib.sha256(filed.read_bytes()).hexdigest()
    assert filed.name == f"{opened['escalation_id']}-1-{opened['bundle_id'][:12]}.tar.gz"

    second = write_fleet(tmp_path / "b" / "capture")  # the same folder name, a new capture
    (second / "capture.json").write_text((second / "capture.json").read_text().replace(
        "2026-11-30T00:00:00Z", "2026-11-30T06:00:00Z"))
    _run("attach", opened["escalation_id"], "--capture", str(second), "--json")

    bundles = sorted(p.name for p in filed.parent.glob("*.tar.gz"))
    assert len(bundles) == 2 and bundles[0] == filed.name and bundles[1].startswith(f"{opened['escalation_id']}-2-")
    assert hashlib.sha256(filed.read_bytes()).hexdigest() == digest


def test_the_filed_ticket_names_the_bundle_id_and_the_file_sha256_each_labelled(home, tmp_path):
    opened = _run("open", "--replay", str(write_fleet(tmp_path / "fleet")), "--symptom", "busbw fell", "--provider",
                  "static", "--json")
    ticket = Path(opened["ticket_path"]).read_text()
    digest = hashlib.sha256(Path(opened["bundle_path"]).read_bytes()).hexdigest()
    assert f"bundle id (manifest sha256): {opened['bundle_id']}" in ticket
    assert f"file sha256: {digest}" in ticket
