"""Crash injection at every step of `fabricase open`, against the outbox and the local Jira and Zendesk
stand-ins, then `fabricase retry` (or `open` again when the crash came before the escalation existed): 0
duplicate cases, 0 desk cases the tracker does not know, 0 escalations left without a case.

A crash is a BaseException raised at the k-th step: before or after each tracker write, each HTTP request to
the desk (after: the desk made the case, the answer is lost), each file the outbox writes, and the bundle's
final rename. Like a kill, it passes every `except Exception`; the database rolls the open transaction back.
Before filing could be resumed, a crash left the escalation a draft that blocked `open` and that `attach`
refused; the suggested `--force` then filed a duplicate."""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest
from click.testing import CliRunner
from desks.fakes import FakeJira, FakeZendesk

from fabricase import flow
from fabricase.cli import cli
from fabricase.providers.desks import outbox
from fabricase.tracker.store import Tracker

from .test_open_with_desks import _configure, write_fleet


class Crash(BaseException):
    """A crash at one step: not an Exception, so nothing in fabricase handles it."""


class Steps:
    """Counts the steps of a run and crashes at the `at`-th (0: never)."""

    def __init__(self, at: int = 0) -> None:
        self.at, self.seen = at, []

    def step(self, name: str) -> None:
        self.seen.append(name)
        if len(self.seen) == self.at:
            raise Crash(name)


def _wrap(monkeypatch, steps: Steps, owner, name: str) -> None:
    original = getattr(owner, name)

    def wrapped(*args, **kwargs):
        steps.step(f"before {owner.__name__}.{name}")
        result = original(*args, **kwargs)
        steps.step(f"after {owner.__name__}.{name}")
        return result

    monkeypatch.setattr(owner, name, wrapped)


def _instrument(monkeypatch, steps: Steps) -> None:
    for name in ("create", "claim", "add_event", "mark_filed"):
        _wrap(monkeypatch, steps, Tracker, name)
    _wrap(monkeypatch, steps, httpx.Client, "send")
    _wrap(monkeypatch, steps, outbox, "write_atomic")
    _wrap(monkeypatch, steps, outbox, "copy_atomic")
    _wrap(monkeypatch, steps, flow, "_named")


def _cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _open(fleet):
    return _cli("open", "--replay", str(fleet), "--symptom", "allreduce busbw fell 40%", "--provider", "static",
                "--json")


def _desk_cases(desk, home) -> set[str]:
    if desk is None:
        return {p.name for p in (home / "outbox").iterdir()} if (home / "outbox").is_dir() else set()
    if isinstance(desk, FakeJira):
        return set(desk.requests)
    return {str(t) for t in desk.tickets}


def _escalations(home) -> list[tuple[str, str | None]]:
    db = home / "tracker.db"
    if not db.is_file():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, provider_case_id FROM escalations ORDER BY seq").fetchall()


@pytest.fixture(params=["outbox", "jira", "zendesk"])
def desk(request, home):
    if request.param == "outbox":
        yield None
        return
    fake = {"jira": FakeJira, "zendesk": FakeZendesk}[request.param]()
    fake.name, fake.base_url = request.param, fake.start()
    _configure(home, fake)
    yield fake
    fake.stop()


def test_a_crash_at_any_step_of_open_then_retry_files_exactly_one_case(home, desk, tmp_path, monkeypatch):
    fleet = write_fleet(tmp_path / "fleet")
    counted = Steps()
    with monkeypatch.context() as m:
        _instrument(m, counted)
        assert _open(fleet).exit_code == 0
    total = len(counted.seen)
    assert total >= 12, counted.seen
    tally = {"duplicates": 0, "unknown desk cases": 0, "without a case": 0}
    for at in range(1, total + 1):
        run_home = tmp_path / f"home-{at}"
        run_home.mkdir()
        for name in ("inventory.json", "config.toml"):  # the inventory and the desk's config
            if (home / name).is_file():
                (run_home / name).write_bytes((home / name).read_bytes())
        monkeypatch.setenv("FABRICASE_HOME", str(run_home))
        before = _desk_cases(desk, run_home)
        steps = Steps(at)
        with monkeypatch.context() as m:
            _instrument(m, steps)
            try:
                _open(fleet)
            except Crash:
                pass
            else:
                pytest.fail(f"no step {at}: this run took {steps.seen}, the first {counted.seen}")
        made = _escalations(run_home)
        again = _cli("retry", made[0][0], "--json") if made else _open(fleet)
        assert again.exit_code == 0, (steps.seen[-1], again.output)
        after = _escalations(run_home)
        cases = _desk_cases(desk, run_home) - before
        filed = {str(case) for _, case in after if case}
        recorded = {c.removeprefix("outbox-") for c in filed} if desk is None else filed
        tally["duplicates"] += max(0, len(cases) - 1) + max(0, len(after) - 1)
        tally["unknown desk cases"] += len(cases - recorded)
        tally["without a case"] += sum(1 for _, case in after if not case)
        assert len(after) == 1 and len(cases) == 1 and cases == recorded, (steps.seen[-1], after, cases)
        # and the next `open` of the same hosts says what applies: attach to the filed case
        dup = _open(fleet)
        assert dup.exit_code == 1 and f"fabricase attach {after[0][0]}" in dup.stderr
        if desk is not None:
            before |= cases
    assert tally == {"duplicates": 0, "unknown desk cases": 0, "without a case": 0}
    print(json.dumps({"steps": total, **tally}))


def test_after_a_desk_error_open_on_the_same_hosts_resumes_and_attach_names_retry(home, tmp_path):
    """A desk that refused the filing (HTTP 422) left a draft: before, it blocked `open` for those hosts ("already
    covered by FC-1 ... attach") and `attach` refused it ("never filed"). Now attach names `retry`, and `open` on
    the same hosts finishes that escalation instead of refusing or making a second one."""
    fake = FakeZendesk()
    fake.name, fake.base_url = "zendesk", fake.start()
    try:
        _configure(home, fake)
        fleet = write_fleet(tmp_path / "fleet")
        fake.fail("POST", r"/api/v2/tickets\.json$|/api/v2/tickets$", 422)
        failed = _open(fleet)
        assert failed.exit_code == 1 and not fake.tickets
        [(esc_id, case)] = _escalations(home)
        assert case is None
        evidence = tmp_path / "more.txt"
        evidence.write_text("counters\n")
        refused = _cli("attach", esc_id, str(evidence))
        assert refused.exit_code == 1 and f"fabricase retry {esc_id}" in refused.stderr
        again = _open(fleet)
        assert again.exit_code == 0, again.output
        opened = json.loads(again.stdout)
        assert opened["escalation_id"] == esc_id and opened["resumed"] is True
        assert len(fake.tickets) == 1 and _escalations(home) == [(esc_id, opened["provider_case_id"])]
    finally:
        fake.stop()
