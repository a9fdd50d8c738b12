"""Escalations and their history, in SQLite (default) or PostgreSQL."""

from fabricase.tracker.records import (
    DEFAULT_STALE_AFTER,
    Tracked,
    component_label,
    format_escalation_id,
    parse_age,
    parse_escalation_id,
)
from fabricase.tracker.store import STATE_FILTERS, Coverage, SyncChange, Tracker

__all__ = [
    "DEFAULT_STALE_AFTER", "STATE_FILTERS", "Coverage", "SyncChange", "Tracked", "Tracker", "component_label",
    "format_escalation_id", "parse_age", "parse_escalation_id",
]  # fmt: skip
