"""Placements stored in the capture and the bundle, so that re-analysis without the inventory names the switch.

The fleet is hand-made: 32 hosts, one RDMA port each, four leaf switches of eight hosts (and two racks of
sixteen); six of the eight hosts under leaf-2 show symbol errors, every other port is clean."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

from fabricase.bundler import build_bundle
from fabricase.capturedir import (
    PLACEMENTS_FILE,
    host_capture_from_stream,
    load_placements,
    write_capture_meta,
    write_host,
)
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402  (its capture-stream writer)

HOSTS = [f"gpu{i:03d}" for i in range(1, 33)]
BAD_UNDER_LEAF_2 = {"gpu009", "gpu010", "gpu011", "gpu013", "gpu014", "gpu016"}
SWITCH = "switch:leaf-2"


def write_fleet(root: Path) -> Path:
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma"])), interval_s=fleetgen.INTERVAL_S)
    root.mkdir(parents=True)
    write_capture_meta(root, plan=plan, targets={"nodeset": "gpu[001-032]"}, hosts=HOSTS,
                       created_at="2026-11-30T00:00:00Z")
    for host in HOSTS:
        counters = {name: (10, 10) for name in (*fleetgen.COUNTERS, *fleetgen.HW)}
        counters["port_rcv_data"] = counters["port_xmit_data"] = (10**9, 2 * 10**9)
        if host in BAD_UNDER_LEAF_2:
            counters["symbol_error"] = (10, 50)
        raw = fleetgen._stream([{"dev": "mlx5_0", "counters": counters, "rate": "400 Gb/sec (4X NDR)"}])
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "test"
        write_host(root, hc, raw)
    return root


def write_inventory(path: Path, switch_of=lambda i: f"leaf-{i // 8 + 1}") -> Path:
    hosts = {h: {"switch": switch_of(i), "rack": f"r{i // 16 + 1}"} for i, h in enumerate(HOSTS)}
    path.write_text(json.dumps({"hosts": hosts}))
    return path


def shared(findings: list[dict]) -> list[str]:
    return [f["component"] for f in findings if f["kind"] == "shared-component-fault"]


@pytest.fixture
def fleet(tmp_path) -> Path:
    return write_fleet(tmp_path / "fleet")


def test_open_stores_placements_and_the_bundle_alone_names_the_switch(run, home, fleet, tmp_path):
    home.mkdir(parents=True, exist_ok=True)
    config_inventory = write_inventory(home / "inventory.json")  # what the static provider locates with
    opened = run.json("open", "--replay", str(fleet), "--symptom", "busbw fell", "--provider", "static")
    assert shared(opened["findings"]) == [SWITCH]

    bundle = Path(opened["bundle_path"])
    with tarfile.open(bundle) as tar:
        member = tar.extractfile(f"capture/{PLACEMENTS_FILE}")
        stored = json.loads(member.read())
    by_host = {p["host"]: p for p in stored["placements"]}
    assert sorted(by_host) == HOSTS
    assert by_host["gpu009"]["topology"] == [SWITCH, "rack:r1"]
    assert by_host["gpu009"]["source"] == "provider:static" and by_host["gpu009"]["provider"] == "static"
    assert run.json("verify", str(bundle))["ok"]

    # Elsewhere, years later: no inventory, only the bundle.
    config_inventory.unlink()
    again = run.json("analyze", str(bundle))
    assert shared(again["findings"]) == [SWITCH]
    fault = next(f for f in again["findings"] if f["kind"] == "shared-component-fault")
    assert fault["host"] is None
    assert fault["related"] == sorted(f"{h}/rdma:mlx5_0/1" for h in BAD_UNDER_LEAF_2)
    assert again["findings"] == opened["findings"]
    assert again["topology"]["origin"] == "capture" and again["topology"]["placed"] == 32
    assert again["topology"]["sources"] == {"provider:static": 32} and again["topology"]["stored_in"] is None
    # The ticket re-rendered from the bundle shows where the hosts sit.
    assert f"{SWITCH} > rack:r1" in run.json("draft", str(bundle))["body"]


def test_without_stored_placements_the_bundle_cannot_name_the_switch(run, fleet, tmp_path):
    made = run.json("bundle", str(fleet), "-o", str(tmp_path / "plain.tar.gz"))
    result = run.json("analyze", made["bundle_path"])
    assert shared(result["findings"]) == []
    assert result["topology"] == {"origin": "none", "path": None, "hosts": 32, "placed": 0, "sources": {},
                                  "stored_in": None, "warning": None}
    human = run("analyze", made["bundle_path"]).stdout
    assert "Topology: none (no --inventory, no placements.json in the capture" in human


def test_analyze_with_inventory_stores_it_and_a_later_inventory_overrides(run, fleet, tmp_path):
    inventory = write_inventory(tmp_path / "inv.json")
    first = run.json("analyze", str(fleet), "--inventory", str(inventory))
    assert shared(first["findings"]) == [SWITCH]
    assert first["topology"]["origin"] == "inventory" and first["topology"]["path"] == str(inventory)
    assert first["topology"]["stored_in"] == str(fleet / PLACEMENTS_FILE)
    assert first["topology"]["sources"] == {f"inventory:{inventory}": 32}

    stored = run.json("analyze", str(fleet))
    assert stored["findings"] == first["findings"] and stored["topology"]["origin"] == "capture"
    human = run("analyze", str(fleet)).stdout
    assert f"Topology: 32 of 32 host(s) placed, from the capture's placements.json (inventory:{inventory})" in human

    # A bundle built now carries the placements: its findings.json names the switch too.
    made = run.json("bundle", str(fleet), "-o", str(tmp_path / "b.tar.gz"))
    with tarfile.open(made["bundle_path"]) as tar:
        assert shared(json.loads(tar.extractfile("findings.json").read())) == [SWITCH]
    assert run.json("bundle", str(fleet), "-o", str(tmp_path / "c.tar.gz"))["bundle_id"] == made["bundle_id"]
    assert (tmp_path / "b.tar.gz").read_bytes() == (tmp_path / "c.tar.gz").read_bytes()

    # Cabled differently (hosts round-robin over the leaves): the bad hosts no longer share a switch.
    spread = write_inventory(tmp_path / "spread.json", switch_of=lambda i: f"leaf-{i % 4 + 1}")
    overridden = run.json("analyze", str(fleet), "--inventory", str(spread))
    assert shared(overridden["findings"]) == [] and overridden["topology"]["origin"] == "inventory"
    assert shared(run.json("analyze", str(fleet))["findings"]) == []  # what was stored was replaced


def test_open_keeps_stored_placements_the_provider_knows_nothing_about(run, fleet, tmp_path):
    run.json("analyze", str(fleet), "--inventory", str(write_inventory(tmp_path / "inv.json")))
    # The static provider has no inventory here: it places nobody, and must not erase what was stored.
    opened = run.json("open", "--replay", str(fleet), "--symptom", "x")
    assert shared(opened["findings"]) == [SWITCH]
    assert {p.source for p in load_placements(fleet)} == {f"inventory:{tmp_path / 'inv.json'}"}


def test_the_config_inventory_is_used_when_the_capture_places_nobody(run, home, fleet):
    run.json("open", "--replay", str(fleet), "--symptom", "x", "--dry-run")  # stores 32 empty placements
    assert all(not p.topology for p in load_placements(fleet))
    home.mkdir(parents=True, exist_ok=True)
    write_inventory(home / "inventory.json")
    result = run.json("analyze", str(fleet))
    assert shared(result["findings"]) == [SWITCH]
    assert result["topology"]["origin"] == "config-inventory"
    assert result["topology"]["path"] == str(home / "inventory.json")


def test_collect_with_inventory_stores_placements(run, tmp_path, host_tree):
    inventory = tmp_path / "inv.json"
    inventory.write_text(json.dumps({"hosts": {"localhost": {"switch": "leaf-9", "rack": "r4", "zone": "z1"}}}))
    out = run.json("collect", "--hosts", "localhost", "-o", str(tmp_path / "D"), "--interval", "0",
                   "--root", str(host_tree), "--inventory", str(inventory))
    assert out["placements"] == str(tmp_path / "D" / PLACEMENTS_FILE)
    [placement] = load_placements(tmp_path / "D")
    assert placement.host == "localhost" and placement.topology == ["switch:leaf-9", "rack:r4"]
    assert placement.zone == "z1" and placement.source == f"inventory:{inventory}"
    assert run.json("analyze", str(tmp_path / "D"))["topology"]["origin"] == "capture"


@pytest.mark.parametrize("content,message", [(None, "inventory file not found"), ('{"hosts": [', "not valid JSON")])
def test_collect_with_a_bad_inventory_fails_before_capturing(run, tmp_path, host_tree, content, message):
    inventory = tmp_path / "inv.json"
    if content is not None:
        inventory.write_text(content)
    result = run("collect", "--hosts", "localhost", "-o", str(tmp_path / "D"), "--interval", "0",
                 "--root", str(host_tree), "--inventory", str(inventory), code=1)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"fabricase: error: {inventory}: {message}"), line
    assert not (tmp_path / "D").exists()


def test_malformed_placements_stop_analysis_in_one_line_unless_an_inventory_replaces_them(run, fleet, tmp_path):
    stored = fleet / PLACEMENTS_FILE
    stored.write_text('{"format": "fabricase-placements", "format_version": 1, "placements": [{"host": 7}]}')
    for command in (["analyze", str(fleet)], ["analyze", str(fleet), "--json"], ["draft", str(fleet)],
                    ["bundle", str(fleet), "-o", str(tmp_path / "never.tar.gz")]):
        result = run(*command, code=1)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert lines[0] == (f"fabricase: error: {stored}: placement #0 has no host name; fix or remove it, or give "
                            "--inventory FILE")
        assert result.stdout == ""

    # A bundle holding such a file (built by hand: `bundle` refuses) is named as the bundle's member.
    bad_bundle = build_bundle(fleet, tmp_path / "bad.tar.gz", extra={}, mtime=0).path
    result = run("analyze", str(bad_bundle), code=1)
    assert result.stderr.startswith(f"fabricase: error: {bad_bundle}: capture/{PLACEMENTS_FILE}: placement #0 ")

    # --inventory is where the hosts sit: the broken file is ignored with a warning, then replaced.
    result = run("analyze", str(fleet), "--inventory", str(write_inventory(tmp_path / "inv.json")), "--json")
    assert shared(json.loads(result.stdout)["findings"]) == [SWITCH]
    assert f"warning: {stored}: placement #0 has no host name (ignored: --inventory replaces it)" in result.stderr
    assert len(load_placements(fleet)) == 32


def test_stored_placements_win_over_the_config_inventory(run, home, fleet, tmp_path):
    spread = write_inventory(tmp_path / "spread.json", switch_of=lambda i: f"leaf-{i % 4 + 1}")
    run.json("analyze", str(fleet), "--inventory", str(spread))  # stored: the capture's own placements
    home.mkdir(parents=True, exist_ok=True)
    write_inventory(home / "inventory.json")  # this machine's inventory, of some other cluster
    result = run.json("analyze", str(fleet))
    assert result["topology"]["origin"] == "capture" and shared(result["findings"]) == []
