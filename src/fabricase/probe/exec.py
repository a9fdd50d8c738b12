"""Run one probe command on one host and get its output back: the probe's way to a host, over the same means
the capture uses (ssh with the user's ssh config and --ssh-option values, this machine, or `srun` inside a job).

Every command runs on the host as

    FABRICASE_PROBE=<tag> timeout -k 5 <limit> <argv...>

so that (1) nothing outlives its own time limit on the host, even when the connection to it is lost, and (2)
every process it started carries the tag in its environment: `sweep(host, tag)` finds them by /proc/*/environ,
kills them and says what it found (a probe must leave nothing running). PATH on the host is prefixed with the
probe's tools path when one is given (nccl-tests is often built outside PATH).

`start` never blocks and never raises for the host: a command that cannot start comes back as a finished
`Running` with status failed and the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from fabricase.transports.ssh import normalize_ssh_options, ssh_command

__all__ = [
    "KILL_GRACE_S",
    "TAG_VAR",
    "Exec",
    "LocalExec",
    "Outcome",
    "Running",
    "SshExec",
    "remote_script",
    "sweep_script",
]

TAG_VAR = "FABRICASE_PROBE"
_TAG = re.compile(r"[A-Za-z0-9._-]{1,80}")
KILL_GRACE_S = 5
MAX_OUTPUT = 16 << 20  # one test's output; a perf tool prints kilobytes


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def remote_script(argv: Sequence[str], *, tag: str, limit_s: float, env: Mapping[str, str] | None = None,
                  tools_path: str | None = None) -> str:
    """The sh command line that runs argv on a host under the tag and a hard limit (see the module doc)."""
    if not _TAG.fullmatch(tag):
        raise ValueError(f"invalid probe tag: {tag!r}")
    assigns = [f"{TAG_VAR}={tag}"]
    for key, value in (env or {}).items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"invalid environment variable: {key!r}")
        assigns.append(f"{key}={shlex.quote(value)}")
    path = f'PATH={shlex.quote(tools_path)}:"$PATH" ' if tools_path else ""
    limit = max(1, round(limit_s))
    return (f"{path}env {' '.join(assigns)} timeout -k {KILL_GRACE_S} {limit} "
            + " ".join(shlex.quote(a) for a in argv))


def sweep_script(tag: str) -> str:
    """sh that kills every process whose environment holds the tag and prints one line per process killed:
    `<pid> <command line>`. A process still exiting when the test's connection closed is given a second to go
    (zombies and vanished processes are not leftovers). Exits 0."""
    if not _TAG.fullmatch(tag):
        raise ValueError(f"invalid probe tag: {tag!r}")
    return (
        "found() { for e in /proc/[0-9]*/environ; do p=${e#/proc/}; p=${p%/environ}; "
        f"tr '\\0' '\\n' <\"$e\" 2>/dev/null | grep -qx '{TAG_VAR}={tag}' && echo \"$p\"; done; }}; "
        'ps=$(found); [ -z "$ps" ] && exit 0; sleep 1; '
        "for p in $ps; do "
        "s=$(sed -n 's/^State:[[:space:]]*\\([A-Z]\\).*/\\1/p' \"/proc/$p/status\" 2>/dev/null); "
        '{ [ -z "$s" ] || [ "$s" = Z ]; } && continue; '
        "c=$(tr '\\0' ' ' <\"/proc/$p/cmdline\" 2>/dev/null | cut -c1-200); "
        'kill -9 "$p" 2>/dev/null && echo "$p $c"; done; exit 0'
    )


@dataclass(frozen=True)
class Outcome:
    """How a command ended. status: ok (exit 0), failed (another exit, or it could not start),
    timed-out, interrupted."""

    host: str
    status: str
    rc: int | None
    stdout: bytes
    stderr: bytes
    duration_s: float
    started_at: str
    error: str | None = None


class Running:
    """One command on one host, started in the background (a local process: ssh, srun, or the command itself)."""

    def __init__(self, host: str, argv: Sequence[str] | None, limit_s: float, *, error: str | None = None) -> None:
        self.host = host
        self.limit_s = limit_s
        self.started_at = _now()
        self._start = time.monotonic()
        self._out = bytearray()
        self._err = bytearray()
        self._error = error
        self._killed: str | None = None
        self.proc: subprocess.Popen | None = None
        self._threads: list[threading.Thread] = []
        if argv is None:
            return
        try:
            self.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            self._error = f"cannot start {argv[0]}: {exc.strerror or exc}"
            return
        for pipe, buf in ((self.proc.stdout, self._out), (self.proc.stderr, self._err)):
            t = threading.Thread(target=_pump, args=(pipe, buf), daemon=True)
            t.start()
            self._threads.append(t)

    def done(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def stop(self, why: str = "interrupted") -> None:
        """Kill the local side (ssh or srun; the host side ends by its own limit and the sweep)."""
        if self.proc is not None and self.proc.poll() is None:
            self._killed = why
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout_s: float | None = None) -> Outcome:
        """Wait for the end (at most `timeout_s`, else the limit plus the kill grace); a command still running
        then is killed and timed out."""
        if self.proc is not None:
            budget = timeout_s if timeout_s is not None else self.limit_s + KILL_GRACE_S + 5
            try:
                self.proc.wait(timeout=max(0.0, self._start + budget - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stop("timed-out")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)
            for t in self._threads:
                t.join(timeout=2)
        return self._outcome()

    def _outcome(self) -> Outcome:
        took = round(time.monotonic() - self._start, 3)
        out, err = bytes(self._out[:MAX_OUTPUT]), bytes(self._err[:MAX_OUTPUT])
        if self.proc is None:
            return Outcome(self.host, "failed", None, b"", b"", took, self.started_at, self._error)
        rc = self.proc.returncode
        if self._killed == "interrupted":
            return Outcome(self.host, "interrupted", rc, out, err, took, self.started_at, "interrupted")
        # timeout(1) exits 124 when the limit was reached (137 when it had to kill)
        if self._killed == "timed-out" or rc in (124, 137):
            return Outcome(self.host, "timed-out", rc, out, err, took, self.started_at,
                           f"did not finish within {self.limit_s:g} s on {self.host}")
        if rc == 0:
            return Outcome(self.host, "ok", rc, out, err, took, self.started_at)
        last = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = f"exit {rc} on {self.host}" + (f": {last[-1].strip()[:200]}" if last else "")
        return Outcome(self.host, "failed", rc, out, err, took, self.started_at, why)


def _pump(pipe, buf: bytearray) -> None:
    with contextlib.suppress(OSError, ValueError):
        while chunk := pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536):
            if len(buf) < MAX_OUTPUT:
                buf += chunk


class Exec(ABC):
    """How the probe reaches hosts."""

    name: str

    def __init__(self, *, tools_path: str | None = None) -> None:
        self.tools_path = tools_path

    @abstractmethod
    def argv(self, host: str, script: str) -> list[str]:
        """The local argv that runs the sh `script` on `host`."""

    def start(self, host: str, argv: Sequence[str], *, tag: str, limit_s: float,
              env: Mapping[str, str] | None = None) -> Running:
        try:
            script = remote_script(argv, tag=tag, limit_s=limit_s, env=env, tools_path=self.tools_path)
        except ValueError as exc:
            return Running(host, None, limit_s, error=str(exc))
        return Running(host, self.argv(host, script), limit_s)

    def sweep(self, host: str, tag: str, timeout_s: float = 20) -> list[str]:
        """Kill what is left of the tag on the host; the processes found (`pid command`)."""
        out = Running(host, self.argv(host, sweep_script(tag)), timeout_s).wait(timeout_s)
        return [ln.strip() for ln in out.stdout.decode("utf-8", "replace").splitlines() if ln.strip()]

    def address(self, host: str) -> str:
        """The name a peer uses to connect to `host` (a pair test's server): the host name itself."""
        return host

    def collective(self, hosts: Sequence[str], test_argv: Sequence[str], *, tag: str, limit_s: float,
                   env: Mapping[str, str] | None = None) -> Running:
        """Start a collective (nccl-tests) with one rank per host across `hosts`, rank 0 on hosts[0]; its output
        (rank 0's table and every rank's NCCL lines) is the Running's stdout."""
        return Running(hosts[0] if hosts else "", None, limit_s,
                       error=f"a collective across hosts needs --via ssh or slurm, not {self.name}")


class SshExec(Exec):
    """`ssh [options] HOST sh -c SCRIPT` with the capture's ssh options (BatchMode, the user's --ssh-option)."""

    name = "ssh"

    def __init__(self, *, ssh_options: Sequence[str] = (), user: str | None = None, connect_timeout_s: float = 10,
                 ssh: str = "ssh", tools_path: str | None = None) -> None:
        super().__init__(tools_path=tools_path)
        self.ssh_options = tuple(ssh_options)
        self.options = normalize_ssh_options(self.ssh_options)
        self.user = user
        self.connect_timeout_s = connect_timeout_s
        self.ssh = ssh
        self._addresses: dict[str, str] = {}

    def address(self, host: str) -> str:
        """The HostName the user's ssh config gives the host (`ssh -G`: an alias such as gpu-a1 may stand for
        10.0.3.17, which is what a peer must connect to); the name itself when ssh says nothing else."""
        if host not in self._addresses:
            argv = [self.ssh, "-G", *self.options, *(["-l", self.user] if self.user else []), "--", host]
            name = host
            try:
                out = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
                for line in out.stdout.decode("utf-8", "replace").splitlines():
                    key, _, value = line.partition(" ")
                    if key == "hostname" and re.fullmatch(r"[A-Za-z0-9_.:\-%]+", value.strip()):
                        name = value.strip()
                        break
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._addresses[host] = name
        return self._addresses[host]

    def argv(self, host: str, script: str) -> list[str]:
        return ssh_command(host, ssh=self.ssh, user=self.user, options=self.options,
                           connect_timeout_s=self.connect_timeout_s, remote=("sh", "-c", shlex.quote(script)))

    def rsh_agent(self) -> str:
        """How mpirun on the first host reaches the others: ssh with the same options (OpenMPI plm_rsh_agent)."""
        argv = [self.ssh, "-o", "BatchMode=yes", *self.options,
                "-o", f"ConnectTimeout={max(1, round(self.connect_timeout_s))}"]
        if self.user:
            argv += ["-l", self.user]
        return " ".join(shlex.quote(a) for a in argv)

    def collective(self, hosts: Sequence[str], test_argv: Sequence[str], *, tag: str, limit_s: float,
                   env: Mapping[str, str] | None = None) -> Running:
        """`mpirun` on hosts[0], one rank per host, started over ssh by mpirun itself (plm_rsh_agent)."""
        if not hosts:
            return Running("", None, limit_s, error="a collective needs at least one host")
        forwarded = [TAG_VAR, *(env or {})]
        argv = ["mpirun", "-np", str(len(hosts)), "-H", ",".join(f"{h}:1" for h in hosts), "--bind-to", "none",
                "--mca", "plm_rsh_agent", self.rsh_agent(), "-x", "PATH", "-x", "LD_LIBRARY_PATH"]
        for key in forwarded:
            argv += ["-x", key]
        return self.start(hosts[0], [*argv, *test_argv], tag=tag, limit_s=limit_s, env=env)


class LocalExec(Exec):
    """This machine: `sh -c SCRIPT` (every host name is this machine; tests and one-host checks)."""

    name = "local"

    def argv(self, host: str, script: str) -> list[str]:
        return ["sh", "-c", script]
