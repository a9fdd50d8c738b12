"""Run the capture script on this machine with `sh`: one shell process for the whole capture."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime

from fabricase.errors import TransportError
from fabricase.models import HostStatus
from fabricase.transports.base import HostRun, Transport

__all__ = ["LocalTransport", "is_local_name"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def is_local_name(name: str) -> bool:
    host = socket.gethostname()
    return name in {"localhost", "127.0.0.1", "::1", host, host.split(".")[0]}


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class LocalTransport(Transport):
    name = "local"

    def __init__(self, shell: str = "sh") -> None:
        self.shell = shell

    def run_one(self, host: str, script: str, timeout_s: float) -> HostRun:
        started = _now()
        try:
            proc = subprocess.Popen(
                [self.shell, "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,  # so a timeout kills the script and everything it started
            )
        except OSError as exc:
            raise TransportError(f"cannot start {self.shell}: {exc.strerror}", where=host) from exc
        try:
            out, err = proc.communicate(script.encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return HostRun(host, HostStatus.TIMED_OUT, out, err, proc.returncode,
                           f"capture did not finish within {timeout_s:g}s", started, _now())
        except KeyboardInterrupt:
            _kill_group(proc)
            out, err = proc.communicate()
            return HostRun(host, HostStatus.FAILED, out, err, proc.returncode, "interrupted", started, _now())
        status = HostStatus.OK if proc.returncode == 0 else HostStatus.FAILED
        reason = None if proc.returncode == 0 else _script_failure(proc.returncode, err)
        return HostRun(host, status, out, err, proc.returncode, reason, started, _now())

    def run(self, hosts: list[str], script: str, *, timeout_s: float,
            on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
        foreign = [h for h in hosts if not is_local_name(h)]
        if foreign:
            raise TransportError(
                f"host {foreign[0]} is not this machine; the local transport only captures this host "
                "(use --via ssh or slurm for remote hosts)"
            )
        runs = []
        for host in hosts:
            run = self.run_one(host, script, timeout_s)
            runs.append(run)
            if on_done:
                on_done(run)
            if run.reason == "interrupted":
                break
        return runs


def _script_failure(rc: int, err: bytes) -> str:
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return f"capture script exited {rc}" + (f": {lines[-1][:200]}" if lines else "")
