"""The embedded default provider: topology from a hand-written inventory, and an outbox for a desk.

Inventory (optional), CONFIG/inventory.json:

    {"hosts": {"gpu001": {"rack": "r1", "switch": "leaf-3", "instance_id": "i-0abc", "zone": "z1"}}}

Outbox: each filing writes DATA/outbox/<escalation id>/ with ticket.md, summary.md, case.json and a copy of
the bundle, for an engineer to send by hand (mail, a portal, a desk without an API).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricase.config import Paths
from fabricase.errors import ConfigError, ProviderError
from fabricase.models import EscalationState, Placement, TicketDraft
from fabricase.providers.base import Feature, FilingResult, Provider

__all__ = ["CASE_PREFIX", "OUTBOX_STATUS", "StaticProvider", "load_inventory"]

INVENTORY_FILE = "inventory.json"
CASE_PREFIX = "outbox-"
OUTBOX_STATUS = "written-to-outbox"
_PLACEMENT_FIELDS = ("instance_id", "instance_type", "region", "zone", "placement_group")
_TOPOLOGY_FIELDS = ("switch", "rack")  # outermost first, as Placement.topology wants
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _check_entry(path: Path, host: str, entry: Any) -> dict[str, str]:
    if not isinstance(entry, dict):
        raise ConfigError(f'host {host!r}: expected an object like {{"rack": "r1"}}', where=str(path))
    for key, value in entry.items():
        if value is not None and not isinstance(value, str | int):
            raise ConfigError(f"host {host!r}: {key} must be a string", where=str(path))
    return {key: str(value) for key, value in entry.items() if value is not None}


def load_inventory(path: Path) -> dict[str, dict[str, str]]:
    """Host name -> its inventory fields; {} when the file does not exist. A malformed file is a
    ConfigError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the inventory: {getattr(exc, 'strerror', None) or exc}", where=str(path)
        ) from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg} (line {exc.lineno})", where=str(path)) from exc
    hosts = document.get("hosts", {}) if isinstance(document, dict) else None
    if not isinstance(hosts, dict):
        raise ConfigError('expected {"hosts": {"<host>": {"rack": ..., "switch": ...}}}', where=str(path))
    return {str(host): _check_entry(path, str(host), entry) for host, entry in hosts.items()}


def _placement(host: str, entry: dict[str, str] | None) -> Placement:
    if entry is None:
        return Placement(host=host, provider="static")
    known = {*_PLACEMENT_FIELDS, *_TOPOLOGY_FIELDS}
    return Placement(
        host=host,
        provider="static",
        **{f: entry.get(f) for f in _PLACEMENT_FIELDS},
        topology=[f"{f}:{entry[f]}" for f in _TOPOLOGY_FIELDS if entry.get(f)],
        extra={k: v for k, v in entry.items() if k not in known},
    )


def _write_atomic(path: Path, data: str | bytes) -> None:
    """Write via a temporary file, so that an interrupted filing never leaves half a ticket."""
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


def _copy_atomic(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


class StaticProvider(Provider):
    """No cloud API: placements come from the inventory file, cases go to the outbox."""

    name = "static"
    unsupported = {
        Feature.FAULTY_HOST_REPORT: "no provider API: the static provider has no faulty-host channel",
        Feature.SYNC: "outbox cases are updated by hand",
    }

    def __init__(self, paths: Paths, *, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(paths)
        self._now = now or (lambda: datetime.now(UTC))

    @property
    def inventory_path(self) -> Path:
        return self.paths.config / INVENTORY_FILE

    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        """Placements from the inventory (a host listed by its short name matches its FQDN too)."""
        inventory = load_inventory(self.inventory_path)
        placements = []
        for entry in hosts:
            name = entry["host"]
            placements.append(_placement(name, inventory.get(name) or inventory.get(name.split(".")[0])))
        return placements

    def case_folder(self, escalation_id: str) -> Path:
        if not _SAFE_NAME.fullmatch(escalation_id):
            raise ProviderError(f"not a usable escalation id for an outbox folder: {escalation_id!r}", where=self.name)
        return self.paths.outbox / escalation_id

    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Write the case to the outbox. Filing again finds the same case: case.json, written last, marks a
        completed filing, and an interrupted one is completed."""
        folder = self.case_folder(escalation_id)
        case_file = folder / "case.json"
        case_id = f"{CASE_PREFIX}{escalation_id}"
        try:
            if not case_file.is_file():
                if bundle_path is not None and not Path(bundle_path).is_file():
                    raise ProviderError("bundle file not found", where=str(bundle_path))
                folder.mkdir(parents=True, exist_ok=True)
                body = f"{draft.title}\n\n{draft.body}"
                _write_atomic(folder / "ticket.md", body if body.endswith("\n") else body + "\n")
                _write_atomic(folder / "summary.md", draft.summary or "")
                if bundle_path is not None:
                    _copy_atomic(Path(bundle_path), folder / Path(bundle_path).name)
                case = {
                    "case_id": case_id,
                    "escalation_id": escalation_id,
                    "title": draft.title,
                    "severity": str(draft.severity),
                    "hosts": list(draft.hosts),
                    "components": list(draft.components),
                    "bundle_id": draft.bundle_id,
                    "bundle_file": Path(bundle_path).name if bundle_path is not None else None,
                    "filed_at": self._now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                _write_atomic(case_file, json.dumps(case, indent=2, sort_keys=True) + "\n")
        except OSError as exc:
            raise ProviderError(f"cannot write to the outbox: {exc.strerror or exc}", where=str(folder)) from exc
        return FilingResult(
            case_id=case_id, raw_status=OUTBOX_STATUS, state=EscalationState.FILED, location=str(folder)
        )

    def resolve_case(self, case_id: str, note: str | None) -> None:
        """Leave a `resolved` marker holding the note in the case's outbox folder."""
        if not case_id.startswith(CASE_PREFIX):
            raise ProviderError(f"not an outbox case id (expected {CASE_PREFIX}<escalation>)", where=case_id)
        folder = self.case_folder(case_id.removeprefix(CASE_PREFIX))
        if not (folder / "case.json").is_file():
            raise ProviderError("no such outbox case", where=str(folder))
        try:
            _write_atomic(folder / "resolved", f"{note}\n" if note else "")
        except OSError as exc:
            raise ProviderError(f"cannot write to the outbox: {exc.strerror or exc}", where=str(folder)) from exc
