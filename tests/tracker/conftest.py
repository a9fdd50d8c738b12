from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from fabricase.tracker import Tracker, db, schema

# A PostgreSQL database the tests may empty, e.g. postgresql://fabric@127.0.0.1:5432/fabricase_test.
POSTGRES_ENV = "FABRICASE_TEST_POSTGRES"


class Clock:
    """A clock that moves one minute each time it is read, from 2024-05-01 12:00 UTC."""

    def __init__(self) -> None:
        self.moment = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        current = self.moment
        self.moment += timedelta(minutes=1)
        return current


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tracker.db"


@pytest.fixture
def db_url(db_path: Path) -> str:
    return f"sqlite:///{db_path}"


def _postgres_url() -> str:
    """The test server's URL, emptied of fabricase's tables; skips (fails under CI=true) without one."""
    url = os.environ.get(POSTGRES_ENV)
    missing = None if url else f"{POSTGRES_ENV} is not set"
    if url and importlib.util.find_spec("psycopg") is None:
        missing = "psycopg is not installed (pip install 'fabricase[postgres]')"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL tracker tests need a server under CI: {missing}")
        pytest.skip(f"PostgreSQL tracker tests: {missing}")
    engine = db.connect(db.parse_url(url))
    try:
        with engine.begin() as conn:
            schema.metadata.drop_all(conn)
            conn.execute(sa.text("DROP TABLE IF EXISTS half_done"))
    finally:
        engine.dispose()
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db_url(request: pytest.FixtureRequest, db_url: str) -> str:
    """The same tests on both backends the tracker supports."""
    return db_url if request.param == "sqlite" else _postgres_url()


@pytest.fixture
def tracker(any_db_url: str, clock: Clock) -> Iterator[Tracker]:
    with Tracker(any_db_url, now=clock) as t:
        yield t
