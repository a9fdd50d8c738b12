"""The tracker's tables and their versioned migrations (SQLAlchemy Core, portable to SQLite and PostgreSQL).

A migration is a function of one Connection, run inside the opening transaction and recorded in
`schema_version`. Migrations only ever add: never drop a table or a column that holds escalations.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime

import sqlalchemy as sa

from fabricase.errors import TrackerError

__all__ = [
    "MIGRATIONS",
    "components",
    "current_version",
    "escalations",
    "events",
    "hosts",
    "metadata",
    "migrate",
    "pseudonym_keys",
    "schema_version",
    "tracker_meta",
]

metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("applied_at", sa.Text, nullable=False),
)


def _define_v1(md: sa.MetaData) -> list[sa.Table]:
    """The version 1 tables, bound to `md`."""
    escalations = sa.Table(
        "escalations",
        md,
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("seq", sa.Integer, nullable=False, unique=True),
        sa.Column("provider", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("raw_status", sa.Text),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("symptom", sa.Text, nullable=False),
        sa.Column("severity", sa.Text, nullable=False),
        sa.Column("provider_case_id", sa.Text),
        sa.Column("bundle_id", sa.Text),
        sa.Column("bundle_path", sa.Text),
        sa.Column("ticket_path", sa.Text),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
        sa.Index("ix_escalations_state", "state"),
        sa.Index("ix_escalations_provider", "provider"),
    )
    hosts = sa.Table(
        "escalation_hosts",
        md,
        sa.Column("escalation_id", sa.Text, sa.ForeignKey("escalations.id"), primary_key=True),
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("instance_id", sa.Text),
        sa.Index("ix_escalation_hosts_host", "host"),
    )
    components = sa.Table(
        "escalation_components",
        md,
        sa.Column("escalation_id", sa.Text, sa.ForeignKey("escalations.id"), nullable=False),
        sa.Column("host", sa.Text),  # null for a shared component (switch, network node, block)
        sa.Column("component", sa.Text, nullable=False),
        sa.Index("ix_escalation_components_escalation", "escalation_id"),
    )
    events = sa.Table(
        "events",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("escalation_id", sa.Text, sa.ForeignKey("escalations.id"), nullable=False),
        sa.Column("at", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("data", sa.Text),  # JSON text: portable, and readable with plain sqlite3
        sa.Index("ix_events_escalation", "escalation_id"),
    )
    return [escalations, hosts, components, events]


# The tables the store queries. They equal version 1 today; when a migration changes a table, write the
# new shape here and keep _define_v1 frozen, so that migration 1 still creates what version 1 had.
escalations, hosts, components, events = _define_v1(metadata)


def _define_v2(md: sa.MetaData) -> list[sa.Table]:
    """Version 2 adds one table: the HMAC keys that make pseudonyms consistent within one escalation (or one
    capture bundled outside any escalation). Keys stay here, never in a bundle."""
    keys = sa.Table(
        "pseudonym_keys",
        md,
        sa.Column("scope", sa.Text, primary_key=True),  # an escalation id, or "capture:<absolute path>"
        sa.Column("key", sa.Text, nullable=False),  # 32 random bytes, hex
        sa.Column("created_at", sa.Text, nullable=False),
    )
    return [keys]


(pseudonym_keys,) = _define_v2(metadata)

# Version 3 adds columns (and never removes any): when the case was filed, when the provider last replied,
# when it was last synced; and on events the desk's identity of a synced comment, unique per escalation, so
# that two syncs running at once cannot record the same desk comment twice.
_V3_COLUMNS: dict[str, tuple[str, ...]] = {
    "escalations": ("filed_at", "last_reply_at", "last_synced_at"),
    "events": ("external_id",),
}
for _table in (escalations, events):
    for _name in _V3_COLUMNS[_table.name]:
        _table.append_column(sa.Column(_name, sa.Text))


def _define_v3_indexes() -> list[sa.Index]:
    """Bound to the current tables: migration 3 creates them, and the current metadata carries them."""
    return [
        sa.Index("ux_events_external", events.c.escalation_id, events.c.external_id, unique=True),
        sa.Index("ix_escalation_hosts_instance", hosts.c.instance_id),
        sa.Index("ix_escalation_components_component", components.c.component),
    ]


_V3_INDEXES = _define_v3_indexes()


def _v1_initial(conn: sa.Connection) -> None:
    md = sa.MetaData()
    for table in _define_v1(md):
        table.create(conn)


def _v2_pseudonym_keys(conn: sa.Connection) -> None:
    md = sa.MetaData()
    for table in _define_v2(md):
        table.create(conn)


def _v3_sync_columns(conn: sa.Connection) -> None:
    text_type = sa.Text().compile(dialect=conn.dialect)
    for table, names in _V3_COLUMNS.items():
        for name in names:
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {text_type}")
    # Cases filed before version 3: the time of their "filed" event.
    filed = (
        sa.select(sa.func.min(events.c.at))
        .where(events.c.escalation_id == escalations.c.id, events.c.kind == "filed")
        .scalar_subquery()
    )
    conn.execute(escalations.update().values(filed_at=filed))
    for index in _V3_INDEXES:
        index.create(conn)


def _define_v4(md: sa.MetaData) -> list[sa.Table]:
    """Version 4 adds the tracker's own identity: a random id made once, when the database is created (or
    upgraded). Every tracker numbers its escalations from FC-1, so the case marker a filing leaves at the desk
    carries this id too: two engineers' FC-1 are two different cases (providers.base.case_marker)."""
    meta = sa.Table(
        "tracker_meta",
        md,
        sa.Column("name", sa.Text, primary_key=True),  # "tracker_id"
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
    )
    return [meta]


(tracker_meta,) = _define_v4(metadata)


def _v4_tracker_identity(conn: sa.Connection) -> None:
    md = sa.MetaData()
    (table,) = _define_v4(md)
    table.create(conn)
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conn.execute(table.insert().values(name="tracker_id", value=secrets.token_hex(4), created_at=at))


# Ordered: MIGRATIONS[i] brings the schema from version i to version i + 1. Append only.
MIGRATIONS: list[Callable[[sa.Connection], None]] = [
    _v1_initial, _v2_pseudonym_keys, _v3_sync_columns, _v4_tracker_identity,
]


def current_version(conn: sa.Connection) -> int:
    """The schema version recorded in the database (0 for a new one)."""
    if not sa.inspect(conn).has_table(schema_version.name):
        return 0
    return conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar() or 0


def migrate(
    conn: sa.Connection,
    migrations: list[Callable[[sa.Connection], None]] | None = None,
    *,
    where: str | None = None,
) -> list[int]:
    """Run the pending migrations on `conn` (inside the caller's transaction); return the versions applied.

    A database newer than this code knows is a TrackerError naming `where`: older code must not write to it.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    schema_version.create(conn, checkfirst=True)
    have = current_version(conn)
    if have > len(migrations):
        raise TrackerError(
            f"database schema version {have} is newer than this fabricase knows ({len(migrations)}): upgrade fabricase",
            where=where,
        )
    applied = []
    for version, step in enumerate(migrations[have:], start=have + 1):
        step(conn)
        conn.execute(
            schema_version.insert().values(
                version=version,
                name=step.__name__.lstrip("_"),
                applied_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        )
        applied.append(version)
    return applied
