"""`fabricase export` on harness fleets of 32 hosts: the textfile parses with prometheus_client, passes
`promtool check metrics`, and exposes the injected fault where a fabric engineer would look for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricase.metrics import TEXTFILE_NAME, metric_names
from metrics.conftest import run_promtool


def _export(run, capture: Path, out: Path) -> str:
    result = json.loads(run("export", str(capture), "--textfile", str(out), "--inventory",
                            str(capture / "inventory.json"), "--json").stdout)
    assert result["textfile"] == str(out / TEXTFILE_NAME)
    text = (out / TEXTFILE_NAME).read_text()
    assert sum(1 for line in text.splitlines() if not line.startswith("#")) == result["series"]
    return text


def _samples(text: str, name: str) -> list:
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]


def _worst(text: str, name: str, **match: str):
    chosen = [s for s in _samples(text, name) if all(s.labels.get(k) == v for k, v in match.items())]
    return max(chosen, key=lambda s: s.value)


def test_pfc_storm_is_the_worst_pause_share_and_a_finding(run, fleets, tmp_path):
    capture, truth = fleets["pfc-storm"]
    text = _export(run, capture, tmp_path / "tf")
    host, component = next(iter(truth)).split("/", 1)
    worst = _worst(text, "fabricase_pfc_pause_seconds_per_second", direction="tx")
    assert (worst.labels["host"], f"netdev:{worst.labels['device']}") == (host, component)
    assert worst.value > 0.35  # the harness storms 35-100% of the interval
    findings = {(s.labels["kind"], s.labels["host"], s.labels["component"])
                for s in _samples(text, "fabricase_finding")}
    assert ("pfc-storm", host, component) in findings
    # every series has a documented name, and the placements gave every host its provider
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert names <= set(metric_names())
    assert {s.labels["provider"] for s in _samples(text, "fabricase_host_info")} == {"static"}
    assert len(_samples(text, "fabricase_host_capture_status")) == 32


def test_textfile_passes_promtool_check_metrics(run, fleets, tmp_path):
    text = _export(run, fleets["pfc-storm"][0], tmp_path / "tf")
    checked = run_promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "" and checked.stderr.strip() == ""  # not one lint problem


@pytest.mark.parametrize(("kind", "metric", "to_component"), [
    ("symbol-errors", "fabricase_rdma_symbol_errors_per_second", lambda s: f"rdma:{s['device']}/{s['port']}"),
    ("nvlink-replay", "fabricase_nvlink_replay_errors_per_second", lambda s: f"nvlink:{s['gpu']}/{s['link']}"),
])
def test_error_rate_faults_are_the_fleet_maximum(run, fleets, tmp_path, kind, metric, to_component):
    capture, truth = fleets[kind]
    worst = _worst(_export(run, capture, tmp_path / "tf"), metric)
    assert f"{worst.labels['host']}/{to_component(worst.labels)}" in truth
    assert worst.value > 0


def test_xid_and_speed_downshift(run, fleets, tmp_path):
    capture, truth = fleets["xid-79"]
    text = _export(run, capture, tmp_path / "xid")
    [xid] = _samples(text, "fabricase_xid_events")
    host, component = next(iter(truth)).split("/", 1)
    assert (xid.labels["host"], f"pcie:{xid.labels['gpu']}") == (host, component)
    assert (xid.labels["code"], xid.labels["class"], xid.labels["catalog_severity"]) == ("79", "pcie", "critical")

    capture, truth = fleets["speed-downshift"]
    speeds = _samples(_export(run, capture, tmp_path / "speed"), "fabricase_link_speed_bytes_per_second")
    slow = [s for s in speeds if s.value < 50e9]  # 400 Gb/s ports, one trained at 200 Gb/s
    assert [f"{s.labels['host']}/rdma:{s.labels['device']}/{s.labels['port']}" for s in slow] == sorted(truth)
    assert slow[0].value == 25e9


def test_same_capture_same_bytes_and_the_old_file_is_replaced(run, fleets, tmp_path):
    capture = fleets["symbol-errors"][0]
    out = tmp_path / "tf"
    first = _export(run, capture, out)
    inode = (out / TEXTFILE_NAME).stat().st_ino
    assert _export(run, capture, out) == first
    assert (out / TEXTFILE_NAME).stat().st_ino != inode  # renamed over, never rewritten in place
    assert sorted(p.name for p in out.iterdir()) == [TEXTFILE_NAME]  # no temporary file left behind


def test_escalations_are_exported_from_the_tracker(run, fleets, tmp_path):
    capture = fleets["symbol-errors"][0]
    run("open", "--replay", str(capture), "--symptom", "busbw fell", "--provider", "static")
    text = _export(run, capture, tmp_path / "tf")
    [opened] = _samples(text, "fabricase_escalations_open")
    assert opened.labels["provider"] == "static" and opened.value == 1
    assert _samples(text, "fabricase_escalation_stale")[0].value == 0
    no = run("export", str(capture), "--textfile", str(tmp_path / "no"), "--no-escalations")
    assert "escalation" not in (tmp_path / "no" / TEXTFILE_NAME).read_text(), no.stdout


def test_bad_input_is_one_line(run, tmp_path):
    missing = run("export", str(tmp_path / "nope"), "--textfile", str(tmp_path / "tf"), code=1)
    assert missing.stderr.startswith("fabricase: error: ") and missing.stderr.count("\n") == 1
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run("export", str(tmp_path / "nope"), "--textfile", str(blocker), code=2)  # click: not a directory
def test_track_records_are_exported_with_the_escalations(run, fleets, tmp_path):
    capture = fleets["symbol-errors"][0]
    run("open", "--replay", str(capture), "--symptom", "busbw fell", "--provider", "static")
    text = _export(run, capture, tmp_path / "tf")
    [cases] = _samples(text, "fabricase_provider_cases")
    assert (cases.labels["provider"], cases.labels["desk"], cases.value) == ("static", "outbox", 1)
    ages = {s.labels["age"] for s in _samples(text, "fabricase_provider_open_cases")}
    assert ages == {"<1d", "1-7d", "7-30d", ">30d"}
