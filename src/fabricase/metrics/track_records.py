"""Providers' track records (tracker/stats.py) as metric series: the numbers `fabricase providers stats` prints,
exported with the tracker's open escalations by `fabricase export` and `watch`. A number with no sample (no
reply yet, nothing resolved) has no series: it is never exported as 0."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fabricase.metrics.exposition import Series, escalation_series

if TYPE_CHECKING:
    from fabricase.tracker.stats import TrackRecord
    from fabricase.tracker.store import Tracker

__all__ = ["QUANTILES", "WINDOW", "track_record_series", "tracker_series"]

QUANTILES = (("0.5", "median_s"), ("0.9", "p90_s"))
# The track records exported are those of `providers stats --since 90d`: recent behaviour, and a repeat offender
# of two years ago is no series forever.
WINDOW = timedelta(days=90)


def track_record_series(record: TrackRecord) -> Series:
    """One series set per (provider, desk): cases, first-reply and resolve quantiles, open cases by age, the
    reopen ratio; one per repeat offender: how many escalations its run has."""
    out = Series()
    for g in record.desks:
        labels = {"provider": g.provider, "desk": g.desk or g.provider}
        out.set("fabricase_provider_cases", g.cases, **labels)
        for name, times in (("fabricase_provider_first_reply_seconds", g.first_reply),
                            ("fabricase_provider_resolve_seconds", g.resolve)):  # fmt: skip
            for q, attr in QUANTILES:
                value = getattr(times, attr)
                if value is not None:
                    out.set(name, value, quantile=q, **labels)
        if g.cases:
            for age, count in g.open_by_age.items():
                out.set("fabricase_provider_open_cases", count, age=age, **labels)
        if g.reopen_ratio is not None:
            out.set("fabricase_provider_reopen_ratio", g.reopen_ratio, **labels)
    for r in record.repeat_offenders:
        host, component = r.host_component
        out.set("fabricase_repeat_offender", len(r.escalations), provider=r.provider, host=host, component=component)
    return out


def tracker_series(tracker: Tracker, now: datetime, *, desks: Mapping[str, str] | None = None) -> Series:
    """Everything `export` says of the tracker: its open escalations (escalation_series) and every provider's
    track record over the escalations created in the last WINDOW. desks: provider -> the desk configured now
    (the static provider's), for filings that did not name theirs."""
    from fabricase.tracker.stats import load_cases, track_record

    series = escalation_series(tracker.overview(state="open"), now)
    record = track_record(load_cases(tracker, desks=desks), now=now, since=WINDOW)
    return series.update(track_record_series(record))
