"""Escalation ids, component labels, timestamps, and rows made back into models.Escalation."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from fabricase.errors import NotFoundError
from fabricase.models import Escalation, EscalationEvent, EscalationState, Severity
from fabricase.tracker import schema

__all__ = ["ID_PREFIX", "assemble", "component_label", "format_escalation_id", "iso", "parse_escalation_id"]

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
