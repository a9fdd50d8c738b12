"""The tracker's commands: the morning view, show, sync, comment, attach, resolve, reopen; --json and
--help on each; bad input in one line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fabricase import filing, providers
from fabricase.config import resolve_paths
from fabricase.tracker import Tracker
from tracker.deskprovider import Desk, DeskProvider, draft_for

COMMANDS = ["list", "show", "sync", "comment", "attach", "resolve", "reopen"]


class Clock:
    def __init__(self, start: datetime) -> None:
        self.moment = start

    def __call__(self) -> datetime:
        return self.moment


@pytest.fixture
def desk_registered(monkeypatch):
    monkeypatch.setitem(providers.PROVIDERS, "desk", "tracker.deskprovider:DeskProvider")


@pytest.fixture
def seeded(home, desk_registered):
    """Five days ago: an aws draft; four days ago: a desk case waiting on the provider (stale) and a desk case
    the desk answered yesterday (waiting on us); a resolved one."""
    paths = resolve_paths().ensure()
    now = datetime.now(UTC)
    clock = Clock(now - timedelta(days=5))
    provider = DeskProvider(paths)
    desk = Desk(paths.data / "desk")
    ids = {}
    with Tracker.open(paths, now=clock) as tracker:
        ids["draft"] = tracker.create(provider="aws", title="nvlink down", symptom="s", severity="critical",
                                      hosts=["gpu007"], components=[("gpu007", "nvlink:0/3")],
                                      instances={"gpu007": "i-0aws7"}).id
        clock.moment = now - timedelta(days=4)
        for name, host in (("stale", "gpu001"), ("on_us", "gpu002"), ("done", "gpu003")):
            esc = tracker.create(provider="desk", title=f"{host} symbol errors", symptom="s", severity="major",
                                 hosts=[host], components=[(None, "switch:leaf-3")] if name == "stale" else [])
            ids[name] = filing.file_escalation(tracker, provider, esc.id, draft_for(), None).id
        case = {k: tracker.get(v).provider_case_id for k, v in ids.items() if k != "draft"}
        filing.resolve(tracker, provider, ids["done"], "fixed")
    desk.set_status(case["stale"], "work-in-progress")
    desk.set_status(case["on_us"], "pending-customer-action")
    yesterday = (now - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    desk.add_comment(case["on_us"], "please send ibdiagnet output", at=yesterday)
    return {"ids": ids, "case": case, "desk": desk, "paths": paths}


def _one_line_error(result, code: int, *needles: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    last = result.stderr.strip().splitlines()[-1]
    for needle in needles:
        assert needle in last, (needle, last)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_json(run, command):
    text = run(command, "--help").stdout
    assert "--json" in text and len(text.splitlines()) > 3


def test_the_morning_view_groups_providers_and_says_who_is_waiting(run, seeded):
    ids = seeded["ids"]
    run("sync")
    out = run("list").stdout
    assert out.index("aws: 1 open, 1 waiting on us") < out.index("desk: 2 open, 1 waiting on us, 1 stale")
    lines = {line.split()[0]: line for line in out.splitlines() if line.lstrip().startswith("FC-")}
    assert "waiting-provider" in lines[ids["stale"]] and "provider" in lines[ids["stale"]]
    assert "STALE" in lines[ids["stale"]] and "4d" in lines[ids["stale"]] and "never" in lines[ids["stale"]]
    assert "waiting-us" in lines[ids["on_us"]] and " US " in lines[ids["on_us"]] and "1d" in lines[ids["on_us"]]
    assert "STALE" not in lines[ids["on_us"]]
    assert "draft" in lines[ids["draft"]] and "5d" in lines[ids["draft"]] and "never" in lines[ids["draft"]]
    assert ids["done"] not in lines


def test_list_json_and_filters(run, seeded):
    ids = seeded["ids"]
    run("sync")
    rows = run.json("list")
    assert [r["id"] for r in rows] == [ids["draft"], ids["stale"], ids["on_us"]]
    by_id = {r["id"]: r for r in rows}
    assert by_id[ids["stale"]]["stale"] is True and by_id[ids["stale"]]["waiting_on"] == "provider"
    assert by_id[ids["on_us"]]["waiting_on"] == "us" and by_id[ids["on_us"]]["last_reply_at"]
    assert by_id[ids["draft"]]["instances"] == {"gpu007": "i-0aws7"}
    assert [r["id"] for r in run.json("list", "--provider", "aws")] == [ids["draft"]]
    assert [r["id"] for r in run.json("list", "--host", "i-0aws7")] == [ids["draft"]]
    assert [r["id"] for r in run.json("list", "--host", "gpu003", "--state", "all")] == [ids["done"]]
    assert [r["id"] for r in run.json("list", "--older-than", "108h")] == [ids["draft"]]
    assert [r["id"] for r in run.json("list", "--stale")] == [ids["stale"]]
    assert [r["id"] for r in run.json("list", "--stale-after", "5d", "--stale")] == []
    assert run.json("list", "--state", "waiting-us")[0]["id"] == ids["on_us"]


def test_stale_after_from_the_configuration(run, seeded):
    run("sync")
    (seeded["paths"].config / "config.toml").write_text("[tracker]\nstale_after = 5\n")
    assert run.json("list", "--stale") == []
    (seeded["paths"].config / "config.toml").write_text('[tracker]\nstale_after = "2d"\n')
    assert [r["id"] for r in run.json("list", "--stale")] == [seeded["ids"]["stale"]]
    (seeded["paths"].config / "config.toml").write_text('[tracker]\nstale_after = "soon"\n')
    _one_line_error(run("list", code=None), 1, "config.toml", "stale_after", "not an age")


def test_sync_moves_the_state_and_show_has_the_comments(run, seeded):
    ids, desk, case = seeded["ids"], seeded["desk"], seeded["case"]
    results = {r["escalation_id"]: r for r in run.json("sync")}
    assert set(results) == {ids["stale"], ids["on_us"]}
    assert (results[ids["on_us"]]["state_from"], results[ids["on_us"]]["state_to"]) == ("filed", "waiting-us")
    assert results[ids["on_us"]]["new_comments"] == 1 and results[ids["stale"]]["state_to"] == "waiting-provider"

    run("comment", ids["on_us"], "ibdiagnet attached")
    desk.set_status(case["on_us"], "work-in-progress")
    out = run("sync").stdout
    assert "waiting-us -> waiting-provider" in out
    shown = run("show", ids["on_us"]).stdout
    assert "[desk engineer, provider] please send ibdiagnet output" in shown
    assert "[us, us] ibdiagnet attached" in shown
    assert "waiting on provider" in shown.replace("  ", " ").replace("  ", " ")
    detail = run.json("show", ids["on_us"])
    assert [e["kind"] for e in detail["events"]].count("comment") == 2
    assert detail["waiting_on"] == "provider" and detail["state"] == "waiting-provider"


def test_sync_reports_each_failure_and_exits_3(run, seeded):
    ids, desk, case = seeded["ids"], seeded["desk"], seeded["case"]
    (desk.root / case["stale"] / "case.json").unlink()
    desk.set_status(case["on_us"], "resolved")
    result = run("sync", code=3)
    assert f"warning: {ids['stale']}: " in result.stderr and "no such case" in result.stderr
    assert run.json("show", ids["on_us"])["state"] == "resolved"  # the others were still synced
    rows = run.json("sync", code=3)
    assert [r["outcome"] for r in rows] == ["error"]


def test_comment_attach_resolve_reopen(run, seeded, tmp_path: Path):
    ids, desk, case = seeded["ids"], seeded["desk"], seeded["case"]
    esc = ids["on_us"]
    said = run.json("comment", esc, "errors persist")
    assert said["sent"] is True and desk.comments(case["on_us"])[-1]["body"] == "errors persist"
    log = tmp_path / "ibdiagnet.log"
    log.write_text("leaf-3 port 17\n")
    assert "1 file(s) attached to case-" in run("attach", esc, str(log), "--note", "from the leaf").stdout
    assert len(desk.attachments(case["on_us"])) == 1
    assert run.json("resolve", esc, "--note", "optic replaced")["state"] == "resolved"
    assert desk.status(case["on_us"]) == "resolved"
    reopened = run.json("reopen", esc, "--note", "errors are back")
    assert reopened["state"] == "waiting-provider" and desk.status(case["on_us"]) == "reopened"
    local = run("comment", esc, "called the TAM", "--local")
    assert "not sent to the desk: recorded in the tracker only" in local.stderr
    assert desk.comments(case["on_us"])[-1]["body"] != "called the TAM"


def test_an_archive_attached_by_hand_is_refused_and_a_gzip_log_goes_redacted(run, seeded, tmp_path: Path):
    """Before, both went out as their compressed bytes: the gate could see no secret inside them."""
    import gzip
    import secrets
    import zipfile

    ids, desk, case = seeded["ids"], seeded["desk"], seeded["case"]
    esc, token = ids["on_us"], "ghp_" + secrets.token_hex(18)
    logs = tmp_path / "logs.zip"
    with zipfile.ZipFile(logs, "w") as z:
        z.writestr("syslog", f"push with {token}\n")
    before = len(run.json("show", esc)["events"])
    _one_line_error(run("attach", esc, str(logs), code=None), 1, "logs.zip", "not sent: a zip file")
    assert desk.attachments(case["on_us"]) == [] and len(run.json("show", esc)["events"]) == before

    report = tmp_path / "nvidia-bug-report.log.gz"
    report.write_bytes(gzip.compress(f"NVRM: Xid 79\ngit push with {token}\n".encode()))
    assert "1 file(s) attached" in run("attach", esc, str(report)).stdout
    [sent] = desk.attachments(case["on_us"])
    assert sent.endswith(report.name)
    inner = gzip.decompress((desk.root / case["on_us"] / "attachments" / sent).read_bytes())
    assert b"NVRM: Xid 79" in inner and token.encode() not in inner and b"[REDACTED:" in inner


def test_a_draft_is_commented_in_the_tracker_only(run, seeded, monkeypatch):
    monkeypatch.setitem(providers.PROVIDERS, "aws", "no.such.module:AwsProvider")  # never loaded
    result = run("comment", seeded["ids"]["draft"], "waiting for the maintenance window")
    assert "not sent to the desk: FC-1 was never filed with aws" in result.stderr


def test_resolve_local_needs_no_provider(run, seeded):
    # aws's SDK may be missing or unconfigured here: --local never loads the provider.
    result = run.json("resolve", seeded["ids"]["draft"], "--local")
    assert result["sent"] is False and result["state"] == "resolved"


def test_bad_input_is_one_line(run, seeded, tmp_path):
    ids = seeded["ids"]
    _one_line_error(run("show", "FC-99", code=None), 1, "FC-99", "no such escalation")
    _one_line_error(run("show", "bogus", code=None), 1, "not an escalation id")
    _one_line_error(run("list", "--older-than", "soon", code=None), 2, "not an age")
    _one_line_error(run("attach", ids["on_us"], str(tmp_path / "missing"), code=None), 2, "does not exist")
    _one_line_error(run("reopen", ids["on_us"], code=None), 1, "nothing to reopen")
    _one_line_error(run("comment", ids["on_us"], " ", code=None), 1, "empty comment")
    f = tmp_path / "x.txt"
    f.write_text("x")
    _one_line_error(run("attach", ids["draft"], str(f), code=None), 1, "never filed")
