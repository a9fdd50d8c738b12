"""The tracker's statements on one open connection: an escalation's row (read, or locked), its update, an event
appended to its history, a new escalation inserted, the list filters, and which open escalations already cover a
host, instance or shared component. SQLAlchemy Core only, so the same statements run on SQLite and PostgreSQL;
store.Tracker owns the engine, the transactions, the retries and the clock."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from fabricase.errors import NotFoundError, TrackerError
from fabricase.models import EscalationState
from fabricase.redact import gate
from fabricase.tracker import db, schema
from fabricase.tracker.records import format_escalation_id, iso, parse_escalation_id

__all__ = [
    "STATE_FILTERS", "Coverage", "CoveredError", "covering", "current", "event", "filter_conditions", "insert_new",
    "refuse_covered", "update",
]  # fmt: skip

STATE_FILTERS = ("open", "waiting", "all", *(s.value for s in EscalationState))
_WAITING = (EscalationState.WAITING_PROVIDER.value, EscalationState.WAITING_US.value)
_CLOSED = (EscalationState.RESOLVED.value, EscalationState.CLOSED.value)


@dataclass(frozen=True)
class Coverage:
    """An open escalation that already covers some of what a new one would: what it covers, in words."""

    escalation_id: str
    matched: tuple[str, ...]  # "host gpu001", "instance i-0abc", "switch:leaf-3"


class CoveredError(TrackerError):
    """create(exclusive=True) found open escalations covering some of the new one's hosts, instances or shared
    components (checked in the same transaction as the insert: two processes cannot both pass the check)."""

    def __init__(self, found: list[Coverage]) -> None:
        super().__init__("already covered by open escalation(s) " + ", ".join(c.escalation_id for c in found))
        self.found = found


# Creates take this PostgreSQL advisory lock for their transaction, so that the duplicate check and the insert of
# two writers are serialized (SQLite serializes writers with BEGIN IMMEDIATE already).
_CREATE_LOCK = 0x66637265  # "fcre"


def current(conn: sa.Connection, esc_id: str, *, lock: bool = False) -> sa.RowMapping:
    """The escalation's row. lock: hold it until the transaction ends (PostgreSQL: a second writer of the
    same escalation waits, then reads what the first wrote: no lost update; SQLite writers are serialized
    by BEGIN IMMEDIATE already)."""
    key = format_escalation_id(parse_escalation_id(esc_id))
    table = schema.escalations
    query = sa.select(table).where(table.c.id == key)
    row = conn.execute(query.with_for_update() if lock else query).mappings().first()
    if row is None:
        raise NotFoundError("no such escalation", where=key)
    return row


def update(conn: sa.Connection, esc_id: str, at: str, **values: Any) -> None:
    """Set `values` on the escalation's row, and its updated_at to `at`."""
    table = schema.escalations
    conn.execute(table.update().where(table.c.id == esc_id).values(updated_at=at, **values))


def event(
    conn: sa.Connection, esc_id: str, at: str, kind: str, detail: str, data: dict | None,
    external_id: str | None = None,
) -> None:  # fmt: skip
    """Append one event to the escalation's history."""
    # What the tracker stores is what was sent: the redaction gate's output (a team shares this database).
    payload = json.dumps(gate.outbound(data), sort_keys=True, default=str) if data else None
    conn.execute(schema.events.insert().values(
        escalation_id=esc_id, at=at, kind=kind, detail=gate.text(detail), data=payload, external_id=external_id
    ))  # fmt: skip


def refuse_covered(conn: sa.Connection, provider: str, hosts: Iterable[str], instances: Iterable[str],
                   components: Iterable[str]) -> None:
    """Raise CoveredError when an open escalation of `provider` covers one of these (create(exclusive=True))."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CREATE_LOCK})
    found = covering(conn, provider=provider, hosts=hosts, instances=instances, components=components)
    if found:
        raise CoveredError(found)


def insert_new(
    conn: sa.Connection, at: str, fields: dict[str, Any], hosts: list, comps: list, instances: Mapping,
    extra: dict[str, Any],
) -> str:
    """Insert a draft escalation numbered after the highest one, with its hosts, components and "created"
    event; its id."""
    seq = (conn.execute(sa.select(sa.func.max(schema.escalations.c.seq))).scalar() or 0) + 1
    esc_id = format_escalation_id(seq)
    state = EscalationState.DRAFT.value
    conn.execute(
        schema.escalations.insert().values(id=esc_id, seq=seq, state=state, created_at=at, updated_at=at, **fields)
    )
    if hosts:
        rows = [{"escalation_id": esc_id, "host": h, "instance_id": instances.get(h)} for h in hosts]
        conn.execute(schema.hosts.insert(), rows)
    if comps:
        rows = [{"escalation_id": esc_id, "host": h, "component": c} for h, c in comps]
        conn.execute(schema.components.insert(), rows)
    data = {**extra, "provider": fields["provider"], "severity": fields["severity"]}
    event(conn, esc_id, at, "created", fields["symptom"], data)
    return esc_id


def filter_conditions(
    *, provider: str | None, state: str, host: str | None, older_than: timedelta | None,
    now: Callable[[], datetime],
) -> list[Any]:  # fmt: skip
    """The WHERE clauses of a list filter (see Tracker.list); `now` is read only for older_than."""
    table = schema.escalations
    conditions = [] if provider is None else [table.c.provider == provider]
    if state == "open":
        conditions.append(table.c.state.not_in(_CLOSED))
    elif state == "waiting":
        conditions.append(table.c.state.in_(_WAITING))
    elif state != "all":
        if state not in STATE_FILTERS:
            raise TrackerError(f"unknown state filter {state!r} (valid: {', '.join(STATE_FILTERS)})")
        conditions.append(table.c.state == EscalationState(state).value)
    if host is not None:
        hosts = schema.hosts
        covering_ids = sa.select(hosts.c.escalation_id).where(sa.or_(hosts.c.host == host, hosts.c.instance_id == host))
        conditions.append(table.c.id.in_(covering_ids))
    if older_than is not None:
        conditions.append(table.c.created_at <= iso(now() - older_than))
    return conditions


def covering(conn: sa.Connection, *, provider: str | None, hosts: Iterable[str], instances: Iterable[str],
             components: Iterable[str]) -> list[Coverage]:
    """Open escalations (of `provider`; None: any) covering one of these, oldest first (see Tracker.covering)."""
    esc, h, c = schema.escalations, schema.hosts, schema.components
    wanted = {"hosts": sorted(set(hosts)), "instances": sorted(set(instances) - {""}),
              "components": sorted(set(components))}  # fmt: skip
    opened = [esc.c.state.not_in(_CLOSED)] + ([] if provider is None else [esc.c.provider == provider])
    dialect = conn.dialect.name
    queries = [
        ("host", sa.select(esc.c.id, esc.c.seq, h.c.host).join(h, h.c.escalation_id == esc.c.id)
         .where(db.in_values(h.c.host, wanted["hosts"], dialect))),
        ("instance", sa.select(esc.c.id, esc.c.seq, h.c.instance_id).join(h, h.c.escalation_id == esc.c.id)
         .where(db.in_values(h.c.instance_id, wanted["instances"], dialect))),
        ("", sa.select(esc.c.id, esc.c.seq, c.c.component).join(c, c.c.escalation_id == esc.c.id)
         .where(c.c.host.is_(None), db.in_values(c.c.component, wanted["components"], dialect))),
    ]  # fmt: skip
    found: dict[str, tuple[int, list[str]]] = {}
    for label, query in queries:
        if not wanted[{"host": "hosts", "instance": "instances", "": "components"}[label]]:
            continue
        for esc_id, seq, what in conn.execute(query.where(*opened)):
            found.setdefault(esc_id, (seq, []))[1].append(f"{label} {what}".strip())
    ordered = sorted(found.items(), key=lambda item: item[1][0])
    return [Coverage(esc_id, tuple(dict.fromkeys(matched))) for esc_id, (_seq, matched) in ordered]
