"""Recorded host trees for golden tests: a folder that stands in for a machine under `--root`.

    <root>/sys/..., <root>/proc/...          files as the host shows them in snapshot 0
    <root>/.fabricase/s1/<path>              a file's content in snapshot 1, where it changed (counters)
    <root>/.fabricase/bin/<command>          a stub that replays a recorded command output
    <root>/.fabricase/out/<command>/<key>    that output; <key> is the arguments joined by "_" ("_" for none),
                                             with "/" and " " turned into "_"; <key>.rc holds a non-zero status
    <root>/.fabricase/out/<command>/<key>@s1 the output in snapshot 1 (a counter command whose numbers moved);
                                             the script exports FC_SNAPSHOT to every command

The compiled capture script puts .fabricase/bin first on PATH and reads the s1 overlay in snapshot 1, so a
tree runs through the real script, the real framing and the real parsers.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

__all__ = ["command_key", "record_command", "write_file", "write_s1"]

_STUB = """#!/bin/sh
# Replays a recorded output of {name} (tests/hosttrees). Builtins only, but for the one `cat`.
d="${{0%/*}}/../out/{name}"
key=
for a in "$@"; do key="$key$a "; done
key=${{key% }}
[ -n "$key" ] || key=_
out=
while [ -n "$key" ]; do
  c=${{key%"${{key#?}}"}}
  key=${{key#?}}
  case $c in " "|/) c=_ ;; esac
  out="$out$c"
done
key=$out
if [ "${{FC_SNAPSHOT:-0}}" = 1 ] && [ -f "$d/$key@s1" ]; then key="$key@s1"; fi
if [ -f "$d/$key" ]; then
  cat "$d/$key"
  rc=0
  [ -f "$d/$key.rc" ] && read -r rc <"$d/$key.rc"
  exit "$rc"
fi
echo "{name}: no recorded output for: $*" >&2
exit 1
"""

def command_key(args: tuple[str, ...] | list[str]) -> str:
    key = "_".join(args) or "_"
    return re.sub(r"[/ ]", "_", key)


def write_file(root: Path, path: str, content: str | bytes) -> Path:
    """Write `content` at host path `path` (absolute, e.g. /sys/class/net/eth0/mtu) under root."""
    dest = root / path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        dest.write_text(content)
    else:
        dest.write_bytes(content)
    return dest


def write_s1(root: Path, path: str, content: str | bytes) -> Path:
    """The content `path` shows in the second snapshot (a counter that moved during the interval)."""
    return write_file(root / ".fabricase" / "s1", path, content)


def record_command(root: Path, name: str, args: tuple[str, ...] | list[str], output: str | bytes,
                   rc: int = 0, snapshot: int | None = None) -> None:
    """Make `name args...` print `output` (and exit rc) when the capture script runs it under this root.

    snapshot=1 records what the command prints in the second snapshot only (its first-snapshot output is
    the one recorded without a snapshot)."""
    stub = root / ".fabricase" / "bin" / name
    if not stub.exists():
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(_STUB.format(name=name))
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    out = root / ".fabricase" / "out" / name / (command_key(args) + ("@s1" if snapshot == 1 else ""))
    out.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(output, str):
        out.write_text(output)
    else:
        out.write_bytes(output)
    if rc:
        out.with_name(out.name + ".rc").write_text(str(rc))


def read_as_if_apart(hc, seconds: float = 5.0):
    """The capture as if its two snapshots were `seconds` apart on the host's clocks: a tree's counters move as
    much as that many seconds of traffic would, but the capture runs in a tenth of a second, and a rate above
    line rate is now read as implausible (analysis/rates.py), not as traffic."""
    by_index = {s.index: s for s in hc.snapshots}
    s0, s1 = by_index.get(0), by_index.get(1)
    if s0 is not None and s1 is not None:
        if s0.uptime_start is not None:
            s1.uptime_start = s0.uptime_start + seconds
            s1.uptime_end = s1.uptime_start + 0.01
        if s0.epoch is not None:
            s1.epoch = s0.epoch + seconds
    return hc
