"""The embedded default provider: topology from a hand-written inventory, and a desk from configuration.

Inventory (optional), CONFIG/inventory.json:

    {"hosts": {"gpu001": {"rack": "r1", "switch": "leaf-3", "instance_id": "i-0abc", "zone": "z1"}}}

Desk, `[providers.static] desk` in config.toml (providers/desks/): the outbox by default (each filing writes
DATA/outbox/<escalation id>/ for an engineer to send by hand), or Jira Service Management, Zendesk or email.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricase.config import Paths, provider_profile
from fabricase.errors import ConfigError
from fabricase.models import Placement, TicketDraft
from fabricase.providers.base import CaseStatus, CheckResult, Feature, FilingResult, PlannedRequest, Provider
from fabricase.providers.desks import Desk, make_desk
from fabricase.providers.desks.outbox import CASE_PREFIX, OUTBOX_STATUS, OutboxDesk

__all__ = [
    "CASE_PREFIX",
    "INVENTORY_FILE",
    "INVENTORY_FILES",
    "OUTBOX_STATUS",
    "TOPOLOGY_FIELDS",
    "StaticProvider",
    "config_inventory",
    "load_inventory",
    "placements_from_inventory",
]  # fmt: skip

INVENTORY_FILE = "inventory.json"
# The inventory may be written in any of these (the first that exists in the config directory is read).
INVENTORY_FILES = ("inventory.json", "inventory.toml", "inventory.yaml", "inventory.yml")
NO_FAULTY_HOST_CHANNEL = "no provider API: the static provider has no faulty-host channel"
_PLACEMENT_FIELDS = ("instance_id", "instance_type", "region", "zone", "placement_group")
# Outermost first, as Placement.topology wants: a spine above leaf switches above racks. `switch` and `leaf` are
# both the switch the host is cabled to (older inventories say switch).
TOPOLOGY_FIELDS = ("spine", "switch", "leaf", "rack")


def _check_entry(path: Path, host: str, entry: Any) -> dict[str, str]:
    if not isinstance(entry, dict):
        raise ConfigError(f'host {host!r}: expected an object like {{"rack": "r1"}}', where=str(path))
    for key, value in entry.items():
        if value is not None and not isinstance(value, str | int):
            raise ConfigError(f"host {host!r}: {key} must be a string", where=str(path))
    return {key: str(value) for key, value in entry.items() if value is not None}


def _parse_inventory(path: Path, text: str) -> Any:
    """The inventory document, by the file's suffix: JSON, TOML ([hosts.<name>] tables) or YAML."""
    suffix = path.suffix.lower()
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML: {exc}", where=str(path)) from exc
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise ConfigError("a YAML inventory needs PyYAML: pip install pyyaml (or write it as JSON or TOML)",
                              where=str(path)) from exc
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"not valid YAML: {str(exc).splitlines()[0]}", where=str(path)) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg} (line {exc.lineno})", where=str(path)) from exc


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
    document = _parse_inventory(path, text)
    hosts = document.get("hosts", {}) if isinstance(document, dict) else None
    if not isinstance(hosts, dict):
        raise ConfigError('expected {"hosts": {"<host>": {"rack": ..., "switch": ...}}}', where=str(path))
    return {str(host): _check_entry(path, str(host), entry) for host, entry in hosts.items()}


def config_inventory(paths: Paths) -> Path:
    """The config directory's inventory: the first of INVENTORY_FILES that exists (inventory.json when none)."""
    return next((paths.config / name for name in INVENTORY_FILES if (paths.config / name).is_file()),
                paths.config / INVENTORY_FILE)


def placements_from_inventory(inventory: dict[str, dict[str, str]], hosts: list[str]) -> list[Placement]:
    """One placement per host, in order, from a loaded inventory (load_inventory): a host listed by its short
    name matches its FQDN too; a host the inventory does not list gets an empty placement."""
    return [_placement(name, inventory.get(name) or inventory.get(name.split(".")[0])) for name in hosts]


def _placement(host: str, entry: dict[str, str] | None) -> Placement:
    if entry is None:
        return Placement(host=host, provider="static")
    known = {*_PLACEMENT_FIELDS, *TOPOLOGY_FIELDS}
    return Placement(
        host=host,
        provider="static",
        **{f: entry.get(f) for f in _PLACEMENT_FIELDS},
        topology=[f"{f}:{entry[f]}" for f in TOPOLOGY_FIELDS if entry.get(f)],
        extra={k: v for k, v in entry.items() if k not in known},
    )


class StaticProvider(Provider):
    """No cloud API: placements come from the inventory file, cases go to the configured desk (the outbox by
    default). `unsupported` is the class's for the outbox; an instance declares its own desk's."""

    name = "static"
    unsupported = {
        Feature.FAULTY_HOST_REPORT: NO_FAULTY_HOST_CHANNEL,
        **OutboxDesk.unsupported,
    }
    sdk_modules = ("httpx",)  # the HTTP desks' client (a dependency of fabricase itself)
    # limits, scale and template: None, the configured desk's (escalate.desk_of names it)

    def __init__(self, paths: Paths, *, now: Callable[[], datetime] | None = None, desk: Desk | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(paths)
        self._now = now or (lambda: datetime.now(UTC))
        self.desk = desk or make_desk(paths, provider_profile(paths, self.name), now=self._now, sleep=sleep)
        # Declared per instance: what the configured desk lacks, before any work starts.
        self.unsupported = {Feature.FAULTY_HOST_REPORT: NO_FAULTY_HOST_CHANNEL, **self.desk.unsupported}

    @property
    def inventory_path(self) -> Path:
        return config_inventory(self.paths)

    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        """Placements from the inventory (a host listed by its short name matches its FQDN too)."""
        return placements_from_inventory(load_inventory(self.inventory_path), [entry["host"] for entry in hosts])

    def case_folder(self, escalation_id: str) -> Path:
        return self.desk.case_folder(escalation_id)

    def plan_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        return self.desk.plan(escalation_id, draft, bundle_path)

    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """File with the desk. Filing again for the same escalation finds the same case (and completes a
        filing that stopped half way) instead of opening a second one."""
        return self.desk.file(escalation_id, draft, bundle_path)

    def find_case(self, escalation_id: str) -> FilingResult | None:
        return self.desk.find(escalation_id)

    def resolve_case(self, case_id: str, note: str | None) -> None:
        self.require(Feature.RESOLVE)
        self.desk.resolve(case_id, note)

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        self.require(Feature.ATTACH)
        self.desk.attach(case_id, files, note)

    def comment(self, case_id: str, text: str) -> None:
        self.require(Feature.COMMENT)
        self.desk.comment(case_id, text)

    def case_status(self, case_id: str) -> CaseStatus:
        self.require(Feature.SYNC)
        return self.desk.status(case_id)

    def reopen_case(self, case_id: str, note: str) -> None:
        self.require(Feature.REOPEN)
        self.desk.reopen(case_id, note)

    def check(self) -> list[CheckResult]:
        """The inventory (readable, how many hosts), then the desk's own checks; files nothing."""
        try:
            hosts = load_inventory(self.inventory_path)
            inventory = CheckResult("inventory", True, f"{len(hosts)} host(s) in {self.inventory_path}" if hosts
                                    else f"none at {self.inventory_path}: placements come from captures only")
        except ConfigError as exc:
            inventory = CheckResult("inventory", False, str(exc))
        return [inventory, CheckResult("desk", True, self.desk.name), *self.desk.check()]
