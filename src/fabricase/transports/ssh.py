"""Run the capture script on each host through the system OpenSSH client: `ssh ... HOST sh -s`.

The system `ssh` is used on purpose, so the user's ~/.ssh/config applies as it does for their own ssh
(ProxyJump, ControlMaster/ControlPersist, IdentityFile, User, Port, per-host aliases). Each host gets one
ssh process, its stdin the capture script, its stdout read incrementally (binary-safe, byte for byte) and
capped. Hosts run in parallel through `run_fanout`; every host comes back as a HostRun, whatever happened.

OpenSSH takes the FIRST value it sees for an option (command line before config files, earlier -o before
later ones). The command line is therefore, in this order:

    ssh -o BatchMode=yes [user's --ssh-option values] -o ConnectTimeout=N [-l USER] -- HOST sh -s

BatchMode=yes comes first so nothing can make ssh prompt (a prompt would hang the capture); the user's
options come before fabricase's ConnectTimeout default so theirs win.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from fabricase.errors import TransportError
from fabricase.models import HostStatus
from fabricase.transports.base import HostRun, Transport
from fabricase.transports.fanout import run_fanout
from fabricase.transports.fds import check_fanout

__all__ = [
    "MAX_OUTPUT_BYTES",
    "MAX_STDERR_BYTES",
    "SshTransport",
    "StdoutSink",
    "classify_ssh_failure",
    "normalize_ssh_options",
    "ssh_command",
]

MAX_OUTPUT_BYTES = 256 * 1024 * 1024  # one host's capture stream
MAX_STDERR_BYTES = 64 * 1024  # ssh's own messages (and anything the remote shell prints outside the stream)

# Options given as "-X VALUE" (or "-XVALUE") are passed through as given; any other leading "-" is refused.
PASS_THROUGH_WITH_VALUE = ("-F", "-i", "-J", "-p", "-o")
PASS_THROUGH_FLAGS = ("-4", "-6", "-C")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def normalize_ssh_options(options: Sequence[str]) -> list[str]:
    """`--ssh-option` values as ssh arguments.

    "Key=Value" or "Key Value" (an ssh_config keyword) becomes `-o Key=Value`. "-F FILE", "-i FILE",
    "-J JUMP", "-p PORT" and "-o KEY=VALUE" (or the value attached: "-p2222") and the flags -4, -6, -C are
    passed through as given. Anything else starting with "-" is refused with a TransportError.
    """
    args: list[str] = []
    for raw in options:
        opt = raw.strip()
        if not opt:
            raise TransportError("empty ssh option", where="--ssh-option")
        if opt.startswith("-"):
            if opt in PASS_THROUGH_FLAGS:
                args.append(opt)
                continue
            flag, value = opt[:2], opt[2:].strip()
            if flag not in PASS_THROUGH_WITH_VALUE or not value:
                allowed = ", ".join(f"{f} VALUE" for f in PASS_THROUGH_WITH_VALUE) + ", " + ", ".join(
                    PASS_THROUGH_FLAGS)
                raise TransportError(f"ssh option {opt!r} is not passed through; use KEY=VALUE (an ssh_config "
                                     f"keyword) or one of: {allowed}", where="--ssh-option")
            args += [flag, value]
            continue
        key, sep, value = opt.partition("=")
        if not sep:
            key, _, value = opt.partition(" ")
        key, value = key.strip(), value.strip()
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key) or not value:
            raise TransportError(f"ssh option {opt!r} is not KEY=VALUE (e.g. ProxyJump=bastion)",
                                 where="--ssh-option")
        args += ["-o", f"{key}={value}"]
    return args


def ssh_command(host: str, *, ssh: str = "ssh", user: str | None = None, options: Sequence[str] = (),
                connect_timeout_s: float = 10, remote: Sequence[str] = ("sh", "-s")) -> list[str]:
    """The argv for one host. `options` are already normalized (see normalize_ssh_options); `remote` is the
    command run there (the capture script's shell, or a gateway's relay), already quoted for its shell."""
    argv = [ssh, "-o", "BatchMode=yes", *options, "-o", f"ConnectTimeout={max(1, round(connect_timeout_s))}"]
    if user:
        argv += ["-l", user]
    return [*argv, "--", host, *remote]


# ssh's own diagnostic lines that never explain a failure.
_NOISE = re.compile(r"^(Warning: Permanently added|\*\* |Pseudo-terminal will not be allocated|@+$|"
                    r"debug\d: )")


def _last_line(stderr_text: str) -> str:
    lines = [ln.strip() for ln in stderr_text.splitlines() if ln.strip() and not _NOISE.match(ln.strip())]
    return lines[-1][:200] if lines else ""


def _line_with(stderr_text: str, needle: str) -> str:
    for ln in stderr_text.splitlines():
        if needle.lower() in ln.lower():
            return ln.strip()[:200]
    return needle


_AUTH_KEY = ("Permission denied", "Too many authentication failures", "no mutual signature algorithm")
_NET = ("Connection refused", "No route to host", "Connection timed out", "Could not resolve hostname",
        "Network is unreachable", "timed out during banner exchange", "Name or service not known",
        "Temporary failure in name resolution", "Connection reset by peer", "Connection closed by",
        "closed by remote host", "kex_exchange_identification", "Broken pipe", "timed out")


# bash: "bash: line 1: sh: command not found"; dash: "sh: 1: sh: not found"; zsh: "zsh:1: command not found: sh"
_NO_SH = re.compile(r"\bsh: (command )?not found|command not found: sh\b|\bsh: No such file or directory")


def classify_ssh_failure(rc: int | None, stderr_text: str) -> tuple[HostStatus, str | None]:
    """What a finished ssh process means for the host: (status, one-line reason). Pure.

    rc 255 is ssh's own failure (cannot connect, authenticate or keep the connection); any other rc is the
    remote shell's exit status.
    """
    text = stderr_text or ""
    if rc == 0:
        return HostStatus.OK, None
    if rc == 255:
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "has changed and you have requested strict" in text:
            return HostStatus.AUTH_FAILED, ("host key changed (known_hosts holds another key for this host: "
                                            "reinstalled host or man-in-the-middle); ssh refused to connect")
        if "Host key verification failed" in text or "No matching host key" in text:
            detail = _line_with(text, "host key is known") if "host key is known" in text else _last_line(text)
            return HostStatus.AUTH_FAILED, f"host key unknown or not accepted: {detail}"
        for needle in _AUTH_KEY:
            if needle.lower() in text.lower():
                return HostStatus.AUTH_FAILED, f"ssh key refused: {_line_with(text, needle)}"
        for needle in _NET:
            if needle.lower() in text.lower():
                return HostStatus.UNREACHABLE, _line_with(text, needle)
        last = _last_line(text)
        return HostStatus.UNREACHABLE, f"ssh failed (exit 255): {last}" if last else "ssh failed (exit 255)"
    if rc is None:
        return HostStatus.FAILED, "ssh ended without an exit status"
    last = _last_line(text)
    if rc == 127 and _NO_SH.search(text):
        return HostStatus.FAILED, f"no sh on the host: {last}"
    if rc < 0:
        return HostStatus.FAILED, f"ssh was killed by signal {-rc}"
    return HostStatus.FAILED, f"capture script exited {rc}" + (f": {last}" if last else "")


class StdoutSink(Protocol):
    """Where run_one puts a host's stdout as it arrives: `add` each chunk; `over` stops the read ("overflow");
    `value()` is the HostRun's stdout (b"" for a sink that hands the bytes on, as the gateway's relay decoder
    does)."""

    def add(self, data: bytes) -> None: ...

    @property
    def over(self) -> bool: ...

    def value(self) -> bytes: ...


class _Capped:
    """Bytes kept up to a cap; for stderr, the head and the tail (ssh's verdict is on the last lines)."""

    def __init__(self, cap: int, keep_tail: bool) -> None:
        self.cap, self.keep_tail = cap, keep_tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.head) if not self.keep_tail else self.cap // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.keep_tail:
            self.tail += data
            if len(self.tail) > self.cap // 2:
                del self.tail[: len(self.tail) - self.cap // 2]

    @property
    def over(self) -> bool:
        return self.total > self.cap

    def value(self) -> bytes:
        if not self.tail:
            return bytes(self.head)
        dropped = self.total - len(self.head) - len(self.tail)
        mid = f"\n[... {dropped} bytes dropped ...]\n".encode() if dropped else b""
        return bytes(self.head) + mid + bytes(self.tail)


def _kill(proc: subprocess.Popen) -> None:
    # ssh runs in its own session (so a Ctrl-C is handled here, once, for every host); kill its whole group:
    # a ProxyCommand or ProxyJump ssh it started goes too. A ControlPersist master daemonizes into its own
    # session and is left alone, as it should be.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


class SshTransport(Transport):
    name = "ssh"

    def __init__(self, fanout: int = 64, user: str | None = None, ssh_options: Sequence[str] = (),
                 connect_timeout_s: float = 10, max_output_bytes: int = MAX_OUTPUT_BYTES, ssh: str = "ssh",
                 deadline_s: float | None = None, remote: Sequence[str] = ("sh", "-s")) -> None:
        if fanout < 1:
            raise TransportError(f"fanout must be 1 or more (got {fanout})", where="--fanout")
        check_fanout(fanout)
        if connect_timeout_s <= 0:
            raise TransportError("connect timeout must be more than 0 seconds", where="ssh")
        self.fanout = fanout
        self.user = user or None
        self.ssh_options = tuple(ssh_options)
        self.options = normalize_ssh_options(self.ssh_options)  # refuses bad values before any host
        self.connect_timeout_s = connect_timeout_s
        self.max_output_bytes = max_output_bytes
        self.ssh = ssh
        self.deadline_s = deadline_s
        self.remote = tuple(remote)
        self._stop = threading.Event()

    @classmethod
    def from_options(cls, *, fanout: int = 64, deadline_s: float | None = None, ssh_options: Sequence[str] = (),
                     user: str | None = None, **_other: Any) -> SshTransport:
        """From CollectOptions / the CLI: --fanout, --deadline, --ssh-option (repeatable), --user."""
        return cls(fanout=fanout, user=user, ssh_options=tuple(ssh_options or ()), deadline_s=deadline_s)

    def command(self, host: str) -> list[str]:
        return ssh_command(host, ssh=self.ssh, user=self.user, options=self.options,
                           connect_timeout_s=self.connect_timeout_s, remote=self.remote)

    def _preflight(self, host: str) -> None:
        """`ssh -G` parses the options and config files without connecting: a bad option fails every host
        the same way, so it is one TransportError, not N identical host failures."""
        exe = shutil.which(self.ssh)
        if exe is None:
            raise TransportError(f"no {self.ssh!r} on PATH; install the OpenSSH client (Debian: openssh-client)")
        argv = self.command(host)
        argv[0] = exe
        argv = [argv[0], "-G", *argv[1:-len(self.remote)]]  # without the remote command
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TransportError(f"cannot run {exe} -G: {exc}") from exc
        if proc.returncode != 0:
            last = _last_line(proc.stderr.decode("utf-8", "replace")) or f"exit {proc.returncode}"
            raise TransportError(f"ssh rejects its options or configuration: {last}", where="--ssh-option")

    def run(self, hosts: list[str], script: str, *, timeout_s: float,
            on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
        if not hosts:
            return []
        self._preflight(hosts[0])
        self._stop = threading.Event()
        payload = script.encode()
        return run_fanout(list(hosts), lambda host, deadline: self.run_one(host, payload, timeout_s, deadline),
                          fanout=self.fanout, deadline_s=self.deadline_s, on_done=on_done, stop=self._stop)

    def run_one(self, host: str, payload: bytes, timeout_s: float, deadline: float = float("inf"), *,
                stdout_sink: StdoutSink | None = None) -> HostRun:
        """One host: ssh, the payload on its stdin, its stdout kept up to max_output_bytes (or handed to
        `stdout_sink` as it arrives), the outcome classified."""
        started = _now()
        start = time.monotonic()
        limit = max(0.0, min(timeout_s, deadline - start))
        end = start + limit
        try:
            proc = subprocess.Popen(self.command(host), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise TransportError(f"cannot start {self.ssh}: {exc.strerror}", where=host) from exc
        out = stdout_sink if stdout_sink is not None else _Capped(self.max_output_bytes, keep_tail=False)
        err = _Capped(MAX_STDERR_BYTES, keep_tail=True)
        outcome = self._pump(proc, payload, out, err, end)
        if outcome != "done":
            _kill(proc)
        rc = _reap(proc, 2.0)
        # A ControlPersist master may hold ssh's stderr open after ssh exits: take what is there, never wait.
        _drain(proc, err)
        for pipe in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
        stdout, stderr = out.value(), err.value()
        finished = _now()
        if outcome == "timeout":
            why = " (overall deadline)" if deadline - start < timeout_s else ""
            return HostRun(host, HostStatus.TIMED_OUT, stdout, stderr, rc,
                           f"capture did not finish within {round(limit, 1):g}s{why}", started, finished)
        if outcome == "overflow":
            cap = self.max_output_bytes
            return HostRun(host, HostStatus.FAILED, stdout, stderr, rc,
                           f"output exceeded {cap} bytes; first {cap} kept", started, finished)
        if outcome == "stopped":
            return HostRun(host, HostStatus.FAILED, stdout, stderr, rc, "interrupted", started, finished)
        status, reason = classify_ssh_failure(rc, stderr.decode("utf-8", "replace"))
        if status == HostStatus.UNREACHABLE and stdout:
            # The connection was up (the script ran) and was lost mid-stream: the items before the cut count.
            status, reason = HostStatus.PARTIAL, f"connection lost after {len(stdout)} bytes: {reason}"
        return HostRun(host, status, stdout, stderr, rc, reason, started, finished)

    def _pump(self, proc: subprocess.Popen, payload: bytes, out: StdoutSink, err: _Capped, end: float) -> str:
        """Feed stdin, read stdout and stderr until stdout closes. 'done', 'timeout', 'overflow' or 'stopped'."""
        sel = selectors.DefaultSelector()
        assert proc.stdin and proc.stdout and proc.stderr
        fds = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        for fd in fds:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        win = proc.stdin.fileno()
        os.set_blocking(win, False)
        sel.register(win, selectors.EVENT_WRITE)
        sent = 0
        stdout_open = True
        try:
            while stdout_open:
                if self._stop.is_set():
                    return "stopped"
                left = end - time.monotonic()
                if left <= 0:
                    return "timeout"
                for key, _ in sel.select(timeout=min(left, 0.2)):
                    fd = key.fd
                    if fd == win:
                        try:
                            sent += os.write(win, payload[sent:sent + 65536])
                        except (BrokenPipeError, ConnectionResetError):
                            sent = len(payload)  # ssh stopped reading (auth failed, remote gone): nothing to do
                        except BlockingIOError:
                            continue
                        if sent >= len(payload):
                            sel.unregister(win)
                            with contextlib.suppress(OSError):
                                proc.stdin.close()
                        continue
                    try:
                        data = os.read(fd, 65536)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(fd)
                        if fd == proc.stdout.fileno():
                            stdout_open = False
                        continue
                    fds[fd].add(data)
                    if out.over:
                        return "overflow"
            # stdout is closed; wait for ssh itself to exit (its status decides), still within the limit.
            while proc.poll() is None:
                if self._stop.is_set():
                    return "stopped"
                left = end - time.monotonic()
                if left <= 0:
                    return "timeout"
                for key, _ in sel.select(timeout=min(left, 0.05)):
                    if key.fd == proc.stderr.fileno():
                        with contextlib.suppress(BlockingIOError):
                            data = os.read(key.fd, 65536)
                            if data:
                                err.add(data)
                            else:
                                sel.unregister(key.fd)
            return "done"
        finally:
            sel.close()
            if not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()


def _reap(proc: subprocess.Popen, wait_s: float) -> int | None:
    try:
        return proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=wait_s)
    return proc.returncode


def _drain(proc: subprocess.Popen, err: _Capped) -> None:
    if proc.stderr is None or proc.stderr.closed:
        return
    fd = proc.stderr.fileno()
    os.set_blocking(fd, False)
    with contextlib.suppress(OSError):
        while True:
            data = os.read(fd, 65536)
            if not data:
                break
            err.add(data)
