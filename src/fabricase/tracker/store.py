"""The escalation tracker: escalations, their hosts, components and history, in SQLite (default) or
PostgreSQL (by URL). SQLAlchemy Core only, so the same statements run on both. The statements on one connection
are in tracker/queries.py; the Tracker here owns the engine, the transactions, the retries and the clock."""

from __future__ import annotations

import itertools
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
from fabricase.errors import TrackerError
from fabricase.models import Escalation, EscalationEvent, EscalationState, Severity
from fabricase.redact import gate
from fabricase.tracker import db, queries, schema
from fabricase.tracker.queries import STATE_FILTERS, Coverage, CoveredError
from fabricase.tracker.records import (
    DEFAULT_STALE_AFTER,
    Tracked,
    assemble,
    comment_identity,
    desk_time,
    iso,
    track,
)  # fmt: skip

__all__ = ["STATE_FILTERS", "BusyError", "Coverage", "CoveredError", "DeskComment", "SyncChange", "Tracker"]

# Two writers can pick the same next number on PostgreSQL (SQLite serializes writers): the loser retries
# after a random pause, so that the same writers do not collide again in lockstep.
_CREATE_ATTEMPTS = 50
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


class BusyError(TrackerError):
    """claim() refused: another attempt holds the escalation (its reason says whose, since when)."""


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
                            queries.refuse_covered(conn, provider, unique_hosts, instances.values(),
                                                   [c for h, c in unique_components if h is None])
                        esc_id = queries.insert_new(conn, at, fields, unique_hosts, unique_components, instances,
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
            key = queries.current(conn, esc_id, lock=True)["id"]
            queries.update(conn, key, at, filed_at=at, **fields)
            data = {
                "case_id": provider_case_id,
                **{k: fields[k] for k in ("raw_status", "state", "ticket_path")},
            }
            queries.event(conn, key, at, "filed", f"filed as {provider_case_id}", data)
        return self.get(key)

    def add_event(self, esc_id: str, kind: str, detail: str, data: dict[str, Any] | None = None) -> EscalationEvent:
        """Append to an escalation's history (comment, attach, sync, ...)."""
        at = self._stamp()
        with self._write("cannot record the event") as conn:
            key = queries.current(conn, esc_id, lock=True)["id"]
            queries.update(conn, key, at)
            queries.event(conn, key, at, kind, detail, data)
        return EscalationEvent(at=at, kind=kind, detail=detail, data=dict(data or {}))

    def claim(self, esc_id: str, kind: str, detail: str, data: dict[str, Any] | None,
              busy: Callable[[Escalation], str | None]) -> Escalation:
        """Append an event only if `busy(escalation)` says nothing holds it, in one transaction with the row
        locked: of two attempts to file one escalation at once, one records its intent and the other gets
        BusyError with busy's reason."""
        at = self._stamp()
        with self._write("cannot record the event") as conn:
            row = queries.current(conn, esc_id, lock=True)
            reason = busy(assemble(conn, [row], [row["id"]], events=True)[0])
            if reason is not None:
                raise BusyError(reason, where=row["id"])
            queries.update(conn, row["id"], at)
            queries.event(conn, row["id"], at, kind, detail, data)
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
            row = queries.current(conn, esc_id, lock=True)
            key, old = row["id"], row["state"]
            status = row["raw_status"] if raw_status is None else raw_status
            if old != new or status != row["raw_status"]:
                queries.update(conn, key, at, state=new, raw_status=status)
                detail = f"{old} -> {new}" + (f": {note}" if note else "")
                data = {"from": old, "to": new, "note": note, "raw_status": status}
                queries.event(conn, key, at, "state", detail, data)
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
            row = queries.current(conn, esc_id)
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
            row = queries.current(conn, esc_id, lock=True)
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
                queries.event(conn, key, when, "comment", comment.body, data, external_id=identity)
                added += 1
                if comment.from_provider and (last_reply is None or when > last_reply):
                    last_reply = when
            status = raw_status if raw_status is not None else row["raw_status"]
            if old != new or status != row["raw_status"]:
                detail = f"{old} -> {new}: the desk says {status!r}"
                queries.event(conn, key, at, "state", detail,
                              {"from": old.value, "to": new.value, "raw_status": status, "note": "sync"})
            change = SyncChange(old, new, status, added, last_reply)
            values = dict(last_synced_at=at, last_reply_at=last_reply, state=new.value, raw_status=status)
            if change.changed or status != row["raw_status"]:
                queries.event(conn, key, at, "sync", f"desk status {status!r}, {added} new comment(s)",
                              {"raw_status": status, "new_comments": added})
                queries.update(conn, key, at, **values)
            else:
                esc = schema.escalations
                conn.execute(esc.update().where(esc.c.id == key).values(**values))
        return change

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
        conditions = queries.filter_conditions(provider=provider, state=state, host=host, older_than=older_than,
                                               now=self._now)
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
        conditions = queries.filter_conditions(provider=provider, state=state, host=host, older_than=older_than,
                                               now=self._now)
        query = sa.select(table).where(*conditions).order_by(table.c.provider, table.c.seq)
        with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
            rows = conn.execute(query).mappings().all()
            ids = sa.select(table.c.id).where(*conditions)
            return track(conn, rows, ids, now=self._now(), stale_after=stale_after)

    def tracked(self, esc_id: str, *, stale_after: timedelta = DEFAULT_STALE_AFTER) -> Tracked:
        """One escalation as overview() shows it, with its history."""
        with db.guard(_READ, self.where), db.transaction(self._engine) as conn:
            row = queries.current(conn, esc_id)
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
            return queries.covering(conn, provider=provider, hosts=hosts, instances=instances, components=components)
