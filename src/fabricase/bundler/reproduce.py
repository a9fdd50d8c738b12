"""`reproduce.sh` and `capture-script.sh`: the commands that capture the same evidence again, for the bundle.

reproduce.sh runs `fabricase collect` with the capture's targets (nodeset, or Slurm job), transport,
collectors, interval, log window and NCCL logs, all read from capture.json. Where fabricase is not
installed it runs capture-script.sh, the very script the collectors compile to (collectors/plan.py), on
each host over ssh and keeps each host's capture stream (docs/capture-format.md, "The capture stream").

capture.json comes from anywhere a bundle does: every value lands in the script shell-quoted, host names are
checked as `--hosts` checks them, and comments carry printable text only.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from fabricase.collectors import COLLECTORS, select_collectors
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.errors import BundleError, TargetError
from fabricase.models import Capture

__all__ = ["CAPTURE_SCRIPT_NAME", "REPRODUCE_NAME", "capture_plan", "capture_script", "reproduce_script"]

REPRODUCE_NAME = "reproduce.sh"
CAPTURE_SCRIPT_NAME = "capture-script.sh"
DEFAULT_SINCE_S = 24 * 3600  # `fabricase collect --since` default (24 h)
_VIAS = ("local", "ssh", "slurm")  # what `--via` takes; other transports (fake, harness) are not for people
_PER_LINE = 6  # host names per line of the fallback's host list
_REDACTED = "[REDACTED:"  # redact.secrets.marker: a value taken out of capture.json


def _meta(capture: Capture | Mapping[str, Any]) -> dict[str, Any]:
    """capture.json's fields, from the document itself or from a loaded Capture."""
    if isinstance(capture, Mapping):
        return dict(capture)
    return {
        "created_at": capture.created_at,
        "tool_version": capture.tool_version,
        "interval_s": capture.interval_s,
        "collectors": capture.collectors,
        "targets": capture.targets,
        "hosts": [h.host for h in capture.hosts],
        "inputs": [vars(i) for i in capture.inputs],
    }


def _comment(text: Any, limit: int = 200) -> str:
    """Printable, one line: a capture.json value shown in a comment must not end the comment."""
    line = "".join(ch if ch.isprintable() else "?" for ch in " ".join(str(text).split()))
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _number(meta: Mapping[str, Any], key: str, default: float | None) -> float | None:
    value = meta.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise BundleError(f"capture.json: {key} is not a number of seconds: {value!r:.60}")
    return float(value)


def capture_plan(capture: Capture | Mapping[str, Any]) -> CapturePlan:
    """The plan that captured: the collectors capture.json names (those this fabricase knows), its interval and
    log window (the default when capture.json does not record one)."""
    meta = _meta(capture)
    names = [n for n in (meta.get("collectors") or {}) if n in COLLECTORS]
    collectors = select_collectors(names) if names else select_collectors()
    since = _number(meta, "since_s", DEFAULT_SINCE_S)
    return CapturePlan(collectors=tuple(collectors), interval_s=_number(meta, "interval_s", 0.0) or 0.0,
                       since_s=int(since if since is not None else DEFAULT_SINCE_S))


# Both are on purpose in the compiled script: a `for` over one path is how a literal path and a glob share one
# reader, and commands are passed to `sh -c` in single quotes to expand on the host, not here.
_SHELLCHECK = "# shellcheck disable=SC2043,SC2016"


def capture_script(capture: Capture | Mapping[str, Any]) -> str:
    """capture-script.sh: the per-host capture script of the capture's plan, run with `sh -s` on each host."""
    shebang, _, rest = compile_script(capture_plan(capture)).partition("\n")
    return f"{shebang}\n{_SHELLCHECK}\n{rest}"


def _targets(meta: Mapping[str, Any]) -> tuple[list[tuple[str, ...]], list[str], str | None]:
    """(`fabricase collect` target options, hosts they name, a note) from capture.json's `targets`."""
    from fabricase.slurm import validate_job_id
    from fabricase.targets import parse_nodeset

    targets = meta.get("targets") if isinstance(meta.get("targets"), Mapping) else {}
    listed = targets.get("hosts") or meta.get("hosts") or []
    if not isinstance(listed, list) or not all(isinstance(h, str) for h in listed):
        raise BundleError("capture.json: hosts is not a list of host names")
    nodeset = targets.get("nodeset") if isinstance(targets.get("nodeset"), str) else None
    if nodeset is not None and nodeset.startswith(_REDACTED):
        nodeset = None  # a pseudonymized bundle of an earlier fabricase dropped it: its host list stands for it
    try:
        hosts = parse_nodeset(nodeset or _folded(listed)) if (nodeset or listed) else []
        job = validate_job_id(str(targets["job"])) if targets.get("job") else None
    except TargetError as exc:
        raise BundleError(f"capture.json: {exc.message}") from exc
    if not hosts:
        raise BundleError("capture.json names no host: there is nothing to capture again")
    if job is not None:
        return [("--job", job)], hosts, f"Slurm job {job} on {_folded(hosts)}; once it has ended, --job reaches " \
                                      "the same nodes over ssh (or give --hosts with the nodeset above)"
    note = None if nodeset or "nodeset" in targets else f"capture.json names its targets {_comment(targets, 80)}"
    return [("--hosts", nodeset or _folded(hosts))], hosts, note


def _folded(hosts: list[str]) -> str:
    """The hosts as a node set: folded (`gpu[001-004]`), or listed when they are pseudonyms, whose random hex
    would fold into nonsense (`host-1a2b[3-4]c`)."""
    from fabricase.redact.pseudonyms import TOKEN
    from fabricase.templates import hostlist

    if any(TOKEN.fullmatch(h) for h in hosts):
        return ",".join(sorted(hosts))
    return hostlist(hosts)


def _collector_options(meta: Mapping[str, Any]) -> tuple[list[tuple[str, ...]], list[str]]:
    """(`--collector`/`--perf` options, comments on collectors that changed or are unknown here)."""
    recorded = meta.get("collectors") or {}
    if not isinstance(recorded, Mapping):
        raise BundleError("capture.json: collectors is not a {name: version} object")
    notes = []
    for name, version in recorded.items():
        if name not in COLLECTORS:
            notes.append(f"collector {_comment(name, 40)} (version {_comment(version, 10)}) is unknown to this "
                         "fabricase: not run")
        elif COLLECTORS[name].version != version:
            notes.append(f"collector {name} was version {_comment(version, 10)} at capture, is "
                         f"{COLLECTORS[name].version} here: its commands may differ")
    names = [c.name for c in select_collectors([n for n in recorded if n in COLLECTORS])] if recorded else []
    default = [c.name for c in select_collectors()]
    if not names or names == default:
        return [], notes
    if [n for n in names if n != "perf"] == default:
        return [("--perf",)], notes
    return [("--collector", n) for n in names], notes


def _via(meta: Mapping[str, Any]) -> str | None:
    targets = meta.get("targets")
    via = targets.get("via") if isinstance(targets, Mapping) else None
    return via if via in _VIAS else None


def _collect_args(meta: Mapping[str, Any]) -> tuple[list[tuple[str, ...]], list[str], list[str]]:
    """(options of `fabricase collect`, each with its value; the hosts; comments)."""
    args, hosts, note = _targets(meta)
    comments = [note] if note else []
    via = _via(meta)
    if via is not None:
        args.append(("--via", via))
    interval = _number(meta, "interval_s", None)
    if interval is not None:
        args.append(("--interval", f"{interval:g}"))
    since = _number(meta, "since_s", None)
    if since is None:
        comments.append("capture.json does not record the kernel-log window (--since): fabricase's default applies")
    else:
        args.append(("--since", f"{since / 3600:g}"))
    options, notes = _collector_options(meta)
    args += options
    comments += notes
    for item in meta.get("inputs") or []:
        if isinstance(item, Mapping) and item.get("kind") == "nccl-log" and isinstance(item.get("source"), str):
            args.append(("--nccl-log", item["source"]))
    return args, hosts, comments


def _continued(words: list[str], indent: str) -> str:
    """Shell words, quoted, several to a line, lines joined with backslashes."""
    quoted = [shlex.quote(w) for w in words]
    lines = [" ".join(quoted[i : i + _PER_LINE]) for i in range(0, len(quoted), _PER_LINE)]
    return (" \\\n" + indent).join(lines)


def reproduce_script(capture: Capture | Mapping[str, Any]) -> str:
    """reproduce.sh for the bundle of `capture` (a loaded Capture or capture.json's document). POSIX sh."""
    meta = _meta(capture)
    args, hosts, comments = _collect_args(meta)
    pairs = [" ".join(shlex.quote(word) for word in option) for option in args]
    command = " \\\n    ".join(["fabricase collect", *pairs, '-o "$out"'])
    run = 'ssh -o BatchMode=yes -- "$host" sh -s <"$here/capture-script.sh"'
    if _via(meta) == "local":
        run = 'sh "$here/capture-script.sh"'
    lines = [
        "#!/bin/sh",
        "# reproduce.sh: capture the same evidence again (generated by fabricase from the bundle's capture.json).",
        f"# The capture: {_comment(meta.get('created_at', '?'), 40)}, {len(hosts)} host(s), "
        f"fabricase {_comment(meta.get('tool_version') or '?', 40)}.",
        "#",
        "# Usage: sh reproduce.sh [OUTPUT_DIR]",
        "#   With fabricase installed, runs `fabricase collect` with the capture's targets and options.",
        "#   Without it (or with FABRICASE_NO_TOOL=1), runs capture-script.sh, which lies beside this file in the",
        "#   bundle, on each host (over ssh) and keeps each host's capture stream as OUTPUT_DIR/<host>.fc1.",
        *[f"# Note: {_comment(c)}" for c in comments],
        "set -u",
        'here=$(CDPATH="" cd -- "$(dirname -- "$0")" && pwd) || exit 1',
        'out=${1:-reproduce-$(date -u +%Y%m%dT%H%M%SZ)}',
        "",
        'if [ -z "${FABRICASE_NO_TOOL:-}" ] && command -v fabricase >/dev/null 2>&1; then',
        f"  exec {command}",
        "fi",
        "",
        "# Without fabricase: the same per-host commands, one host at a time.",
        'if [ ! -r "$here/capture-script.sh" ]; then',
        '  echo "reproduce.sh: $here/capture-script.sh not found (it is in the bundle beside this file)" >&2',
        "  exit 1",
        "fi",
        'mkdir -p -- "$out" || exit 1',
        "status=0",
        "# shellcheck disable=SC2043  # one host is a list of one",
        "for host in \\",
        "  " + _continued(hosts, "  "),
        "do",
        '  echo "reproduce.sh: capturing $host" >&2',
        f'  if {run} >"$out/$host.fc1" 2>"$out/$host.stderr"; then',
        "    :",
        "  else",
        '    echo "reproduce.sh: $host: the capture exited $?" >&2',
        "    status=1",
        "  fi",
        "done",
        'echo "reproduce.sh: capture streams in $out" >&2',
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"
