"""Placements stored in a capture directory (placements.json): where each host sits, so that a bundle
re-analyzed anywhere, without the inventory or the provider's API, still names the switch. Split out of
fabricase.capturedir, which re-exports these names."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from fabricase.atomicfile import replace_bytes
from fabricase.caps import MAX_ITEM_BYTES
from fabricase.capture_records import MissingFile, read_member
from fabricase.errors import CaptureError, ParseError
from fabricase.models import Placement

__all__ = ["PLACEMENTS_FILE", "PLACEMENTS_VERSION", "load_placements", "placements_bytes", "write_placements"]

# Placements: where each host sits (provider, instance, zone, shared switches and racks), stored beside the hosts
# so that a bundle re-analyzed anywhere, without the inventory or the provider's API, still names the switch.

PLACEMENTS_FILE = "placements.json"
PLACEMENTS_VERSION = 1
READABLE_PLACEMENTS_VERSIONS = (1,)
_PLACEMENTS_FORMAT = "fabricase-placements"
_PLACEMENT_TEXT_FIELDS = ("instance_id", "instance_type", "region", "zone", "placement_group", "source")


def placements_bytes(placements: list[Placement]) -> bytes:
    """The placements.json document: one record per host, sorted by host, keys sorted (same placements, same
    bytes, so that bundles stay reproducible)."""
    hosts = [p.host for p in placements]
    if len(set(hosts)) != len(hosts):
        twice = sorted({h for h in hosts if hosts.count(h) > 1})
        raise CaptureError(f"more than one placement for host {twice[0]!r}", where=PLACEMENTS_FILE)
    doc = {
        "format": _PLACEMENTS_FORMAT,
        "format_version": PLACEMENTS_VERSION,
        "placements": [dataclasses.asdict(p) for p in sorted(placements, key=lambda p: p.host)],
    }
    # default=str: a provider's raw `extra` may hold a date or a number type json does not know.
    return (json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_placements(root: Path, placements: list[Placement]) -> Path:
    """Store the placements as root/placements.json. A file that already holds exactly these bytes is left
    alone, so that opening a read-only replay again does not fail."""
    path = root / PLACEMENTS_FILE
    data = placements_bytes(placements)
    try:
        if path.is_file() and path.read_bytes() == data:
            return path
        replace_bytes(path, data)
    except OSError as exc:
        raise CaptureError(f"cannot store placements: {exc.strerror or exc}", where=str(path)) from exc
    return path


def load_placements(root: Path) -> list[Placement] | None:
    """The placements stored in a capture directory; None when it has none. A malformed file is one ParseError
    naming it and what is wrong."""
    path = root / PLACEMENTS_FILE
    try:
        # Like every file of a capture: a plain file inside it (no symlink out, no FIFO), read up to a cap.
        text = read_member(root.resolve(), path, str(path), MAX_ITEM_BYTES).decode("utf-8")
    except MissingFile:
        return None
    except (CaptureError, UnicodeDecodeError) as exc:
        reason = exc.message if isinstance(exc, CaptureError) else str(exc)
        raise ParseError(f"cannot read the placements: {reason}", where=str(path)) from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not valid JSON: {exc.msg} (line {exc.lineno})", where=str(path)) from exc
    except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits; nesting past the parser's stack
        reason = "nested too deep" if isinstance(exc, RecursionError) else "a number of over 4,300 digits"
        raise ParseError(f"not valid JSON: {reason}", where=str(path)) from exc
    return _placements_from_doc(doc, where=str(path))


def _placements_from_doc(doc: Any, *, where: str) -> list[Placement]:
    """Check a placements document (format 1) and read its records; errors name the record at fault."""
    if not isinstance(doc, dict) or doc.get("format") != _PLACEMENTS_FORMAT:
        raise ParseError(f"not a fabricase placements document (format is not {_PLACEMENTS_FORMAT!r})", where=where)
    version = doc.get("format_version")
    if version not in READABLE_PLACEMENTS_VERSIONS:
        readable = ", ".join(map(str, READABLE_PLACEMENTS_VERSIONS))
        raise ParseError(f"placements format {version!r} is not supported (this fabricase reads {readable})",
                         where=where)
    records = doc.get("placements")
    if not isinstance(records, list):
        raise ParseError("'placements' is not a list", where=where)
    placements: list[Placement] = []
    seen: set[str] = set()
    for n, record in enumerate(records):
        placement = _placement_from_record(record, n, where)
        if placement.host in seen:
            raise ParseError(f"host {placement.host!r} is placed twice", where=where)
        seen.add(placement.host)
        placements.append(placement)
    return placements


def _placement_from_record(record: Any, n: int, where: str) -> Placement:
    if not isinstance(record, dict):
        raise ParseError(f"placement #{n} is not an object", where=where)
    host = record.get("host")
    if not isinstance(host, str) or not host:
        raise ParseError(f"placement #{n} has no host name", where=where)
    label = f"placement #{n} ({host[:80]!r})"
    if not isinstance(record.get("provider"), str) or not record["provider"]:
        raise ParseError(f"{label} has no provider", where=where)
    for key in _PLACEMENT_TEXT_FIELDS:
        if not isinstance(record.get(key), str | None):
            raise ParseError(f"{label}: {key} must be a string or null", where=where)
    topology = record.get("topology", [])
    if not isinstance(topology, list) or not all(isinstance(t, str) and t for t in topology):
        raise ParseError(f"{label}: topology must be a list of component names like \"switch:leaf-3\"",
                         where=where)
    extra = record.get("extra", {})
    if not isinstance(extra, dict):
        raise ParseError(f"{label}: extra must be an object", where=where)
    # Fields this version does not know are ignored, as everywhere in the capture format.
    return Placement(host=host, provider=record["provider"], topology=list(topology), extra=dict(extra),
                     **{key: record.get(key) for key in _PLACEMENT_TEXT_FIELDS})
