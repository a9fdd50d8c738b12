"""Time of the providers' track records on a tracker of N escalations (SQLite).

    python benchmarks/bench_track_records.py [--escalations 1000]

Fills a fresh tracker through its API as a year of work would: each escalation created, filed, synced with a
provider reply and (most) resolved, some reopened, on a fleet of 256 hosts so that ports repeat. Then times, each
as the median of 3: `load_cases` (every escalation with its history, one query per table), `track_record`
(`fabricase providers stats`), and `repeat_history` (what `open` asks on every filing, for one host's port).
The reference is `Tracker.list(state="all")` without histories, measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fabricase.providers.base import CaseComment
from fabricase.tracker.stats import load_cases, repeat_history, track_record
from fabricase.tracker.store import Tracker


class Clock:
    def __init__(self, start: datetime) -> None:
        self.at = start

    def __call__(self) -> datetime:
        return self.at


def fill(url: str, n: int, rng: random.Random) -> Clock:
    clock = Clock(datetime(2026, 1, 1, tzinfo=UTC))
    with Tracker(url, now=clock) as tracker:
        for k in range(n):
            host = f"gpu{rng.randrange(256):03d}"
            port = f"rdma:mlx5_{rng.randrange(8)}/1"
            esc = tracker.create(provider=rng.choice(["aws", "gcp", "azure", "static"]), title=f"t{k}", symptom="s",
                                 severity="major", hosts=[host], components=[(host, port)])
            tracker.mark_filed(esc.id, provider_case_id=f"case-{k}", raw_status="opened", state="filed",
                               ticket_path=None, bundle_id=None, bundle_path=None)
            clock.at += timedelta(hours=rng.uniform(1, 48))
            reply = CaseComment(clock.at.isoformat(), "support", f"looking at {host}", True)
            tracker.record_sync(esc.id, raw_status="pending", state="waiting-us", comments=[reply])
            if rng.random() < 0.8:
                clock.at += timedelta(hours=rng.uniform(1, 96))
                tracker.resolve(esc.id, "fixed")
                if rng.random() < 0.1:
                    tracker.set_state(esc.id, "waiting-provider", "back again")
            clock.at += timedelta(minutes=rng.uniform(10, 600))
    return clock


def timed(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--escalations", type=int, default=1000)
    args = parser.parse_args()
    rng = random.Random(15)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'tracker.db'}"
        t0 = time.perf_counter()
        clock = fill(url, args.escalations, rng)
        print(f"filled {args.escalations} escalations in {time.perf_counter() - t0:.1f} s")
        with Tracker(url, now=clock) as tracker:
            ref = timed(lambda: tracker.list(state="all"))
            cases = load_cases(tracker)
            rows = [
                ("list(state=all), no history (reference)", ref),
                ("load_cases (every history)", timed(lambda: load_cases(tracker))),
                ("track_record (providers stats)", timed(lambda: track_record(cases, now=clock.at))),
                ("repeat_history (one port, as open asks)", timed(lambda: repeat_history(
                    tracker, provider="aws", hosts=["gpu007"], components=[("gpu007", "rdma:mlx5_3/1")],
                    now=clock.at))),
            ]
    for name, seconds in rows:
        print(f"{name:<44} {seconds * 1000:9.1f} ms  x{seconds / ref:6.1f}")


if __name__ == "__main__":
    main()
