"""Compile collectors into ONE POSIX shell script per host.

The script runs once. It reads every counter (snapshot 0), sleeps the interval, reads the counters again
(snapshot 1), then reads everything else (kept as snapshot 0). Its stdout is a framed stream, documented
in docs/capture-format.md and parsed by collectors/framing.py:

    @@FC1 BEGIN <format> <pid>
    @@FC1 S <snapshot> <epoch> <uptime>          snapshot start (host clocks)
    @@FC1 I <collector> <kind> <snapshot> <rc> <size> <truncated> <t0> <t1> <source>
    <exactly size bytes>\n
    @@FC1 E <snapshot> <epoch> <uptime>          snapshot end
    @@FC1 END

Files read in "text" mode use only shell builtins (no process per file), so a host with thousands of
counter files costs a handful of processes per snapshot.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from fabricase.collectors.base import Collector, CommandSpec, FileSpec

__all__ = [
    "FRAME_MAGIC",
    "STDERR_CAP",
    "CapturePlan",
    "CommandSpec",
    "compile_script",
    "hoist_guards",
]

FRAME_MAGIC = b"@@FC1"
STDERR_CAP = 8192

# Shell helpers shared by every script. Names start with _fc_ to stay out of the commands' way.
_PRELUDE = r"""
LC_ALL=C; export LC_ALL
PATH="$PATH:/usr/sbin:/sbin:/usr/bin:/bin"
umask 077
_fc_tmp="${TMPDIR:-/tmp}/fabricase.$$"
rm -rf "$_fc_tmp" 2>/dev/null; mkdir "$_fc_tmp" || exit 70
FC_TMP="$_fc_tmp"; export FC_TMP
FC_ROOT="$_fc_root"; export FC_ROOT
trap 'rm -rf "$_fc_tmp"' EXIT
trap 'exit 130' INT TERM HUP
if command -v timeout >/dev/null 2>&1; then _fc_has_timeout=1; else _fc_has_timeout=; fi
# A recorded host tree (--root) may carry its own commands and a second-snapshot overlay of changed files.
_fc_s1=
if [ -n "$_fc_root" ]; then
  [ -d "$_fc_root/.fabricase/bin" ] && PATH="$_fc_root/.fabricase/bin:$PATH"
  [ -d "$_fc_root/.fabricase/s1" ] && _fc_s1="$_fc_root/.fabricase/s1"
fi
_fc_up() { _fc_u=-; read -r _fc_u _fc_x 2>/dev/null </proc/uptime || _fc_u=-; }
_fc_mark() {
  _fc_up; _fc_e=$(date +%s.%N 2>/dev/null) || _fc_e=-
  printf '@@FC1 %s %s %s %s\n' "$1" "$2" "${_fc_e:--}" "$_fc_u"
}
_fc_lines() {
  while IFS= read -r _fc_l; do
    _fc_d="$_fc_d$_fc_l
"
    _fc_l=
    if [ "${#_fc_d}" -gt "$_fc_cap" ]; then _fc_tr=1; break; fi
  done
  return 0
}
# _fc_text COLLECTOR SNAPSHOT CAP REALPATH: builtins only.
_fc_text() {
  _fc_d=; _fc_l=; _fc_tr=0; _fc_rc=0; _fc_cap=$3; _fc_p=$4
  if [ -n "$_fc_s1" ] && [ "$2" = 1 ] && [ -e "$_fc_s1${4#"$_fc_root"}" ]; then _fc_p="$_fc_s1${4#"$_fc_root"}"; fi
  if [ -r "$_fc_p" ] && { _fc_lines; } 2>/dev/null <"$_fc_p"; then _fc_d="$_fc_d$_fc_l"; else _fc_rc=1; fi
  printf '@@FC1 I %s file %s %s %s %s - - %s\n' "$1" "$2" "$_fc_rc" "${#_fc_d}" "$_fc_tr" "${4#"$_fc_root"}"
  printf '%s\n' "$_fc_d"
}
# _fc_out COLLECTOR KIND SNAPSHOT RC CAP T0 T1 SOURCE FILE: frame a file's bytes, cut at CAP.
_fc_out() {
  _fc_n=0; _fc_tr=0
  if [ -s "$9" ]; then _fc_n=$(wc -c <"$9" 2>/dev/null) || _fc_n=0; fi
  _fc_n=$((_fc_n + 0))
  if [ "$_fc_n" -gt "$5" ]; then _fc_n=$5; _fc_tr=1; fi
  printf '@@FC1 I %s %s %s %s %s %s %s %s %s\n' "$1" "$2" "$3" "$4" "$_fc_n" "$_fc_tr" "$6" "$7" "$8"
  [ "$_fc_n" -gt 0 ] && head -c "$_fc_n" "$9"
  printf '\n'
}
# _fc_raw COLLECTOR SNAPSHOT CAP REALPATH: verbatim bytes, binary-safe.
_fc_raw() {
  head -c $(($3 + 1)) "$4" >"$_fc_tmp/o" 2>/dev/null; _fc_rc=$?
  _fc_out "$1" file "$2" "$_fc_rc" "$3" - - "${4#"$_fc_root"}" "$_fc_tmp/o"
}
# _fc_skip COLLECTOR SNAPSHOT NAME: the command's tool is absent; an empty item, as the command itself would give.
_fc_skip() { printf '@@FC1 I %s command %s 0 0 0 - - cmd:%s\n\n' "$1" "$2" "$3"; }
# _fc_cmd COLLECTOR SNAPSHOT NAME TIMEOUT CAP SHELL
_fc_cmd() {
  FC_SNAPSHOT=$2; export FC_SNAPSHOT
  _fc_up; _fc_t0=$_fc_u
  {
    if [ -n "$_fc_has_timeout" ]; then timeout -k 2 "$4" sh -c "$6" 2>"$_fc_tmp/e" </dev/null
    else sh -c "$6" 2>"$_fc_tmp/e" </dev/null; fi
    echo $? >"$_fc_tmp/rc"
  } | head -c $(($5 + 1)) >"$_fc_tmp/o"
  _fc_rc=255; read -r _fc_rc <"$_fc_tmp/rc" 2>/dev/null
  _fc_up
  _fc_out "$1" command "$2" "$_fc_rc" "$5" "$_fc_t0" "$_fc_u" "cmd:$3" "$_fc_tmp/o"
  # stderr only when there is some: most commands print none, and each frame costs two processes.
  [ -s "$_fc_tmp/e" ] && _fc_out "$1" stderr "$2" "$_fc_rc" __STDERR_CAP__ "$_fc_t0" "$_fc_u" "cmd:$3" "$_fc_tmp/e"
  return 0
}
""".replace("__STDERR_CAP__", str(STDERR_CAP))


@dataclass(frozen=True)
class CapturePlan:
    collectors: tuple[type[Collector], ...]
    interval_s: float = 5.0
    since_s: int = 24 * 3600
    root: str = ""  # read files under this folder instead of / (tests, golden host trees)
    snapshots: int = 2
    versions: dict[str, int] = field(default_factory=dict)

    def command(self, name: str) -> CommandSpec | None:
        for col in self.collectors:
            for cmd in col.commands:
                if cmd.name == name:
                    return cmd
        return None

    @property
    def collector_versions(self) -> dict[str, int]:
        return {c.name: c.version for c in self.collectors}


def _q(s: str) -> str:
    return shlex.quote(s)


def _file_lines(col: type[Collector], spec: FileSpec, snapshot: int) -> list[str]:
    reader = "_fc_text" if spec.mode == "text" else "_fc_raw"
    pattern = '"$_fc_root"' + _glob_quote(spec.pattern)
    return [
        f"for _fc_f in {pattern}; do",
        '  [ -e "$_fc_f" ] || continue',
        f'  {reader} {col.name} {snapshot} {spec.cap} "$_fc_f"',
        "done",
    ]


_GUARD = re.compile(r"command -v ([A-Za-z0-9_.+-]+) >/dev/null 2>&1 (\|\||&&) exit 0; ")


def hoist_guards(shell: str) -> tuple[list[str], list[str], str]:
    """Split leading `command -v T >/dev/null 2>&1 || exit 0; ` (needs T) and `... && exit 0; ` (unless T)
    guards off a command line, so the script tests them with builtins instead of starting timeout and sh
    for a tool that is not there."""
    needs: list[str] = []
    unless: list[str] = []
    while match := _GUARD.match(shell):
        (needs if match.group(2) == "||" else unless).append(match.group(1))
        shell = shell[match.end():]
    return needs, unless, shell


def _command_line(col: type[Collector], cmd: CommandSpec, snapshot: int) -> str:
    needs, unless, _ = hoist_guards(cmd.shell)
    run = f"_fc_cmd {col.name} {snapshot} {_q(cmd.name)} {cmd.timeout_s:g} {cmd.cap} {_q(cmd.shell)}"
    tests = [f"command -v {t} >/dev/null 2>&1" for t in needs] + [f"! command -v {t} >/dev/null 2>&1"
                                                                   for t in unless]
    if not tests:
        return run
    return f"if {' && '.join(tests)}; then {run}; else _fc_skip {col.name} {snapshot} {_q(cmd.name)}; fi"


def _glob_quote(pattern: str) -> str:
    """Quote a glob for the shell while leaving its wildcards active."""
    out = []
    for ch in pattern:
        out.append(ch if ch.isalnum() or ch in "/._-*?[]:" else "\\" + ch)
    return "".join(out)


def _guard(col: type[Collector]) -> tuple[str, str]:
    if not col.requires_any:
        return "", ""
    tests = " || ".join(f'[ -e "$_fc_root"{_q(p)} ]' for p in col.requires_any)
    return f"if {tests}; then", "fi"


def _block(col: type[Collector], lines: list[str]) -> list[str]:
    if not lines:
        return []
    start, end = _guard(col)
    return ([start] if start else []) + lines + ([end] if end else [])


def _snapshot_lines(plan: CapturePlan, snapshot: int, counters: bool) -> list[str]:
    lines: list[str] = []
    for col in plan.collectors:
        body: list[str] = []
        for spec in col.files:
            if spec.counter == counters:
                body += _file_lines(col, spec, snapshot)
        for cmd in col.commands:
            if cmd.counter == counters:
                body.append(_command_line(col, cmd, snapshot))
        lines += _block(col, body)
    return lines


def compile_script(plan: CapturePlan) -> str:
    """The whole capture as one POSIX sh script (run with `sh -s`, or `sh script`)."""
    out = ["#!/bin/sh", "# fabricase capture script (capture format 1): generated, do not edit"]
    out.append(f"_fc_root={_q(plan.root.rstrip('/'))}")
    out.append(f"FC_SINCE_S={int(plan.since_s)}; export FC_SINCE_S")
    out.append(_PRELUDE.strip("\n"))
    out.append("printf '@@FC1 BEGIN 1 %s\\n' \"$$\"")
    for snap in range(plan.snapshots):
        if snap:
            out.append(f"sleep {plan.interval_s:g} 2>/dev/null")
        out.append(f"_fc_mark S {snap}")
        out += _snapshot_lines(plan, snap, counters=True)
        out.append(f"_fc_mark E {snap}")
    out += _snapshot_lines(plan, 0, counters=False)
    out.append("printf '@@FC1 END\\n'")
    return "\n".join(out) + "\n"
