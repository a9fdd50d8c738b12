"""Four `fabricase open` processes on the same hosts at once, on SQLite and PostgreSQL: one escalation and one case,
every round. The duplicate check and the insert are one transaction (a PostgreSQL advisory lock; SQLite's writer
lock), and an escalation being filed by a live process is not resumed by another. Before, in 18 of 20 rounds
several escalations were made for one host."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from fabricase.tracker import db
from tracker.conftest import _postgres_url

from .test_open_with_desks import HOSTS, write_fleet

PROCESSES = 4
ROUNDS = 3


def _rows(url: str) -> list[tuple[str, str | None]]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return conn.execute("SELECT id, provider_case_id FROM escalations").fetchall()
    engine = db.connect(db.parse_url(url))
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text("SELECT id, provider_case_id FROM escalations"))]
    finally:
        engine.dispose()


def _reset(url: str) -> None:
    if url.startswith("sqlite"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
        return
    engine = db.connect(db.parse_url(url))
    try:
        with engine.begin() as conn:
            from fabricase.tracker import schema

            schema.metadata.drop_all(conn)
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db_url(request, tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'tracker.db'}" if request.param == "sqlite" else _postgres_url()


def test_four_opens_at_once_make_one_escalation_and_one_case(any_db_url, tmp_path):
    fleet = write_fleet(tmp_path / "fleet")
    made = []
    for round_ in range(ROUNDS):
        home = tmp_path / f"home-{round_}"
        home.mkdir()
        hosts = {h: {"switch": f"leaf-{i // 8 + 1}"} for i, h in enumerate(HOSTS)}
        (home / "inventory.json").write_text(__import__("json").dumps({"hosts": hosts}))
        _reset(any_db_url)
        env = {**os.environ, "FABRICASE_HOME": str(home), "FABRICASE_DB": any_db_url}
        env.pop("FABRICASE_DEBUG", None)
        procs = [subprocess.Popen([sys.executable, "-m", "fabricase", "open", "--replay", str(fleet), "--provider",
                                   "static", "--symptom", "busbw fell"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
        results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        rows = _rows(any_db_url)
        cases = sorted(p.name for p in (home / "outbox").iterdir()) if (home / "outbox").is_dir() else []
        made.append((len(rows), len(cases)))
        assert sum(1 for code, _, _ in results if code == 0) >= 1, results
        for code, _, err in results:  # the others were told why, in one line
            assert code == 0 or ("already covered by open escalation(s) FC-1" in err and err.count("\n") == 1), err
    assert made == [(1, 1)] * ROUNDS
