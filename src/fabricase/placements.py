"""Where the hosts of a capture sit (switches, racks, network nodes, blocks): placements from the provider or an
inventory, merged with those stored in the capture (placements.json), and the topology analysis reads."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fabricase.capturedir import (
    PLACEMENTS_FILE,
    load_placements,
    write_placements,
)
from fabricase.config import Paths
from fabricase.errors import (
    CaptureError,
    ConfigError,
    ParseError,
)
from fabricase.models import (
    Capture,
    Placement,
)

if TYPE_CHECKING:
    pass


__all__ = [
    "TopologySource",
    "inventory_placements",
    "merge_placements",
    "resolve_placements",
    "store_placements",
    "topology_of",
]

def topology_of(placements: list[Placement]) -> dict[str, list[str]]:
    """host -> the shared components the provider (or the static inventory) puts it under."""
    return {p.host: list(p.topology) for p in placements if p.topology}


def _says_anything(p: Placement) -> bool:
    return bool(p.topology or p.extra or any((p.instance_id, p.instance_type, p.region, p.zone, p.placement_group)))


def merge_placements(stored: list[Placement], new: list[Placement]) -> list[Placement]:
    """Per host, the new placement when it says anything about the host, else the stored one; sorted by host.
    A provider or inventory that knows nothing of a host never erases what an earlier source recorded."""
    merged = {p.host: p for p in stored}
    for p in new:
        if p.host not in merged or _says_anything(p):
            merged[p.host] = p
    return [merged[host] for host in sorted(merged)]


def inventory_placements(file: Path, hosts: list[str]) -> list[Placement]:
    """The hosts' placements in a static inventory file, matched as the static provider matches them (a host
    listed by its short name matches its FQDN). A missing or malformed file is a ConfigError naming it."""
    from fabricase.providers.static import load_inventory, placements_from_inventory

    if not file.is_file():
        raise ConfigError("inventory file not found", where=str(file))
    source = f"inventory:{os.path.abspath(file)}"
    located = placements_from_inventory(load_inventory(file), hosts)
    return [dataclasses.replace(p, source=source) for p in located]


@dataclass(frozen=True)
class TopologySource:
    """Where an analysis took the hosts' placements (so their switches, racks, network nodes) from."""

    origin: str  # "inventory" (--inventory), "capture" (its placements.json), "config-inventory", "none"
    path: str | None  # the file read
    hosts: int  # hosts in the capture
    placed: int  # of those, hosts under at least one shared component
    sources: dict[str, int] = field(default_factory=dict)  # placed hosts per placement source
    stored_in: str | None = None  # the placements.json this command wrote
    warning: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line for people: how many hosts are placed, and from where."""
        if self.origin == "none":
            return ("Topology: none (no --inventory, no placements.json in the capture, no inventory.json in the "
                    "config directory): a shared switch cannot be named")
        where = {
            "inventory": f"--inventory {self.path}",
            "capture": "the capture's placements.json" + (f" ({', '.join(self.sources)})" if self.sources else ""),
            "config-inventory": f"{self.path} (config directory)",
        }[self.origin]
        line = f"Topology: {self.placed} of {self.hosts} host(s) placed, from {where}"
        if not self.placed:
            line += ": a shared switch cannot be named"
        return line + (f"; stored in {self.stored_in}" if self.stored_in else "")


def _topology_source(origin: str, path: Path | None, capture: Capture, placements: list[Placement],
                     warning: str | None = None) -> TopologySource:
    names = {h.host for h in capture.hosts}
    placed = [p for p in placements if p.host in names and p.topology]
    sources: dict[str, int] = {}
    for p in placed:
        key = p.source or f"provider:{p.provider}"
        sources[key] = sources.get(key, 0) + 1
    return TopologySource(origin=origin, path=str(path) if path else None, hosts=len(names), placed=len(placed),
                          sources=dict(sorted(sources.items())), warning=warning)


def resolve_placements(capture: Capture, inventory: Path | None = None,
                       paths: Paths | None = None) -> tuple[list[Placement], TopologySource]:
    """The placements an analysis uses, and where they came from: `inventory` (over the stored ones, host by
    host), else the capture's placements.json when it places a host, else the config directory's
    inventory.json, else none. A malformed placements.json is a ParseError, unless `inventory` replaces it."""
    from fabricase.providers.static import INVENTORY_FILE

    hosts = [h.host for h in capture.hosts]
    if inventory is not None:
        try:
            stored, warning = load_placements(capture.root) or [], None
        except ParseError as exc:
            stored, warning = [], f"{exc} (ignored: --inventory replaces it)"
        placements = merge_placements(stored, inventory_placements(inventory, hosts))
        return placements, _topology_source("inventory", inventory, capture, placements, warning)
    try:
        stored = load_placements(capture.root)
    except ParseError as exc:
        raise ParseError(f"{exc.message}; fix or remove it, or give --inventory FILE", where=exc.where) from exc
    stored_path = capture.root / PLACEMENTS_FILE
    captured = set(hosts)
    if stored is not None and any(p.topology for p in stored if p.host in captured):
        return stored, _topology_source("capture", stored_path, capture, stored)
    config_file = paths.config / INVENTORY_FILE if paths else None
    if config_file is not None and config_file.is_file():
        placements = merge_placements(stored or [], inventory_placements(config_file, hosts))
        return placements, _topology_source("config-inventory", config_file, capture, placements)
    if stored is not None:
        return stored, _topology_source("capture", stored_path, capture, stored)
    return [], _topology_source("none", None, capture, [])


def store_placements(capture: Capture, placements: list[Placement], source: TopologySource) -> TopologySource:
    """Write the placements into the capture directory; a failure becomes the report's warning, because the
    analysis itself does not need the file."""
    try:
        return dataclasses.replace(source, stored_in=str(write_placements(capture.root, placements)))
    except CaptureError as exc:
        warning = "; ".join(w for w in (source.warning, f"placements not stored: {exc}") if w)
        return dataclasses.replace(source, warning=warning)
