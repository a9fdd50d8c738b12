"""Escalation ids, component labels, timestamps, and rows made back into models.Escalation."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from fabricase.errors import NotFoundError
from fabricase.models import Escalation, EscalationEvent, EscalationState, Severity
from fabricase.tracker import schema

__all__ = [
    "DEFAULT_STALE_AFTER", "ID_PREFIX", "Tracked", "assemble", "comment_identity", "component_label", "desk_time",
    "format_escalation_id", "is_stale", "iso", "parse_age", "parse_escalation_id", "parse_iso", "track",
    "waiting_on",
]  # fmt: skip

# A case waiting on the provider with no reply for this long is marked stale in `fabricase list`.
DEFAULT_STALE_AFTER = timedelta(days=3)
_AGE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Desks give up to nanoseconds (GCP) or milliseconds (AWS): datetime reads at most microseconds.
_FRACTION_RE = re.compile(r"(\.\d{1,6})\d*")

ID_PREFIX = "FC-"
_ID_RE = re.compile(rf"^(?:{ID_PREFIX})?(\d+)$", re.IGNORECASE)


def parse_escalation_id(text: str) -> int:
    """The sequence number in "FC-3", "fc-3" or "3"; anything else is a NotFoundError naming it."""
    match = _ID_RE.match(str(text).strip())
    if not match or int(match.group(1)) < 1:
        raise NotFoundError(f"not an escalation id (expected {ID_PREFIX}<number>)", where=str(text))
    return int(match.group(1))


def format_escalation_id(seq: int) -> str:
    return f"{ID_PREFIX}{seq}"


def component_label(host: str | None, component: str) -> str:
    """How Escalation.components names one: "gpu001/rdma:mlx5_3/1", or "switch:leaf-3" when shared."""
    return f"{host}/{component}" if host else component


def iso(moment: datetime) -> str:
    """ISO 8601 UTC to the second, e.g. 2024-05-01T12:00:00Z. A naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_age(text: str) -> timedelta:
    """"3d", "12h", "90m", "2w", "45s" as a duration; anything else is a ValueError saying what is expected."""
    match = _AGE_RE.match(str(text))
    if not match:
        raise ValueError(f"not an age: {text!r} (expected a number and a unit, e.g. 3d, 12h, 90m, 2w)")
    return timedelta(seconds=float(match.group(1)) * _AGE_UNITS[match.group(2).lower()])


def parse_iso(text: str) -> datetime | None:
    """A timestamp as a desk or the tracker wrote it (ISO 8601, any precision, Z or an offset); None if not one."""
    try:
        moment = datetime.fromisoformat(_FRACTION_RE.sub(r"\1", str(text).strip()).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def desk_time(text: str | None) -> str | None:
    """A desk's timestamp in the tracker's form (UTC, to the second), or None when it is not a timestamp."""
    moment = parse_iso(text) if text else None
    return iso(moment) if moment else None


def comment_identity(at: str, author: str, body: str) -> str:
    """What identifies one desk comment across syncs: the desk gives no stable id on every API, but the same
    comment comes back with the same time, author and text."""
    return hashlib.sha256(f"{at}\x00{author}\x00{body}".encode()).hexdigest()[:32]


def waiting_on(state: EscalationState) -> str | None:
    """Who must act next: "provider" (filed, or waiting on the desk), "us" (a draft not yet filed, or the desk
    asked us something), None once resolved or closed."""
    if state in (EscalationState.FILED, EscalationState.WAITING_PROVIDER):
        return "provider"
    if state in (EscalationState.DRAFT, EscalationState.WAITING_US):
        return "us"
    return None


def is_stale(state: EscalationState, since: str | None, now: datetime, after: timedelta) -> bool:
    """A case waiting on the provider whose last reply (or, without one, its filing) is `after` old or older."""
    moment = parse_iso(since) if since else None
    return waiting_on(state) == "provider" and moment is not None and now - moment >= after


@dataclass(frozen=True)
class Tracked:
    """One escalation as the morning view shows it: the escalation, the instance id of each host, and where
    the conversation with the desk stands."""

    escalation: Escalation
    instances: dict[str, str] = field(default_factory=dict)
    filed_at: str | None = None
    last_reply_at: str | None = None  # the desk's time of the provider's last comment
    last_synced_at: str | None = None
    waiting_on: str | None = None
    stale: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.escalation.to_dict().items() if k != "events"}
        d.update(instances=dict(self.instances), filed_at=self.filed_at, last_reply_at=self.last_reply_at,
                 last_synced_at=self.last_synced_at, waiting_on=self.waiting_on, stale=self.stale)
        return d


def _grouped(conn: sa.Connection, table: sa.Table, ids: Any, order: Sequence[Any] = ()) -> dict[str, list]:
    rows: dict[str, list] = {}
    for r in conn.execute(sa.select(table).where(table.c.escalation_id.in_(ids)).order_by(*order)).mappings():
        rows.setdefault(r["escalation_id"], []).append(r)
    return rows


def _event(row: sa.RowMapping) -> EscalationEvent:
    data = json.loads(row["data"]) if row["data"] else {}
    return EscalationEvent(at=row["at"], kind=row["kind"], detail=row["detail"], data=data)


def assemble(conn: sa.Connection, rows: Sequence[sa.RowMapping], ids: Any, *, events: bool) -> list[Escalation]:
    """Escalations from their rows. `ids` (a list, or a SELECT of ids) fetches all their parts in one query
    per table, whatever the number of escalations."""
    hosts = _grouped(conn, schema.hosts, ids)
    components = _grouped(conn, schema.components, ids)
    history = _grouped(conn, schema.events, ids, [schema.events.c.id]) if events else {}
    return [
        Escalation(
            id=row["id"],
            provider=row["provider"],
            state=EscalationState(row["state"]),
            title=row["title"],
            symptom=row["symptom"],
            severity=Severity(row["severity"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            provider_case_id=row["provider_case_id"],
            raw_status=row["raw_status"],
            hosts=sorted(h["host"] for h in hosts.get(row["id"], [])),
            # Shared components (no host) first, then by host: the same order on SQLite and PostgreSQL.
            components=[
                component_label(c["host"], c["component"])
                for c in sorted(components.get(row["id"], []), key=lambda c: (c["host"] or "", c["component"]))
            ],
            bundle_id=row["bundle_id"],
            bundle_path=row["bundle_path"],
            ticket_path=row["ticket_path"],
            events=[_event(e) for e in history.get(row["id"], [])],
        )
        for row in rows
    ]


def track(conn: sa.Connection, rows: Sequence[sa.RowMapping], ids: Any, *, now: datetime,
          stale_after: timedelta) -> list[Tracked]:
    """The morning view of escalations from their rows (without their history)."""
    instances = _grouped(conn, schema.hosts, ids)
    result = []
    for row, esc in zip(rows, assemble(conn, rows, ids, events=False), strict=True):
        since = row["last_reply_at"] or row["filed_at"]
        result.append(Tracked(
            escalation=esc,
            instances={h["host"]: h["instance_id"] for h in instances.get(row["id"], []) if h["instance_id"]},
            filed_at=row["filed_at"], last_reply_at=row["last_reply_at"], last_synced_at=row["last_synced_at"],
            waiting_on=waiting_on(esc.state), stale=is_stale(esc.state, since, now, stale_after),
        ))  # fmt: skip
    return result
