"""The one screen of `analyze`, `collect` and `open`: the verdict line, one line per suspect, one line of background,
readable at 80 and at 160 columns; `--findings` for the raw list; `--json` with suspects, background and findings;
capture data escaped; `draft` prints what filing would send."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from rich.console import Console

from fabricase.cli.screen import background_line, print_diagnosis
from fabricase.diagnosis import Background, Diagnosis, HostOutcome, Suspect
from fabricase.models import Evidence, Finding, Severity

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402  (synthetic fleets written as real capture directories)
import harness  # noqa: E402  (the harness scoring: which suspects name the injected faults)

_SUSPECT_LINE = re.compile(r"^(critical|major|minor|info) ")


@pytest.fixture(scope="module")
def fleet16(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """16 hosts, 8 of them with one different fault each (the issue's acceptance fleet)."""
    root = tmp_path_factory.mktemp("fleet16") / "capture"
    return root, fleetgen.build_fleet16(root, seed=1)


@pytest.fixture(scope="module")
def clean32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scenario = next(s for s in fleetgen.scenarios(32, 1, 1) if s.kind is None)
    root = tmp_path_factory.mktemp("clean") / "capture"
    fleetgen.build(scenario, root, seed=3)
    return root


def _analyze(run, monkeypatch, folder: Path, columns: int, *extra: str):
    monkeypatch.setenv("COLUMNS", str(columns))
    return run("analyze", str(folder), "--inventory", str(folder / "inventory.json"), *extra)


def _screen(stdout: str) -> list[str]:
    """The diagnosis screen: from the verdict line on (the capture and topology lines before it are paths)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^(\d+ suspects? |no suspect )", line))
    return [line.rstrip() for line in lines[start:]]


@pytest.mark.parametrize("columns", [80, 160])
def test_fleet16_shows_one_line_per_suspect_at_80_and_160_columns(run, monkeypatch, fleet16, columns):
    folder, truths = fleet16
    screen = _screen(_analyze(run, monkeypatch, folder, columns).stdout)
    assert screen[0] == "8 suspects on 8 of 16 hosts; 8 hosts healthy"
    suspects = [line for line in screen if _SUSPECT_LINE.match(line)]
    assert len(suspects) == 8
    assert {line.split()[1] for line in suspects} == {t.split("/")[0] for t in truths}
    assert all(len(line) <= columns for line in screen)
    # Nothing wraps one word per line: a suspect takes its line, at most one more for the key number or a long
    # component (80 columns), and its action line; at 160 columns, exactly its line and its action. Then the
    # background and, for this 5 s capture, what it could not rule out.
    assert len(screen) <= 1 + 8 * (3 if columns == 80 else 2) + 3
    actions = [line for line in screen if "→" in line]
    assert len(actions) == 8 and all(line.startswith(" " * 10) for line in actions)
    assert any(line.startswith("Background: ") for line in screen)
    assert "raw finding(s)" in screen[-1] and "--findings" in screen[-1]
    assert "finding(s)\n" not in "\n".join(screen)  # the raw table only with --findings


@pytest.mark.parametrize("columns", [80, 160])
def test_findings_flag_adds_the_raw_table_readable_at_both_widths(run, monkeypatch, fleet16, columns):
    folder, _ = fleet16
    stdout = _analyze(run, monkeypatch, folder, columns, "--findings").stdout
    findings = run.json("analyze", str(folder))["findings"]
    screen = _screen(stdout)
    title = screen.index(f"{len(findings)} finding(s)")
    table = screen[title + 3:]  # title, header, rule
    assert re.match(r"^sev\s+host\s+component\s+summary$", screen[title + 1])
    assert sum(bool(_SUSPECT_LINE.match(line)) for line in table) == len(findings)
    assert all(len(line) <= columns for line in table)
    # The summary column keeps a third of the width or more: a finding's row is a few lines, not one per word.
    assert len(table) <= len(findings) * (6 if columns == 80 else 3)
    assert len([line for line in screen[:title] if _SUSPECT_LINE.match(line)]) == 8


def test_json_has_the_verdict_suspects_background_and_unchanged_findings(run, fleet16):
    folder, truths = fleet16
    out = run.json("analyze", str(folder), "--inventory", str(folder / "inventory.json"))
    assert out["verdict"] == "8 suspects on 8 of 16 hosts; 8 hosts healthy"
    assert len(out["suspects"]) == 8
    assert truths <= harness.suspected(out)
    for s in out["suspects"]:
        assert {"id", "host", "components", "verdict", "verdict_text", "severity", "owner", "action", "evidence",
                "identity", "findings", "key_number", "name"} <= set(s)
    assert isinstance(out["background"], list)
    assert all({"metric", "rose_on", "compared", "text"} <= set(b) for b in out["background"])
    # findings stay in the form docs/findings.md gives them
    from fabricase.capturedir import load_capture
    from fabricase.pipeline import analyze_capture
    from fabricase.placements import inventory_placements, topology_of

    capture = load_capture(folder, verify=False)
    placements = inventory_placements(folder / "inventory.json", [h.host for h in capture.hosts])
    expected = json.loads(json.dumps([f.to_dict() for f in analyze_capture(capture, topology_of(placements))],
                                     default=str))
    assert out["findings"] == expected


@pytest.mark.parametrize("columns", [80, 160])
def test_clean_fleet_shows_no_suspect_line(run, monkeypatch, clean32, columns):
    screen = _screen(_analyze(run, monkeypatch, clean32, columns).stdout)
    assert screen[0] == "no suspect on 32 hosts; 32 hosts healthy"
    assert not [line for line in screen if _SUSPECT_LINE.match(line)]
    assert run.json("analyze", str(clean32))["suspects"] == []


def test_open_dry_run_prints_the_screen_and_its_json_has_the_suspects(run, monkeypatch, fleet16):
    folder, truths = fleet16
    monkeypatch.setenv("COLUMNS", "80")
    out = run.json("open", "--replay", str(folder), "--symptom", "busbw fell", "--dry-run")
    assert out["verdict"] == "8 suspects on 8 of 16 hosts; 8 hosts healthy"
    assert len(out["suspects"]) == 8 and truths <= harness.suspected(out)
    assert isinstance(out["background"], list) and out["findings"]
    screen = _screen(run("open", "--replay", str(folder), "--symptom", "busbw fell", "--dry-run").stdout)
    assert len([line for line in screen if _SUSPECT_LINE.match(line)]) == 8


def test_collect_captures_then_diagnoses(run, monkeypatch, tmp_path, host_tree):
    monkeypatch.setenv("COLUMNS", "80")
    cap = tmp_path / "C"
    text = run("collect", "--hosts", "localhost", "-o", str(cap), "--interval", "0", "--root", str(host_tree)).stdout
    assert "Captured 1/1 host(s)" in text
    assert re.search(r"^(no suspect on 1 host|1 suspect on 1 of 1 host); ", text, re.M)
    assert re.search(r"^Background: ", text, re.M)
    out = run.json("collect", "--hosts", "localhost", "-o", str(tmp_path / "D"), "--interval", "0",
                   "--root", str(host_tree))
    assert {"verdict", "suspects", "background", "findings", "capture_dir", "hosts"} <= set(out)
    assert any(f["component"] == "netdev:eth1" for f in out["findings"])


_HOSTILE = "[/x]leaf\x1b[2J"


def test_hostile_names_from_the_capture_are_escaped(run, monkeypatch, tmp_path):
    """A switch named like rich markup with an ESC sequence (from the inventory): printed as text, the ESC shown
    as \\x1b, nothing crashes."""
    scenario = next(s for s in fleetgen.scenarios(48, 1, 0) if s.kind == "bad-switch")
    folder = tmp_path / "capture"
    fleetgen.build(scenario, folder, seed=3)
    [switch] = scenario.truth
    inventory = json.loads((folder / "inventory.json").read_text())
    for where in inventory["hosts"].values():
        if where["switch"] == switch.removeprefix("switch:"):
            where["switch"] = _HOSTILE
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(inventory))
    for columns in (80, 160):
        monkeypatch.setenv("COLUMNS", str(columns))
        result = run("analyze", str(folder), "--inventory", str(hostile), "--findings")
        assert "\x1b" not in result.stdout + result.stderr
        screen = _screen(result.stdout)
        first = [line for line in screen if _SUSPECT_LINE.match(line)][0]
        assert first.startswith("major  (shared)  switch")
        assert "[/x]leaf\\x1b[2J" in " ".join(screen)  # the name, as text, with the ESC shown
        assert any(line.lstrip().startswith("errors under one switch → Check switch [/x]leaf\\x1b[2J: its ports")
                   for line in screen)
    out = run.json("analyze", str(folder), "--inventory", str(hostile))
    assert out["suspects"][0]["components"][0] == f"switch:{_HOSTILE}"  # JSON keeps the value, escaped by JSON


def test_a_hostile_host_reason_is_escaped(run, tmp_path, clean32):
    folder = tmp_path / "capture"
    shutil.copytree(clean32, folder)
    host_json = next((folder / "hosts").iterdir()) / "host.json"
    record = json.loads(host_json.read_text())
    record.update(status="unreachable", reason="ssh: [bold]\x1b]0;owned\x07 [/x]")
    host_json.write_text(json.dumps(record))
    result = run("analyze", str(folder))
    assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stderr
    assert "ssh: [bold]\\x1b]0;owned\\x07 [/x]" in result.stderr
    assert "1 host not captured" in _screen(result.stdout)[0]


def _suspect(host: str | None, component: str, severity: Severity = Severity.CRITICAL) -> Suspect:
    return Suspect(id="s1", host=host, unit="nic-port" if host else "shared", components=[component],
                   verdict="bad-link", verdict_text="bad link (cable, optic or switch port)", severity=severity,
                   confidence=0.99, q_value=1e-9, owner="provider",
                   action=f"Inspect or replace the cable or optic of {component} [/x] and check its switch port.",
                   evidence=["symbol_error 40 in 5 s"], identity={}, findings=["f1"],
                   key_number="symbol_error +40 (8/s); fleet median 0/s, p99 0/s over 1,024 ports")


@pytest.mark.parametrize("width", [80, 160])
def test_print_diagnosis_on_a_console_of_a_given_width_escapes_everything(width):
    suspects = [_suspect("[/x]", "rdma:mlx5_\x1b[31m0/1"), _suspect(None, "switch:[bold]leaf", Severity.MAJOR)]
    finding = Finding(kind="rdma-symbol-errors", severity=Severity.CRITICAL, host="[/x]",
                      component="rdma:mlx5_\x1b[31m0/1", summary="[/x] symbol errors \x1b[2J",
                      evidence=[Evidence(metric="symbol_error", value=40, unit="errors")])
    background = [Background("rdma.out_of_sequence", "rdma", 61, 128, 0.058),
                  Background("rx.errors", "rdma", 3, 1024, 0.2), Background("[/x]\x1b", "rdma", 1, 1024, 0.1)]
    diagnosis = Diagnosis(suspects, background, [HostOutcome("[/x]", "ok", suspects=1), HostOutcome("b", "ok")])
    buf = io.StringIO()
    console = Console(file=buf, width=width, highlight=False, soft_wrap=False)
    print_diagnosis(diagnosis, [finding], console=console, show_findings=True)
    text = buf.getvalue()
    assert "\x1b" not in text and "[/x]" in text and "\\x1b[31m" in text.replace("\n", "").replace(" ", "")
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines[0] == "2 suspects on 1 of 2 hosts; 1 host healthy"
    assert [line.split()[0] for line in lines if _SUSPECT_LINE.match(line)][:2] == ["critical", "major"]
    assert all(len(line) <= width for line in lines)
    [bg] = [line for line in lines if line.startswith("Background: ")]
    assert bg.startswith("Background: out_of_sequence rose on 61 of 128 ports") and bg.endswith("more")


def test_background_line_is_one_line_with_the_count_of_the_rest():
    many = [Background(f"rdma.counter_{i}", "rdma", 100 - i, 128, 0.5) for i in range(6)]
    diagnosis = Diagnosis([], many, [])
    short = background_line(diagnosis, 80)
    assert len(short) <= 80 and short.endswith("; +5 more")
    wide = background_line(diagnosis, 240)
    assert len(wide) <= 240 and wide.count("rose on") >= 2 and wide.endswith("more")
    assert background_line(Diagnosis([], [], []), 80) == "Background: nothing rose at fleet-normal rates."


def test_draft_prints_the_redacted_ticket_fitted_to_the_desk(run, fleet16):
    from fabricase.bundler.limits import desk_limits

    folder, _ = fleet16
    symptom = "busbw fell; password=hunter22 " + "and the job stalled " * 600
    text = run("draft", str(folder), "--provider", "aws", "--symptom", symptom).stdout
    assert "hunter22" not in text and "[REDACTED:password]" in text
    title, _, body = text.rstrip("\n").partition("\n\n")
    assert len(body) <= desk_limits("aws").body_max_chars
    out = run.json("draft", str(folder), "--provider", "aws", "--symptom", symptom)
    assert out["body"] == body and out["title"] == title and "hunter22" not in out["body"]
