"""The escalation tracker: escalations, their hosts, components and history, in SQLite (default) or
PostgreSQL (by URL). SQLAlchemy Core only, so the same statements run on both."""

from __future__ import annotations

import itertools
import json
import random
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from fabricase.config import Paths
from fabricase.errors import NotFoundError, TrackerError
from fabricase.models import Escalation, EscalationEvent, EscalationState, Severity
from fabricase.redact import gate
from fabricase.tracker import db, schema
from fabricase.tracker.records import (
    DEFAULT_STALE_AFTER,
    Tracked,
    assemble,
    comment_identity,
    desk_time,
    format_escalation_id,
    iso,
    parse_escalation_id,
    track,
)  # fmt: skip

__all__ = ["STATE_FILTERS", "BusyError", "Coverage", "CoveredError", "DeskComment", "SyncChange", "Tracker"]

STATE_FILTERS = ("open", "waiting", "all", *(s.value for s in EscalationState))
# Two writers can pick the same next number on PostgreSQL (SQLite serializes writers): the loser retries
# after a random pause, so that the same writers do not collide again in lockstep.
_CREATE_ATTEMPTS = 50
_WAITING = (EscalationState.WAITING_PROVIDER.value, EscalationState.WAITING_US.value)
_CLOSED = (EscalationState.RESOLVED.value, EscalationState.CLOSED.value)
_READ = "cannot read the escalation database"


def _text(value: str | Path | None) -> str | None:
    return None if value is None else str(value)


class DeskComment(Protocol):
    """A comment as a desk returns it (providers.base.CaseComment has this shape)."""

    at: str
    author: str
    body: str
    from_provider: bool


@dataclass(frozen=True)
class SyncChange:
    """What one sync changed on one escalation."""

    state_from: EscalationState
    state_to: EscalationState
    raw_status: str | None
    new_comments: int
    last_reply_at: str | None

    @property
    def changed(self) -> bool:
        return self.state_from != self.state_to or self.new_comments > 0


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


class BusyError(TrackerError):
    """claim() refused: another attempt holds the escalation (its reason says whose, since when)."""


# Creates take this PostgreSQL advisory lock for their transaction, so that the duplicate check and the insert of
# two writers are serialized (SQLite serializes writers with BEGIN IMMEDIATE already).
_CREATE_LOCK = 0x66637265  # "fcre"


class Tracker:
    """Escalations and their history. `Tracker("sqlite:////path/tracker.db")` or a PostgreSQL URL;
    pending schema migrations run when it opens."""

    def __init__(self, url: str, *, now: Callable[[], datetime] | None = None) -> None:
        self._now = now or (lambda: datetime.now(UTC))
        parsed = db.parse_url(url)
        self.where = db.describe(parsed)
        self._engine = db.connect(parsed)
        try:
            self._migrate()
        except BaseException:
            self._engine.dispose()
            raise

    @classmethod
    def open(cls, paths: Paths, *, now: Callable[[], datetime] | None = None) -> Tracker:
        """The tracker at paths.database_url, creating the SQLite file's directory when needed."""
        url = paths.database_url
        path = db.sqlite_file(db.parse_url(url))
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TrackerError(
                    f"cannot create the database directory: {exc.strerror}", where=str(path.parent)
                ) from exc
        return cls(url, now=now)

    def close(self) -> None:
        self._engine.dispose()

    @property
    def tracker_id(self) -> str:
        """This tracker's random id, made when its database was created: it tells its FC-1 from another
        tracker's FC-1 at a desk that both file to."""
        if getattr(self, "_tracker_id", None) is None:
            meta = schema.tracker_meta
            with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
                found = conn.execute(sa.select(meta.c.value).where(meta.c.name == "tracker_id")).scalar()
            if not found:
                raise TrackerError("the database has no tracker id", where=self.where)
            self._tracker_id = str(found)
        return self._tracker_id

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------------------------

    def _migrate(self) -> None:
        with db.guard("cannot open the escalation database", self.where):
            try:
                with db.transaction(self._engine, write=True) as conn:
                    schema.migrate(conn, where=self.where)
            except sa_exc.SQLAlchemyError:
                # Another process may have created the same new PostgreSQL database at the same moment.
                with db.transaction(self._engine) as conn:
                    if schema.current_version(conn) < len(schema.MIGRATIONS):
                        raise

    @contextmanager
    def _write(self, action: str) -> Iterator[sa.Connection]:
        with db.guard(action, self.where), db.transaction(self._engine, write=True) as conn:
            yield conn

    def _stamp(self) -> str:
        return iso(self._now())

    @staticmethod
    def _current(conn: sa.Connection, esc_id: str, *, lock: bool = False) -> sa.RowMapping:
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

    @staticmethod
    def _update(conn: sa.Connection, esc_id: str, at: str, **values: Any) -> None:
        table = schema.escalations
        conn.execute(table.update().where(table.c.id == esc_id).values(updated_at=at, **values))

    @staticmethod
    def _event(
        conn: sa.Connection, esc_id: str, at: str, kind: str, detail: str, data: dict | None,
        external_id: str | None = None,
    ) -> None:  # fmt: skip
        # What the tracker stores is what was sent: the redaction gate's output (a team shares this database).
        payload = json.dumps(gate.outbound(data), sort_keys=True, default=str) if data else None
        conn.execute(schema.events.insert().values(
            escalation_id=esc_id, at=at, kind=kind, detail=gate.text(detail), data=payload, external_id=external_id
        ))  # fmt: skip

    @staticmethod
    def _refuse_covered(conn: sa.Connection, provider: str, hosts: Iterable[str], instances: Iterable[str],
                        components: Iterable[str]) -> None:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CREATE_LOCK})
        found = Tracker._covering(conn, provider=provider, hosts=hosts, instances=instances, components=components)
        if found:
            raise CoveredError(found)

    def _insert_new(
        self, conn: sa.Connection, at: str, fields: dict[str, Any], hosts: list, comps: list, instances: Mapping,
        extra: dict[str, Any],
    ) -> str:
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
        self._event(conn, esc_id, at, "created", fields["symptom"], data)
        return esc_id

    # -- the API --------------------------------------------------------------------------------------

    def create(
        self,
        *,
        provider: str,
        title: str,
        symptom: str,
        severity: Severity | str,
        hosts: list[str],
        components: list[tuple[str | None, str]],
        instances: Mapping[str, str] | None = None,
        exclusive: bool = False,
        data: Mapping[str, Any] | None = None,
    ) -> Escalation:
        """A new escalation in state draft, with the id FC-<highest number + 1>. instances: host -> the
        provider's instance id, for the hosts that have one (a host named only here is added to `hosts`).
        exclusive: raise CoveredError when an open escalation of this provider already covers one of the hosts,
        instances or shared components, checked in the insert's own transaction. data: kept on the "created"
        event (who is filing it, the capture it came from)."""
        fields = {
            "provider": provider,
            "title": gate.text(title),
            "symptom": gate.text(symptom),
            "severity": Severity(severity).value,
        }
        instances = {h: i for h, i in (instances or {}).items() if i}
        unique_hosts = list(dict.fromkeys([*hosts, *instances]))
        unique_components = list(dict.fromkeys((h or None, c) for h, c in components))
        at = self._stamp()
        with db.guard("cannot record the escalation", self.where):
            for attempt in itertools.count(1):
                try:
                    with db.transaction(self._engine, write=True) as conn:
                        if exclusive:
                            self._refuse_covered(conn, provider, unique_hosts, instances.values(),
                                                 [c for h, c in unique_components if h is None])
                        esc_id = self._insert_new(conn, at, fields, unique_hosts, unique_components, instances,
                                                  dict(data or {}))
                    break
                except sa_exc.IntegrityError:
                    if attempt >= _CREATE_ATTEMPTS:
                        raise
                    time.sleep(random.uniform(0, min(0.005 * attempt, 0.1)))
        return self.get(esc_id)

    def mark_filed(
        self,
        esc_id: str,
        *,
        provider_case_id: str,
        raw_status: str | None,
        state: EscalationState | str,
        ticket_path: str | Path | None,
        bundle_id: str | None,
        bundle_path: str | Path | None,
    ) -> Escalation:
        """Record that the provider's desk accepted the case (a "filed" event)."""
        fields = {
            "provider_case_id": provider_case_id,
            "raw_status": raw_status,
            "state": EscalationState(state).value,
            "ticket_path": _text(ticket_path),
            "bundle_id": bundle_id,
            "bundle_path": _text(bundle_path),
        }
        at = self._stamp()
        with self._write("cannot record the filing") as conn:
            key = self._current(conn, esc_id, lock=True)["id"]
            self._update(conn, key, at, filed_at=at, **fields)
            data = {
                "case_id": provider_case_id,
                **{k: fields[k] for k in ("raw_status", "state", "ticket_path")},
            }
            self._event(conn, key, at, "filed", f"filed as {provider_case_id}", data)
        return self.get(key)

    def add_event(self, esc_id: str, kind: str, detail: str, data: dict[str, Any] | None = None) -> EscalationEvent:
        """Append to an escalation's history (comment, attach, sync, ...)."""
        at = self._stamp()
        with self._write("cannot record the event") as conn:
            key = self._current(conn, esc_id, lock=True)["id"]
            self._update(conn, key, at)
            self._event(conn, key, at, kind, detail, data)
        return EscalationEvent(at=at, kind=kind, detail=detail, data=dict(data or {}))

    def claim(self, esc_id: str, kind: str, detail: str, data: dict[str, Any] | None,
              busy: Callable[[Escalation], str | None]) -> Escalation:
        """Append an event only if `busy(escalation)` says nothing holds it, in one transaction with the row
        locked: of two attempts to file one escalation at once, one records its intent and the other gets
        BusyError with busy's reason."""
        at = self._stamp()
        with self._write("cannot record the event") as conn:
            row = self._current(conn, esc_id, lock=True)
            reason = busy(assemble(conn, [row], [row["id"]], events=True)[0])
            if reason is not None:
                raise BusyError(reason, where=row["id"])
            self._update(conn, row["id"], at)
            self._event(conn, row["id"], at, kind, detail, data)
        return self.get(row["id"])

    def set_state(
        self,
        esc_id: str,
        state: EscalationState | str,
        note: str | None = None,
        *,
        raw_status: str | None = None,
    ) -> Escalation:
        """Move an escalation to `state`, recorded as a "state" event; nothing happens if nothing changes."""
        new = EscalationState(state).value
        at = self._stamp()
        with self._write("cannot record the state change") as conn:
            row = self._current(conn, esc_id, lock=True)
            key, old = row["id"], row["state"]
            status = row["raw_status"] if raw_status is None else raw_status
            if old != new or status != row["raw_status"]:
                self._update(conn, key, at, state=new, raw_status=status)
                detail = f"{old} -> {new}" + (f": {note}" if note else "")
                data = {"from": old, "to": new, "note": note, "raw_status": status}
                self._event(conn, key, at, "state", detail, data)
        return self.get(key)

    def resolve(self, esc_id: str, note: str | None = None) -> Escalation:
        """Mark resolved (a no-op on one already resolved)."""
        return self.set_state(esc_id, EscalationState.RESOLVED, note)

    def pseudonym_key(self, scope: str) -> bytes:
        """The HMAC key for pseudonyms in `scope` (an escalation id, or "capture:<path>"), made on first use:
        the same host gets the same pseudonym in every attachment of one escalation, and only this tracker can
        map it back."""
        table = schema.pseudonym_keys
        for _ in range(2):  # a concurrent first use inserts the same scope: the loser reads the winner's key
            with db.guard("cannot read the pseudonym key", self.where), db.transaction(self._engine) as conn:
                found = conn.execute(sa.select(table.c.key).where(table.c.scope == scope)).scalar()
            if found is not None:
                return bytes.fromhex(found)
            try:
                with self._write("cannot store the pseudonym key") as conn:
                    row = dict(scope=scope, key=secrets.token_hex(32), created_at=self._stamp())
                    conn.execute(table.insert().values(**row))
            except TrackerError:
                continue
        with db.guard("cannot read the pseudonym key", self.where), db.transaction(self._engine) as conn:
            found = conn.execute(sa.select(table.c.key).where(table.c.scope == scope)).scalar()
        if found is None:
            raise TrackerError("no pseudonym key could be stored", where=scope)
        return bytes.fromhex(found)

    def get(self, esc_id: str) -> Escalation:
        """One escalation with its history; accepts "FC-3", "fc-3" or "3"."""
        with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
            row = self._current(conn, esc_id)
            return assemble(conn, [row], [row["id"]], events=True)[0]

    def record_sync(
        self, esc_id: str, *, raw_status: str, state: EscalationState | str, comments: Iterable[DeskComment]
    ) -> SyncChange:
        """Record what the desk says now, in one transaction: the state and raw status (a "state" event when
        they change), each desk comment not seen before (a "comment" event at the desk's time, identified by
        comment_identity; one we posted ourselves is matched to its desk copy, not recorded twice), the time
        of the provider's last reply, and when this sync ran."""
        new = EscalationState(state)
        at = self._stamp()
        table = schema.events
        with self._write("cannot record the sync") as conn:
            row = self._current(conn, esc_id, lock=True)
            key, old = row["id"], EscalationState(row["state"])
            mine = sa.and_(table.c.escalation_id == key, table.c.kind == "comment")
            known = set(conn.execute(sa.select(table.c.external_id).where(mine, table.c.external_id.is_not(None)))
                        .scalars())  # fmt: skip
            ours: dict[str, list[int]] = {}
            for event_id, body in conn.execute(
                sa.select(table.c.id, table.c.detail).where(mine, table.c.external_id.is_(None)).order_by(table.c.id)
            ):
                ours.setdefault(body.strip(), []).append(event_id)
            added, last_reply = 0, row["last_reply_at"]
            for comment in comments:
                identity = comment_identity(comment.at, comment.author, comment.body)
                if identity in known:
                    continue
                known.add(identity)
                posted = None if comment.from_provider else (ours.get(comment.body.strip()) or [None]).pop(0)
                if posted is not None:
                    conn.execute(table.update().where(table.c.id == posted).values(external_id=identity))
                    continue
                when = desk_time(comment.at) or at
                data = {"author": comment.author, "from_provider": comment.from_provider, "desk_at": comment.at}
                self._event(conn, key, when, "comment", comment.body, data, external_id=identity)
                added += 1
                if comment.from_provider and (last_reply is None or when > last_reply):
                    last_reply = when
            status = raw_status if raw_status is not None else row["raw_status"]
            if old != new or status != row["raw_status"]:
                detail = f"{old} -> {new}: the desk says {status!r}"
                self._event(conn, key, at, "state", detail,
                            {"from": old.value, "to": new.value, "raw_status": status, "note": "sync"})
            change = SyncChange(old, new, status, added, last_reply)
            values = dict(last_synced_at=at, last_reply_at=last_reply, state=new.value, raw_status=status)
            if change.changed or status != row["raw_status"]:
                self._event(conn, key, at, "sync", f"desk status {status!r}, {added} new comment(s)",
                            {"raw_status": status, "new_comments": added})
                self._update(conn, key, at, **values)
            else:
                esc = schema.escalations
                conn.execute(esc.update().where(esc.c.id == key).values(**values))
        return change

    def _conditions(
        self, *, provider: str | None, state: str, host: str | None, older_than: timedelta | None
    ) -> list[Any]:
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
            covering = sa.select(hosts.c.escalation_id).where(sa.or_(hosts.c.host == host, hosts.c.instance_id == host))
            conditions.append(table.c.id.in_(covering))
        if older_than is not None:
            conditions.append(table.c.created_at <= iso(self._now() - older_than))
        return conditions

    def list(
        self,
        *,
        provider: str | None = None,
        state: str = "open",
        host: str | None = None,
        older_than: timedelta | None = None,
        events: bool = False,
    ) -> list[Escalation]:
        """Escalations oldest first, without their history unless `events` (read in one query for all).
        state: open, waiting, all, or one state; host: a host name or instance id they cover; older_than: created
        at least this long ago."""
        table = schema.escalations
        conditions = self._conditions(provider=provider, state=state, host=host, older_than=older_than)
        with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
            rows = conn.execute(sa.select(table).where(*conditions).order_by(table.c.seq)).mappings().all()
            return assemble(conn, rows, sa.select(table.c.id).where(*conditions), events=events)

    def overview(
        self,
        *,
        provider: str | None = None,
        state: str = "open",
        host: str | None = None,
        older_than: timedelta | None = None,
        stale_after: timedelta = DEFAULT_STALE_AFTER,
    ) -> list[Tracked]:
        """The morning view: like list(), grouped by provider then oldest first, each with its instance ids,
        the provider's last reply, who is waiting on whom and whether it is stale."""
        table = schema.escalations
        conditions = self._conditions(provider=provider, state=state, host=host, older_than=older_than)
        query = sa.select(table).where(*conditions).order_by(table.c.provider, table.c.seq)
        with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
            rows = conn.execute(query).mappings().all()
            ids = sa.select(table.c.id).where(*conditions)
            return track(conn, rows, ids, now=self._now(), stale_after=stale_after)

    def tracked(self, esc_id: str, *, stale_after: timedelta = DEFAULT_STALE_AFTER) -> Tracked:
        """One escalation as overview() shows it, with its history."""
        with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
            row = self._current(conn, esc_id)
            view = track(conn, [row], [row["id"]], now=self._now(), stale_after=stale_after)[0]
            full = assemble(conn, [row], [row["id"]], events=True)[0]
        return Tracked(**{**view.__dict__, "escalation": full})

    def covering(
        self,
        *,
        provider: str | None,
        hosts: Iterable[str] = (),
        instances: Iterable[str] = (),
        components: Iterable[str] = (),
    ) -> list[Coverage]:
        """Open escalations (of `provider`; None: any) that already cover one of these hosts, instance ids or
        shared components (switch:leaf-3, network-node:..., block:...), oldest first."""
        with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
            return self._covering(conn, provider=provider, hosts=hosts, instances=instances, components=components)

    @staticmethod
    def _covering(conn: sa.Connection, *, provider: str | None, hosts: Iterable[str], instances: Iterable[str],
                  components: Iterable[str]) -> list[Coverage]:
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
