from __future__ import annotations

import os
import sqlite3

import pytest
import sqlalchemy as sa

from fabricase.config import Paths
from fabricase.errors import TrackerError
from fabricase.tracker import Tracker, db, schema


def _versions(path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()


def _tables(path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _create(tracker: Tracker, title: str = "lossy link"):
    return tracker.create(provider="static", title=title, symptom="s", severity="minor", hosts=[], components=[])


ALL = [(1, "v1_initial"), (2, "v2_pseudonym_keys"), (3, "v3_sync_columns"), (4, "v4_tracker_identity")]


def test_migrations_run_once_and_are_recorded(db_url, db_path):
    Tracker(db_url).close()
    assert _versions(db_path) == ALL
    assert {"escalations", "escalation_hosts", "escalation_components", "events", "pseudonym_keys"} <= _tables(db_path)
    Tracker(db_url).close()
    Tracker(db_url).close()
    assert _versions(db_path) == ALL


def test_a_version_1_database_keeps_its_escalations_and_gains_pseudonym_keys(db_url, db_path, monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
    Tracker(db_url).close()
    monkeypatch.undo()
    with sqlite3.connect(db_path) as conn:  # a row as version 1 code wrote it
        conn.execute("INSERT INTO escalations (id, seq, provider, state, title, symptom, severity, created_at, "
                     "updated_at) VALUES ('FC-1', 1, 'static', 'draft', 'before the upgrade', 's', 'minor', "
                     "'2024-05-01T12:00:00Z', '2024-05-01T12:00:00Z')")
    with Tracker(db_url) as t:
        assert [e.title for e in t.list()] == ["before the upgrade"]
        key = t.pseudonym_key("FC-1")
        assert len(key) == 32 and t.pseudonym_key("FC-1") == key and t.pseudonym_key("FC-2") != key
    with Tracker(db_url) as again:
        assert again.pseudonym_key("FC-1") == key  # kept: pseudonyms stay the same across attachments
    assert _versions(db_path) == ALL


def test_reopening_keeps_data(db_url):
    with Tracker(db_url) as first:
        _create(first, "first")
    with Tracker(db_url) as again:
        assert [e.title for e in again.list()] == ["first"]
        assert _create(again, "second").id == "FC-2"


def test_sqlite_is_set_up_for_concurrent_writers(db_url, db_path):
    Tracker(db_url).close()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    engine = db.connect(db.parse_url(db_url))
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == db.BUSY_TIMEOUT_MS
    finally:
        engine.dispose()


def test_foreign_keys_are_enforced(db_url):
    Tracker(db_url).close()
    engine = db.connect(db.parse_url(db_url))
    try:
        with pytest.raises(sa.exc.IntegrityError), db.transaction(engine, write=True) as conn:
            conn.execute(schema.events.insert().values(escalation_id="FC-404", at="x", kind="k", detail="d"))
    finally:
        engine.dispose()


def test_a_pending_migration_runs_on_an_existing_database(db_url, db_path, monkeypatch):
    with Tracker(db_url) as t:
        _create(t)

    def _v4_add_note(conn: sa.Connection) -> None:
        conn.exec_driver_sql("ALTER TABLE escalations ADD COLUMN note TEXT")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _v4_add_note])
    with Tracker(db_url) as t:
        assert [e.id for e in t.list()] == ["FC-1"]
    assert _versions(db_path) == [*ALL, (5, "v4_add_note")]


def test_a_failed_migration_leaves_nothing_behind(db_url, db_path, monkeypatch):
    def _v2_broken(conn: sa.Connection) -> None:
        conn.exec_driver_sql("CREATE TABLE half_done (x INTEGER)")
        conn.exec_driver_sql("THIS IS NOT SQL")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _v2_broken])
    with pytest.raises(TrackerError) as info:
        Tracker(db_url)
    assert info.value.where == str(db_path)
    assert _tables(db_path) == set()  # DDL ran in the transaction too: version 1 was rolled back with it

    monkeypatch.undo()
    Tracker(db_url).close()
    assert _versions(db_path) == ALL


def test_a_newer_database_is_refused(db_url, db_path):
    Tracker(db_url).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (99, 'from_the_future', '2030-01-01T00:00:00Z')")
    with pytest.raises(TrackerError, match="newer than this fabricase") as info:
        Tracker(db_url)
    assert info.value.where == str(db_path)


def _unwritable_db_path(tmp_path):
    """A database path that cannot be created, as root too (root ignores directory permissions)."""
    if os.geteuid() == 0:
        (tmp_path / "afile").write_text("not a directory")
        return tmp_path / "afile" / "tracker.db"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return locked / "tracker.db"


def test_an_unwritable_directory_is_a_one_line_tracker_error(tmp_path):
    path = _unwritable_db_path(tmp_path)
    try:
        with pytest.raises(TrackerError) as info:
            Tracker(f"sqlite:///{path}")
    finally:
        (tmp_path / "locked").exists() and (tmp_path / "locked").chmod(0o700)
    assert info.value.where == str(path)
    assert "\n" not in str(info.value)
    assert "unable to open database file" in str(info.value)
    assert isinstance(info.value.__cause__, sa.exc.SQLAlchemyError)


def test_a_file_that_is_not_a_database(db_path, db_url):
    db_path.write_bytes(b"this is a capture, not a database\n" * 200)
    with pytest.raises(TrackerError, match="not a database") as info:
        Tracker(db_url)
    assert info.value.where == str(db_path) and "\n" not in str(info.value)


def test_open_creates_the_data_directory(tmp_path, monkeypatch, clock):
    monkeypatch.delenv("FABRICASE_DB", raising=False)
    paths = Paths(data=tmp_path / "data" / "nested", config=tmp_path / "config")
    with Tracker.open(paths, now=clock) as t:
        assert _create(t).created_at == "2024-05-01T12:00:00Z"
    assert paths.database.is_file()


def test_open_uses_fabricase_db(tmp_path, monkeypatch):
    other = tmp_path / "shared" / "team.db"
    monkeypatch.setenv("FABRICASE_DB", f"sqlite:///{other}")
    with Tracker.open(Paths(data=tmp_path / "data", config=tmp_path / "config")) as t:
        assert t.where == str(other)
    assert other.is_file()


def test_open_with_an_uncreatable_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("FABRICASE_DB", raising=False)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(TrackerError) as info:
        Tracker.open(Paths(data=tmp_path / "afile" / "data", config=tmp_path))
    assert info.value.where == str(tmp_path / "afile" / "data")
    assert "\n" not in str(info.value)


def test_a_malformed_url():
    with pytest.raises(TrackerError, match="not a database URL"):
        Tracker("not a url at all")


def test_a_server_url_never_shows_its_password():
    # Whether psycopg is installed (then: refused on port 1) or not (then: the install hint), one line
    # and no password.
    with pytest.raises(TrackerError) as info:
        Tracker("postgresql://fabric:s3cret@127.0.0.1:1/fabricase")
    message = str(info.value)
    assert "s3cret" not in message and "\n" not in message
    assert info.value.where.startswith("postgresql+psycopg://fabric:")
