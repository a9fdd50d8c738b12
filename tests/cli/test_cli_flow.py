"""The whole flow through the command line, on this machine and on a host tree."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import click
import pytest

from fabricase.cli import cli


def test_open_on_localhost_files_tracks_and_verifies(run, home):
    out = run.json("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0")
    assert out["escalation_id"] == "FC-1" and out["state"] == "filed"
    assert len(out["bundle_id"]) == 64 and Path(out["bundle_path"]).is_file()
    ticket = Path(out["ticket_path"])
    assert ticket.is_file() and ticket.is_relative_to(home / "outbox")
    assert out["bundle_id"] in ticket.read_text()
    assert isinstance(out["findings"], list)
    assert out["hosts"][0]["status"] == "ok"
    verified = run.json("verify", out["bundle_path"])
    assert verified["ok"] and verified["bundle_id"] == out["bundle_id"]
    listed = run.json("list")
    assert [e["id"] for e in listed] == ["FC-1"] and listed[0]["bundle_id"] == out["bundle_id"]
    shown = run.json("show", "fc-1")
    assert [ev["kind"] for ev in shown["events"]][:1] == ["created"] and shown["ticket_path"] == str(ticket)


def _flip_member_byte(bundle: Path, member: str, out: Path) -> None:
    raw = bytearray(gzip.decompress(bundle.read_bytes()))
    with tarfile.open(fileobj=io.BytesIO(bytes(raw))) as tf:
        info = tf.getmember(member)
    assert info.size > 0
    raw[info.offset_data] ^= 0x01
    out.write_bytes(gzip.compress(bytes(raw), mtime=0))


def test_flipping_one_byte_of_any_member_fails_verify_and_names_it(run, tmp_path, host_tree):
    out = run.json("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0", "--root", str(host_tree))
    bundle = Path(out["bundle_path"])
    with tarfile.open(bundle) as tf:
        members = [m.name for m in tf.getmembers() if m.size > 0 and m.name != "MANIFEST.json"]
    picks = {"findings.json", "ticket.md", "summary.md", "report.html",
             next(m for m in members if m.endswith("stream.fc1")),
             next(m for m in members if m.endswith("index.fci"))}
    for member in sorted(picks):
        bad = tmp_path / "bad.tar.gz"
        _flip_member_byte(bundle, member, bad)
        result = run("verify", str(bad), code=1)
        assert member in result.stderr, (member, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout
        report = run.json("verify", str(bad), code=1)
        assert not report["ok"] and any(member in p for p in report["problems"])


def test_collect_analyze_and_replay_agree_with_the_live_run(run, tmp_path, host_tree):
    live = run.json("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0", "--root", str(host_tree))
    assert any(f["component"] == "netdev:eth1" and f["kind"] == "link-down" for f in live["findings"])
    # The live run's own capture, analyzed offline, and replayed through open.
    assert run.json("analyze", live["capture_dir"])["findings"] == live["findings"]
    # The same faulty host again: refused, naming the case that covers it, and nothing new is filed.
    refused = run("open", "--replay", live["capture_dir"], "--symptom", "x", code=1)
    assert "already covered by open escalation(s) FC-1 (host localhost)" in refused.stderr
    assert "fabricase attach FC-1" in refused.stderr and "Traceback" not in refused.stderr
    assert [e["id"] for e in run.json("list", "--state", "all")] == ["FC-1"]
    forced = run.json("open", "--replay", live["capture_dir"], "--symptom", "x", "--force")
    assert forced["findings"] == live["findings"] and forced["escalation_id"] == "FC-2"
    # A separate collect of the same host tree gives the same findings through analyze and open --replay.
    cap = tmp_path / "D"
    collected = run.json("collect", "--hosts", "localhost", "-o", str(cap), "--interval", "0", "--root", str(host_tree))
    assert collected["capture_dir"] == str(cap) and collected["hosts"][0]["status"] == "ok"
    offline = run.json("analyze", str(cap))["findings"]
    replayed = run.json("open", "--replay", str(cap), "--symptom", "x", "--force")["findings"]
    assert offline == replayed == live["findings"]
    # And the bundle file itself is a valid input.
    assert run.json("analyze", live["bundle_path"])["findings"] == live["findings"]


def test_bundle_is_reproducible_and_draft_renders(run, tmp_path, host_tree):
    cap = tmp_path / "D"
    run("collect", "--hosts", "localhost", "-o", str(cap), "--interval", "0", "--root", str(host_tree))
    a = run.json("bundle", str(cap), "-o", str(tmp_path / "a.tar.gz"))
    b = run.json("bundle", str(cap), "-o", str(tmp_path / "b.tar.gz"))
    assert a["bundle_id"] == b["bundle_id"]
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    with tarfile.open(tmp_path / "a.tar.gz") as tf:
        report = tf.extractfile("report.html").read().decode()
        summary = json.loads(tf.extractfile("summary.json").read())
        reproduce = tf.extractfile("reproduce.sh").read()
        script = tf.extractfile("capture-script.sh").read()
    assert any(f["component"] == "netdev:eth1" for f in summary["findings"])
    for text in (reproduce, script):  # both are valid POSIX sh
        assert subprocess.run(["sh", "-n"], input=text, capture_output=True).returncode == 0
    assert b"fabricase collect" in reproduce and b"localhost" in reproduce
    # The HTML report names the finding the analysis made, with no reference outside the file.
    assert "netdev:eth1" in report and "link-down" in report and "http://" not in report
    # The ticket is built from suspects: a down interface that is only a minor finding is no suspect, and the
    # draft says that nothing was localized (the raw findings travel in the bundle).
    draft = run.json("draft", str(cap), "--symptom", "busbw fell")
    assert draft["title"].startswith("[fabricase]") and "No suspect on the 1 captured host" in draft["body"]
    assert "No suspect on the 1 captured host" in run("draft", str(tmp_path / "a.tar.gz")).stdout


def test_dry_run_files_and_tracks_nothing(run, home):
    out = run.json("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0", "--dry-run")
    assert out["escalation_id"] is None and out["state"] == "dry-run"
    assert Path(out["ticket_path"]).is_file()
    # The requests filing would send, the bundle listed by name, size and hash, never its bytes.
    [request] = out["requests"]
    [attachment] = request["payload"]["attachments"]
    bundle = Path(out["bundle_path"])
    assert attachment == {"name": bundle.name, "size": bundle.stat().st_size,
                          "sha256": hashlib.sha256(bundle.read_bytes()).hexdigest()}
    assert run.json("list", "--state", "all") == []


def test_resolve_moves_an_escalation_out_of_the_open_list(run):
    run("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0")
    assert run.json("resolve", "FC-1", "--note", "cable replaced")["state"] == "resolved"
    assert run.json("list") == []
    assert [e["id"] for e in run.json("list", "--state", "all")] == ["FC-1"]


def test_human_output_fits_80_columns(run, host_tree):
    result = run("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0", "--root", str(host_tree))
    assert "Escalation  FC-1" in result.stdout
    for line in run("list").stdout.splitlines():
        assert len(line) <= 80, line


def _commands(group):
    """Every command of the group, each one's module imported (the group imports them as they are asked for)."""
    ctx = click.Context(group)
    return [(name, group.get_command(ctx, name)) for name in group.list_commands(ctx)]


@pytest.mark.parametrize("name,command", _commands(cli))
def test_every_command_has_help_and_json(run, name, command):
    assert command.help and len(command.help.split()) >= 3, name
    text = run(name, "--help").stdout
    assert "--json" in text, name
    for param in command.params:
        if getattr(param, "help", None) is None and param.param_type_name == "option" and not param.hidden:
            pytest.fail(f"{name} {param.opts} has no help text")


def test_python_dash_m_and_console_script():
    result = subprocess.run([sys.executable, "-m", "fabricase", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "open" in result.stdout


def test_attach_a_new_capture_bundles_it_and_uploads_it_to_the_case(run, tmp_path, host_tree):
    opened = run.json("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0", "--root", str(host_tree))
    again = tmp_path / "again"
    run("collect", "--hosts", "localhost", "-o", str(again), "--interval", "0", "--root", str(host_tree))
    out = run.json("attach", opened["escalation_id"], "--capture", str(again))
    assert out["sent"] is True
    case = Path(opened["ticket_path"]).parent
    [new] = [p for p in case.rglob("*.tar.gz") if p.name.startswith(f"{opened['escalation_id']}-2-")]
    assert run.json("verify", str(new))["ok"]
    shown = run.json("show", opened["escalation_id"])
    [event] = [e for e in shown["events"] if e["kind"] == "attach"]
    assert "New evidence, bundle" in json.dumps(event)
    _one_line = run("attach", opened["escalation_id"], code=2)
    assert "--capture" in _one_line.stderr


def test_join_rebuilds_a_split_bundle_and_refuses_a_missing_part(run, tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import fleetgen

    from fabricase.bundler.parts import MIN_PART_BYTES, split_bundle

    scenario = next(s for s in fleetgen.scenarios(16, 1, 0) if s.kind == "symbol-errors")
    fleetgen.build(scenario, tmp_path / "capture", seed=4)
    opened = run.json("bundle", str(tmp_path / "capture"), "-o", str(tmp_path / "b.tar.gz"))
    bundle = Path(opened["bundle_path"])
    parts = split_bundle(bundle, max(MIN_PART_BYTES, bundle.stat().st_size // 3 + 1), out_dir=tmp_path / "parts")
    assert len(parts) >= 2
    for part in parts:
        assert run.json("verify", str(part))["ok"]
    joined = run.json("join", *map(str, reversed(parts)), "-o", str(tmp_path / "joined.tar.gz"))
    assert (tmp_path / "joined.tar.gz").read_bytes() == bundle.read_bytes()
    assert joined["bundle_id"] == opened["bundle_id"] and joined["ok"]
    missing = run("join", str(parts[0]), "-o", str(tmp_path / "half.tar.gz"), code=1)
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "half.tar.gz").exists()
