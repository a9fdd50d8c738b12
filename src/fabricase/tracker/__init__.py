"""Escalations and their history, in SQLite (default) or PostgreSQL."""

from fabricase.tracker.records import component_label, format_escalation_id, parse_escalation_id
from fabricase.tracker.store import STATE_FILTERS, Tracker

__all__ = ["STATE_FILTERS", "Tracker", "component_label", "format_escalation_id", "parse_escalation_id"]
