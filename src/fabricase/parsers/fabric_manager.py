"""NVIDIA Fabric Manager: its log (`/var/log/fabricmanager.log`, the same format as the IMEX daemon's log) and
its service state (`systemctl is-active nvidia-fabricmanager`, `nv-fabricmanager --version`)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from fabricase.parsers.nvidia_smi import normalize_pci

__all__ = ["DaemonLog", "FabricManagerState", "LogEvent", "parse_daemon_log", "parse_fabric_manager_log",
           "parse_fabric_manager_state", "split_sections"]  # fmt: skip

# "[Jul 23 2024 07:53:55] [ERROR] [tid 841] message"; the tid is missing on some lines.
_ENTRY = re.compile(r"\[(?P<ts>[A-Z][a-z]{2} +\d{1,2} \d{4} \d{2}:\d{2}:\d{2})\] \[(?P<level>[A-Z]+)\]"
                    r"(?: \[tid \d+\])? ?(?P<msg>.*)")  # fmt: skip
_SWITCH_ERROR = re.compile(
    r"detected NVSwitch (?P<sev>non-fatal|fatal) error (?P<code>[0-9]{1,10}) on fid [0-9]+ on NVSwitch pci bus id "
    r"(?P<pci>\S+) physical id (?P<phys>[0-9]{1,10}) port (?P<port>[0-9]{1,10})\b", re.I)  # fmt: skip
# "A.*B" is written "^(?>.*?A).*B": the atomic group settles on the first A, so a line holding A many times is
# scanned once, not once per A (quadratic).
_KINDS = (
    (re.compile(r"don't match with any supported system topology|topology mismatch", re.I), "topology-mismatch"),
    (re.compile(r"^(?>.*?failed to find the GPU handle ).* multicast team", re.I), "multicast-failure"),
    (re.compile(r"is running with the following configuration options", re.I), "started"),
    (re.compile(r"NVSwitch driver failed|NV_WARN_NOTHING_TO_DO", re.I), "driver-error"),
    (re.compile(r"training|trunk link|^(?>.*?access link).*(?:fail|down)", re.I), "link-error"),
)
# Any of them: most entries match none, and one search of the union tells so (then each is tried, in order).
_ANY_KIND = re.compile("|".join(f"(?:{pattern.pattern})" for pattern, _ in _KINDS), re.I)
# The literals each kind's pattern needs, lower case (one of them is in every line it matches): an ASCII entry
# holding none matches no kind. One `in` each is a tenth of the union's search, which tries every branch at every
# character (bench_fleet's HGX host: 274 entries, 4.9 ms). A non-ASCII entry is searched with the union: re.I
# folds more than lower() does. A kind added to _KINDS without its words here fails at import (KeyError).
_WORDS_OF_KIND = {
    "topology-mismatch": ("topology",), "multicast-failure": ("failed to find the gpu handle ",),
    "started": ("is running with the following configuration",),
    "driver-error": ("nvswitch driver failed", "nv_warn_nothing_to_do"),
    "link-error": ("training", "trunk link", "access link"),
}  # fmt: skip
_KIND_WORDS = tuple(word for _, name in _KINDS for word in _WORDS_OF_KIND[name])
# One optional colon between two runs of spaces: `\s*:?\s*` would split a long run of spaces every way.
_VERSION = re.compile(r"version(?: is)?\s*(?::\s*)?(?P<v>[0-9]+(?:\.[0-9]+)+)", re.I)


def _may_have_kind(msg: str) -> bool:
    if not msg.isascii():
        return _ANY_KIND.search(msg) is not None
    low = msg.lower()
    return any(word in low for word in _KIND_WORDS)

@dataclass(frozen=True)
class LogEvent:
    """One log entry at WARNING/ERROR level, or a daemon start. kind: "nvswitch-error", "topology-mismatch",
    "multicast-failure", "driver-error", "link-error", "started" or "error" (another ERROR/WARNING line)."""

    timestamp: str
    level: str
    message: str
    kind: str
    line: int
    nvswitch: str | None = None  # PCI address of the switch, normalized ("0000:86:00.0")
    physical_id: int | None = None
    port: int | None = None
    code: int | None = None  # the SXid the daemon reports
    fatal: bool | None = None


@dataclass
class DaemonLog:
    events: list[LogEvent] = field(default_factory=list)
    levels: Counter = field(default_factory=Counter)  # entries per level
    total_lines: int = 0
    version: str | None = None  # from the last "<daemon> version X is running" line


def _event(ts: str, level: str, msg: str, line: int) -> LogEvent | None:
    match = _SWITCH_ERROR.search(msg)
    if match:
        return LogEvent(ts, level, msg, "nvswitch-error", line, normalize_pci(match.group("pci")),
                        int(match.group("phys")), int(match.group("port")), int(match.group("code")),
                        match.group("sev").lower() == "fatal")  # fmt: skip
    kind = next((name for pattern, name in _KINDS if pattern.search(msg)), None) if _may_have_kind(msg) else None
    if kind is None and level in ("ERROR", "WARNING", "WARN", "FATAL", "CRITICAL"):
        kind = "error"
    return LogEvent(ts, level, msg, kind, line) if kind else None


def parse_daemon_log(text: str | None) -> DaemonLog:
    """Fabric Manager or IMEX log -> its warning/error events and start lines. Never raises; continuation
    lines (multi-line messages) belong to the entry above them and are not events."""
    log = DaemonLog()
    for number, line in enumerate((text or "").splitlines(), start=1):
        log.total_lines += 1
        entry = _ENTRY.match(line.strip())
        if not entry:
            continue
        log.levels[entry.group("level")] += 1
        event = _event(entry.group("ts"), entry.group("level"), entry.group("msg").strip(), number)
        if event is None:
            continue
        if event.kind == "started" and (version := _VERSION.search(event.message)):
            log.version = version.group("v")
        log.events.append(event)
    return log


parse_fabric_manager_log = parse_daemon_log


@dataclass
class FabricManagerState:
    active: str | None = None  # systemctl is-active: active, inactive, failed, activating, ...
    version: str | None = None
    errors: list[str] = field(default_factory=list)


def split_sections(text: str | None) -> dict[str, str]:
    """The output of a command that prints `### <what>` before each part -> {what: part}."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in (text or "").splitlines():
        if line.startswith("### "):
            current = sections.setdefault(line[4:].strip(), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def parse_fabric_manager_state(text: str | None) -> FabricManagerState:
    """The `fabric-manager` command's output: `### systemctl is-active nvidia-fabricmanager` and
    `### nv-fabricmanager --version` sections."""
    state = FabricManagerState()
    for name, body in split_sections(text).items():
        words = body.split()
        if name.startswith("systemctl"):
            if len(words) == 1 and re.fullmatch(r"[a-z-]+", words[0]):
                state.active = words[0]
            elif words:
                state.errors.append(f"systemctl: {body.strip()[:120]}")
        elif "version" in name and (version := _VERSION.search(body)):
            state.version = version.group("v")
    return state
