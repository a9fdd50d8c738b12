from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

from fabricase.tracker import Tracker

WRITERS = 4
EACH = 10


def _create_many(tracker: Tracker, start: threading.Barrier, writer: int) -> list[str]:
    start.wait()
    return [
        tracker.create(
            provider="static", title=f"w{writer}-{i}", symptom="s", severity="minor",
            hosts=[f"gpu{writer:03d}"], components=[(f"gpu{writer:03d}", f"netdev:eth{i}")],
        ).id
        for i in range(EACH)
    ]  # fmt: skip


def _expected() -> set[str]:
    return {f"FC-{n}" for n in range(1, WRITERS * EACH + 1)}


def test_writers_with_their_own_tracker_get_distinct_ids(db_url):
    Tracker(db_url).close()
    start = threading.Barrier(WRITERS)

    def writer(n: int) -> list[str]:
        with Tracker(db_url) as own:
            return _create_many(own, start, n)

    with ThreadPoolExecutor(WRITERS) as pool:
        ids = [i for batch in pool.map(writer, range(WRITERS)) for i in batch]
    assert len(ids) == len(set(ids)) and set(ids) == _expected()
    with Tracker(db_url) as t:
        escalations = t.list(state="all")
    assert len(escalations) == WRITERS * EACH
    # Each escalation kept its own hosts and components: no row went to a neighbour's id.
    assert all(e.hosts == [e.components[0].split("/")[0]] for e in escalations)


def test_threads_sharing_one_tracker_get_distinct_ids(tracker):
    start = threading.Barrier(WRITERS)
    with ThreadPoolExecutor(WRITERS) as pool:
        ids = [i for batch in pool.map(lambda n: _create_many(tracker, start, n), range(WRITERS)) for i in batch]
    assert set(ids) == _expected() and len(ids) == WRITERS * EACH


def test_opening_a_new_database_at_once_migrates_it_once(db_url, db_path):
    start = threading.Barrier(WRITERS)

    def opener(_n: int) -> None:
        start.wait()
        Tracker(db_url).close()

    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(opener, range(WRITERS)))
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(1,), (2,), (3,), (4,)]
