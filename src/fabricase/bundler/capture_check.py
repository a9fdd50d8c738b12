"""The manifest against the bundle's own content: its command list against the bundled index, and its bytes
against the form the builder writes.

MANIFEST.json's `capture` record (the collectors, and every command of every host with its exit code and
truncation) is derived from capture/capture.json and capture/hosts/*/index.json by archive.capture_record_of.
`verify` derives it again from the bundled files and names each difference: a command listed and not in the
index, one in the index and not listed, and a different exit code or truncation. And since the bundle id is the
manifest's sha256, the manifest must be byte for byte what `manifest_bytes` writes for what it lists: a
re-indented manifest, an added key or a reordered listing gives another bundle id for the same members.
"""

from __future__ import annotations

import json
from typing import Any

from fabricase.bundler.archive import (
    CAPTURE_PREFIX,
    capture_record_of,
    manifest_bytes,
)
from fabricase.bundler.members import shown
from fabricase.bundler.summary_form import SUMMARY_KEY

__all__ = ["CAPTURE_JSON", "capture_problems", "form_problem", "index_host"]

CAPTURE_JSON = CAPTURE_PREFIX + "capture.json"
_INDEX_HEAD, _INDEX_TAIL = CAPTURE_PREFIX + "hosts/", "/index.json"


_INDEX_TAILS = (_INDEX_TAIL, "/index.fci")  # format 2's JSON index, format 3's binary one


def index_host(name: str) -> str | None:
    """The host whose index `name` is (`capture/hosts/<host>/index.json` or `.../index.fci`), else None."""
    if name.startswith(_INDEX_HEAD):
        for tail in _INDEX_TAILS:
            if name.endswith(tail):
                host = name[len(_INDEX_HEAD): -len(tail)]
                return host if host and "/" not in host else None
    return None


def _index_name(host: str) -> str:
    return shown(f"{_INDEX_HEAD}{host}{_INDEX_TAIL}")


class _Listed:
    """A manifest member entry seen as the builder's members are (name, size, sha256)."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.name, self.size, self.sha256 = entry["path"], entry["size"], entry["sha256"]


def form_problem(raw: bytes, manifest: dict[str, Any]) -> str | None:
    """A problem when MANIFEST.json is not byte for byte the manifest the builder writes for what it lists."""
    written = manifest_bytes([_Listed(m) for m in manifest["members"]], manifest.get("capture_format_version"),
                             manifest.get("capture"), manifest.get("summary"))
    if written == raw:
        return None
    return "manifest: MANIFEST.json is not in the form fabricase writes (a key, the order or the spacing differs)"


def capture_problems(manifest: dict[str, Any], capture_doc: dict[str, Any] | str | None,
                     indexes: dict[str, list[dict[str, Any]] | str]) -> list[str]:
    """What differs between the manifest's `capture` record (and capture_format_version) and the bundled
    capture.json and index files.
    `capture_doc`: None when the bundle has no capture.json, a reason when it is unreadable; `indexes`: each
    host's command list (archive.index_commands), or why its index is unreadable."""
    listed = manifest.get("capture")
    if isinstance(capture_doc, str):
        return [f"capture: {CAPTURE_JSON} is unreadable ({capture_doc})"]
    if capture_doc is None:
        if listed is not None:
            return [f"commands: the manifest lists the capture's commands, but the bundle has no {CAPTURE_JSON}"]
        return []
    problems = [f"commands: {_index_name(h)} is unreadable ({why})" for h, why in sorted(indexes.items())
                if isinstance(why, str)]
    if not _same(manifest.get("summary"), capture_doc.get(SUMMARY_KEY)):
        problems.append(f"summary: the manifest's summary-bundle record is not the one {CAPTURE_JSON} carries")
    ran = {h: c for h, c in indexes.items() if not isinstance(c, str)}
    expected = capture_record_of(capture_doc, ran)
    if manifest.get("capture_format_version") != capture_doc.get("format_version"):
        problems.append(f"capture: the manifest's capture_format_version {manifest.get('capture_format_version')!r}"
                        f" is not {CAPTURE_JSON}'s {capture_doc.get('format_version')!r}")
    if not isinstance(listed, dict):
        return [*problems, "commands: the manifest does not list the capture's commands"]
    if not _same(listed.get("collectors"), expected["collectors"]):
        problems.append(f"capture: the manifest's collectors are not those {CAPTURE_JSON} records")
    commands = listed.get("commands")
    if not isinstance(commands, dict):
        return [*problems, "commands: the manifest's command list is not a mapping of hosts"]
    diffs = _command_problems(commands, expected["commands"], set(ran) | {h for h in indexes if h not in ran})
    if not diffs and (not _same(commands, expected["commands"]) or set(listed) != {"collectors", "commands"}):
        diffs = ["commands: the manifest's command list is not in the form fabricase writes"]
    return problems + diffs


def _same(a: Any, b: Any) -> bool:
    # as JSON, so that true is not 1 and 1.0 is not 1, as they are in Python
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _key(entry: Any) -> str:
    if isinstance(entry, dict):
        return json.dumps([entry.get("command"), entry.get("snapshot")], sort_keys=True)
    return json.dumps(["(malformed)", entry], sort_keys=True, default=str)


def _label(host: str, key: str) -> str:
    command, snapshot = json.loads(key)
    return f"{shown(host)} {shown(str(command))} (snapshot {shown(str(snapshot))})"


def _command_problems(listed: dict[str, Any], ran: dict[str, list[dict[str, Any]]], indexed: set[str]) -> list[str]:
    problems = []
    for host in sorted(set(listed) | set(ran), key=str):
        entries = listed.get(host)
        if not isinstance(entries, list):
            problems.append(f"commands: the manifest's entry for {shown(str(host))} is not a list")
            continue
        want: dict[str, Any] = {}
        for entry in entries:
            key = _key(entry)
            if key in want:
                problems.append(f"commands: {_label(host, key)} is listed twice")
            want[key] = entry
        have = {_key(c): c for c in ran.get(host, [])}
        where = _index_name(host) if host in indexed else f"the bundle (no {_index_name(host)})"
        for key in sorted(want.keys() | have.keys()):
            w, h = want.get(key), have.get(key)
            if h is None:
                problems.append(f"commands: {_label(host, key)} is listed in the manifest but not in {where}")
            elif w is None:
                problems.append(f"commands: {_label(host, key)} ran ({_index_name(host)}) but is not in the manifest")
            else:
                for field in ("rc", "truncated"):
                    if not _same(w.get(field), h.get(field)):
                        problems.append(f"commands: {_label(host, key)}: {field} {shown(repr(h.get(field)))} in the"
                                        f" index, the manifest says {shown(repr(w.get(field)))}")
    return problems
