"""What a collector is: a declaration of files, globs and commands. Collectors do no I/O themselves;
the plan (collectors/plan.py) compiles every enabled collector into one shell script per host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

__all__ = ["CommandSpec", "Collector", "FileSpec"]


@dataclass(frozen=True)
class FileSpec:
    """A path or shell glob to read on the host.

    counter: read again in the second snapshot (a value whose change over the interval matters).
    mode "text" reads with shell builtins, spawning no process per file (sysfs and procfs attributes;
    NUL bytes are not kept); "raw" copies bytes verbatim with `head -c` (binary-safe, one process).
    """

    pattern: str
    counter: bool = False
    cap: int = 64 * 1024
    mode: Literal["text", "raw"] = "text"


@dataclass(frozen=True)
class CommandSpec:
    """A shell command line whose stdout is captured verbatim (stderr kept apart).

    The command runs under `timeout`; its output is cut at `cap` bytes (the item is marked truncated).
    It may use $FC_TMP (a private scratch folder), $FC_ROOT (prefix for host paths: empty on a real host,
    a recorded host tree's folder under --root), $FC_SINCE_S (how far back logs should reach) and
    $FC_SNAPSHOT (0 or 1: which snapshot a counter command runs in).
    """

    name: str
    shell: str
    timeout_s: float = 10.0
    cap: int = 1024 * 1024
    counter: bool = False


class Collector:
    """Subclass, set the class attributes, register in collectors.COLLECTORS. No methods needed."""

    name: ClassVar[str]
    version: ClassVar[int] = 1
    description: ClassVar[str] = ""
    files: ClassVar[tuple[FileSpec, ...]] = ()
    commands: ClassVar[tuple[CommandSpec, ...]] = ()
    # Host paths any of which must exist for the collector to run there (empty: always runs).
    requires_any: ClassVar[tuple[str, ...]] = ()
    # Runs only when asked for by name (or by --perf): it loads the host, it is not just a reading.
    opt_in: ClassVar[bool] = False
