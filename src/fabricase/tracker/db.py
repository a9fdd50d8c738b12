"""Engines and transactions for the tracker: SQLite set up for several writers, any error made one line."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc

from fabricase.errors import TrackerError

__all__ = ["BUSY_TIMEOUT_MS", "connect", "describe", "guard", "in_values", "parse_url", "reason", "sqlite_file",
           "transaction"]

BUSY_TIMEOUT_MS = 15_000


def reason(exc: BaseException) -> str:
    """One line from a driver error: the DBAPI message without SQLAlchemy's statement dump."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return lines[0] if lines else type(orig).__name__


def parse_url(url: str) -> sa.URL:
    try:
        parsed = sa.make_url(url)
    except sa_exc.ArgumentError as exc:
        raise TrackerError(f"not a database URL: {reason(exc)}", where=url) from exc
    if parsed.drivername == "postgresql":  # the 'postgres' extra installs psycopg 3, not psycopg2
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def sqlite_file(url: sa.URL) -> Path | None:
    """The database file of a SQLite URL; None for an in-memory or a server database."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)


def describe(url: sa.URL) -> str:
    """What error messages name: the SQLite file, or the server URL without its password."""
    if url.get_backend_name() == "sqlite":
        return url.database or ":memory:"
    return url.render_as_string(hide_password=True)


@contextmanager
def guard(action: str, where: str) -> Iterator[None]:
    """Turn any SQLAlchemy/driver error inside into a one-line TrackerError naming `where`."""
    try:
        yield
    except sa_exc.SQLAlchemyError as exc:
        raise TrackerError(f"{action}: {reason(exc)}", where=where) from exc


@contextmanager
def transaction(engine: sa.Engine, *, write: bool = False) -> Iterator[sa.Connection]:
    """One transaction; on SQLite a writer holds the write lock from its first statement."""
    with engine.connect() as conn:
        conn.execution_options(fabricase_write=write)
        with conn.begin():
            yield conn


def _enable_wal(cursor: sqlite3.Cursor) -> None:
    """Switch the file to WAL (it stays so). The switch can fail at once with "database is locked" while
    another connection opens the same new file, without waiting on busy_timeout: retry it until then."""
    if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _configure_sqlite(engine: sa.Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # pysqlite's own BEGIN skips DDL (migrations would not be atomic): we emit BEGIN ourselves.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _enable_wal(cursor)
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        # A deferred read-then-write fails at once under WAL when another writer got in between, and
        # busy_timeout cannot help it: writers take the lock up front and wait their turn instead.
        write = conn.get_execution_options().get("fabricase_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def connect(url: sa.URL) -> sa.Engine:
    """An engine for `url` (nothing opened yet); a missing driver is a TrackerError with the install hint."""
    where = describe(url)
    try:
        engine = sa.create_engine(url)
    except ImportError as exc:
        raise TrackerError(
            f"no database driver for {url.drivername} ({exc.name}): pip install 'fabricase[postgres]'",
            where=where,
        ) from exc
    except sa_exc.SQLAlchemyError as exc:
        raise TrackerError(f"cannot open the escalation database: {reason(exc)}", where=where) from exc
    if url.get_backend_name() == "sqlite":
        _configure_sqlite(engine)
    return engine


def in_values(column: sa.ColumnElement, values: list[str], dialect: str) -> sa.ColumnElement[bool]:
    """`column IN (values)` with ONE bind parameter, whatever the number of values: `col IN (SELECT value FROM
    json_each(:json))` on SQLite, `col = ANY(:array)` on PostgreSQL. A plain IN list binds one parameter a value,
    and SQLite refuses more than 32,766 of them, PostgreSQL's protocol more than 65,535: a fleet of 100,000 hosts
    could then never be checked for an open escalation."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import ARRAY

        return column == sa.any_(sa.bindparam(None, list(values), type_=ARRAY(sa.String)))
    each = sa.func.json_each(sa.bindparam(None, json.dumps(list(values)), type_=sa.String)).table_valued("value")
    return column.in_(sa.select(each.c.value))
