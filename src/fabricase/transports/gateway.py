"""Tree mode: past one machine's fan-out, or to hosts only gateways can reach.

The hosts are split among gateways. Each gateway is reached over ssh and runs `fabricase relay`, which fans
the capture out from there (over ssh, with the same options, or through its own gateways) and sends every
host's result back as soon as that host ends, one frame per host on one stream (relay protocol 2):

    @@FCR2 <header length>\\n<header: one JSON object><stdout bytes><stderr bytes>

The header holds host, status, rc, started_at, finished_at, reason and the two byte counts. Everything is
length-prefixed, so the hosts' streams pass byte for byte whatever they hold (ClusterShell's tree workers are
line-based and not binary-safe; ARCHITECTURE.md). This machine reads each gateway's stream as it arrives and
hands every host on as its frame completes: memory is one host's stream, not a gateway's, and each host keeps
its own timings. A frame that cannot be read (bad length, bad header, a cut) ends that gateway's stream with
one reason, given to each of its hosts not yet reported; it never waits for bytes beyond the gateway's limit.

The caller sends the relay its protocol as the first line of the capture script (`# fabricase-relay 2`, a
comment to sh), so an older relay runs the script as before and its version-1 frames are named as such; a
newer relay refuses a caller that did not say its protocol. A gateway written `GW:SUB1,SUB2` relays through
its own gateways SUB1 and SUB2 (nested tree mode). The overall deadline travels down as the seconds that
remain, and this side reads DEADLINE_GRACE_S longer (per tier), so the hosts a relay times out at the deadline
are reported from there, with their own reasons and timings.
"""

from __future__ import annotations

import json
import math
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabricase.models import HostStatus
from fabricase.transports.base import HostRun, Transport
from fabricase.transports.fanout import run_fanout
from fabricase.transports.ssh import MAX_OUTPUT_BYTES, MAX_STDERR_BYTES, SshTransport

__all__ = [
    "PROTOCOL",
    "PROTOCOL_LINE",
    "GatewayTransport",
    "RelayDecoder",
    "decode_runs",
    "encode_run",
    "parse_gateway",
    "split_hosts",
    "strip_protocol_line",
]

PROTOCOL = 2
PROTOCOL_LINE = f"# fabricase-relay {PROTOCOL}\n"
_MAGIC = b"@@FCR2 "
_OLD_MAGIC = b"@@FCR"
_LINE_MAX = 32  # "@@FCR2 " and a decimal length
MAX_HEADER_BYTES = 64 * 1024
MAX_FRAME_STDERR = 4 * MAX_STDERR_BYTES
DEADLINE_GRACE_S = 10.0  # past the overall deadline, for a relay to start, time its hosts out and report them


def encode_run(run: HostRun) -> bytes:
    """One host's result as a relay frame."""
    head = json.dumps({"host": run.host, "status": str(run.status), "rc": run.rc, "reason": run.reason,
                       "started_at": run.started_at, "finished_at": run.finished_at,
                       "stdout": len(run.stdout), "stderr": len(run.stderr)},
                      sort_keys=True, separators=(",", ":")).encode()
    return b"%s%d\n" % (_MAGIC, len(head)) + head + run.stdout + run.stderr


@dataclass(frozen=True)
class _Header:
    run: HostRun
    n_stdout: int
    n_stderr: int


def _opt_str(head: dict, key: str) -> str | None:
    value = head.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value


def _parse_header(raw: bytes, max_stdout: int) -> _Header:
    """The frame header, checked field by field; ValueError says which field is wrong."""
    try:
        head = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError("header is not JSON") from exc
    if not isinstance(head, dict):
        raise ValueError("header is not a JSON object")
    host = head.get("host")
    if not isinstance(host, str) or not host or any(c.isspace() for c in host):
        raise ValueError("no host name")
    try:
        status = HostStatus(head.get("status"))
    except ValueError as exc:
        raise ValueError(f"{host}: unknown status {head.get('status')!r}") from exc
    rc = head.get("rc")
    if rc is not None and (not isinstance(rc, int) or isinstance(rc, bool)):
        raise ValueError(f"{host}: rc is not an integer")
    sizes = []
    for key, cap in (("stdout", max_stdout), ("stderr", MAX_FRAME_STDERR)):
        n = head.get(key)
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= cap:
            raise ValueError(f"{host}: {key} length {n!r} is not 0 to {cap} bytes")
        sizes.append(n)
    run = HostRun(host, status, rc=rc, reason=_opt_str(head, "reason"), started_at=_opt_str(head, "started_at"),
                  finished_at=_opt_str(head, "finished_at"))
    return _Header(run, sizes[0], sizes[1])


class RelayDecoder:
    """Frames out of a relay stream fed in pieces as they arrive; holds at most one frame's bytes.

    After the first unreadable frame it stops (a length-prefixed stream cannot be resynchronized) and
    `error` says where and why; `finish()` also names a stream cut inside a frame."""

    def __init__(self, max_stdout: int = MAX_OUTPUT_BYTES) -> None:
        self.max_stdout = max_stdout
        self.error: str | None = None
        self._buf = bytearray()
        self._pos = 0  # stream offset of _buf[0]
        self._head_len: int | None = None
        self._head: _Header | None = None
        self._pending: list[HostRun] = []

    @property
    def buffered(self) -> int:
        """Bytes held now: at most the frame being read (its stdout is handed on with it)."""
        return len(self._buf)

    @property
    def over(self) -> bool:
        """True once the stream is unreadable: the reader stops (the ssh pump's overflow seam)."""
        return self.error is not None

    def add(self, data: bytes) -> None:
        """Decode these bytes, keeping the runs for `take` (the ssh pump's sink interface)."""
        self._pending.extend(self.feed(data))

    def take(self) -> list[HostRun]:
        """The runs decoded by `add` since the last take."""
        runs, self._pending = self._pending, []
        return runs

    def feed(self, data: bytes) -> list[HostRun]:
        """The runs completed by these bytes (none after an error)."""
        if self.error is not None:
            return []
        self._buf += data
        runs: list[HostRun] = []
        try:
            while (run := self._next()) is not None:
                runs.append(run)
        except ValueError as exc:
            self.error = str(exc)
            self._buf.clear()
        return runs

    def _consume(self, n: int) -> bytes:
        chunk = bytes(self._buf[:n])
        del self._buf[:n]
        self._pos += n
        return chunk

    def _next(self) -> HostRun | None:
        if self._head_len is None and not self._frame_line():
            return None
        if self._head is None:
            assert self._head_len is not None
            if len(self._buf) < self._head_len:
                return None
            at = self._pos
            try:
                self._head = _parse_header(self._consume(self._head_len), self.max_stdout)
            except ValueError as exc:
                raise ValueError(f"relay header malformed at byte {at}: {exc}") from exc
        head = self._head
        if len(self._buf) < head.n_stdout + head.n_stderr:
            return None
        head.run.stdout = self._consume(head.n_stdout)
        head.run.stderr = self._consume(head.n_stderr)
        self._head_len, self._head = None, None
        return head.run

    def _frame_line(self) -> bool:
        """Read `@@FCR2 N\\n`; False while incomplete, ValueError when it is not one."""
        buf = self._buf
        if not buf:
            return False
        if not _MAGIC.startswith(bytes(buf[:len(_MAGIC)])):  # not (the start of) this protocol's frame line
            version = chr(buf[len(_OLD_MAGIC)]) if len(buf) > len(_OLD_MAGIC) else ""
            if buf.startswith(_OLD_MAGIC) and version.isdigit() and version != str(PROTOCOL):
                raise ValueError(f"the gateway's relay speaks protocol {version}, this fabricase speaks {PROTOCOL}: "
                                 "install the same fabricase version on the gateway")
            raise ValueError(f"relay stream garbled at byte {self._pos}")
        nl = buf.find(b"\n", 0, _LINE_MAX)
        if nl < 0:
            if len(buf) >= _LINE_MAX:
                raise ValueError(f"relay stream garbled at byte {self._pos}: no frame length")
            return False
        digits = bytes(buf[len(_MAGIC):nl])
        if not digits.isdigit() or not 0 < int(digits) <= MAX_HEADER_BYTES:
            raise ValueError(f"relay frame at byte {self._pos}: header length {digits[:12]!r} is not "
                             f"1 to {MAX_HEADER_BYTES}")
        self._consume(nl + 1)
        self._head_len = int(digits)
        return True

    def finish(self) -> str | None:
        """Why the stream did not end cleanly (None when it did)."""
        if self.error is not None:
            return self.error
        if self._head is not None:
            return f"relay stream cut inside {self._head.run.host}'s result"
        if self._head_len is not None or self._buf:
            return f"relay stream cut inside a frame header at byte {self._pos}"
        return None


def decode_runs(data: bytes) -> tuple[list[HostRun], str | None]:
    """The runs in a whole relay stream, and why it stopped early (None when it ended cleanly)."""
    decoder = RelayDecoder()
    runs = decoder.feed(data)
    return runs, decoder.finish()


def strip_protocol_line(script: str) -> tuple[int | None, str]:
    """The relay protocol the caller said in the script's first line (None: it said none), and the script."""
    first, nl, rest = script.partition("\n")
    prefix = PROTOCOL_LINE.split()[:2]
    words = first.split()
    if nl and words[:2] == prefix and len(words) == 3 and words[2].isdigit():
        return int(words[2]), rest
    return None, script


def parse_gateway(spec: str) -> tuple[str, tuple[str, ...]]:
    """`GW` or `GW:SUB1,SUB2` (GW relays through its own gateways SUB1 and SUB2) -> (GW, (SUB1, SUB2)). A name
    with more than one colon is an IPv6 address, never a nested spec."""
    if spec.count(":") != 1:
        return spec, ()
    host, _, subs = spec.partition(":")
    return host, tuple(s for s in subs.split(",") if s)


def split_hosts(hosts: Sequence[str], gateways: Sequence[str]) -> dict[str, list[str]]:
    """Contiguous slices, one per gateway (neighbouring hosts usually share a gateway's network)."""
    size = math.ceil(len(hosts) / len(gateways)) if hosts else 0
    return {gw: list(hosts[i * size:(i + 1) * size]) for i, gw in enumerate(gateways) if hosts[i * size:]}


class _Feed:
    """Where the gateway's ssh puts its stdout (SshTransport.run_one's stdout_sink): the decoder, then the hosts
    it completed, at once. The relay stream is decoded as it arrives, not kept whole."""

    def __init__(self, decoder: RelayDecoder, on_frames: Callable[[list[HostRun]], None]) -> None:
        self.decoder, self.on_frames = decoder, on_frames

    @property
    def over(self) -> bool:
        return self.decoder.over  # an unreadable stream stops the read (and the relay) at once

    def add(self, data: bytes) -> None:
        self.decoder.add(data)
        self.on_frames(self.decoder.take())

    def value(self) -> bytes:
        return b""  # the bytes went to the decoder: the gateway's own run carries no stdout


def _gateway_failure(run: HostRun, stream_error: str | None) -> str:
    """Why a gateway's hosts without a frame have no result, in one line."""
    stderr = run.stderr.decode("utf-8", "replace")
    if stream_error:
        return stream_error
    if run.rc == 2 and "relay protocol" in stderr:
        return stderr.strip().splitlines()[-1][:300]
    if run.rc == 2 and ("No such command 'relay'" in stderr or "No such option" in stderr):
        return (f"the gateway's fabricase is older and does not speak relay protocol {PROTOCOL}: install the same "
                "fabricase version there")
    return run.reason or f"relay exited {run.rc}"


class GatewayTransport(Transport):
    name = "ssh"

    def __init__(self, gateways: tuple[str, ...], *, command: str = "fabricase", fanout: int = 64,
                 user: str | None = None, ssh_options: tuple[str, ...] = (), deadline_s: float | None = None) -> None:
        self.gateways = gateways
        self.tiers = dict(parse_gateway(g) for g in gateways)  # gateway -> its own gateways (nested tree mode)
        self.command = command
        self.fanout = fanout
        self.user = user
        self.ssh_options = ssh_options
        self.deadline_s = deadline_s

    @classmethod
    def from_options(cls, *, gateways: Sequence[str] = (), gateway_command: str = "fabricase", fanout: int = 64,
                     user: str | None = None, ssh_options: Sequence[str] = (), deadline_s: float | None = None,
                     **_other: object) -> GatewayTransport:
        return cls(tuple(gateways), command=gateway_command, fanout=fanout, user=user,
                   ssh_options=tuple(ssh_options or ()), deadline_s=deadline_s)

    def relay_argv(self, hosts: list[str], timeout_s: float, *, gateway: str | None = None,
                   deadline_left_s: float | None = None) -> list[str]:
        from ClusterShell.NodeSet import NodeSet

        argv = [*shlex.split(self.command), "relay", "--hosts", str(NodeSet.fromlist(hosts)),
                "--fanout", str(self.fanout), "--timeout", f"{timeout_s:g}"]
        for option in self.ssh_options:
            argv += ["--ssh-option", option]
        if self.user:
            argv += ["--user", self.user]
        if deadline_left_s is not None:
            argv += ["--deadline", f"{max(deadline_left_s, 0.001):.3f}"]
        subs = self.tiers.get(gateway, ()) if gateway else ()
        for sub in subs:
            argv += ["--gateway", sub]
        if subs:
            argv += ["--gateway-command", self.command]
        return argv

    def run(self, hosts: list[str], script: str, *, timeout_s: float,
            on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
        plan = split_hosts(hosts, list(self.tiers))
        payload = (PROTOCOL_LINE + script).encode()
        results: dict[str, HostRun] = {}
        lock = threading.Lock()  # on_done runs in the gateways' threads, one host at a time

        def deliver(gateway: str, run: HostRun) -> None:
            with lock:
                if run.host not in plan[gateway] or run.host in results:
                    return  # not this gateway's host, or a second frame for it
                results[run.host] = run
                if on_done:
                    on_done(run)

        def via_gateway(gateway: str, deadline: float) -> HostRun:
            subset = plan[gateway]
            depth = 2 if self.tiers[gateway] else 1
            limit = timeout_s * math.ceil(len(subset) / self.fanout) + 30 * depth
            # The relay gets the seconds left; this side reads a grace period longer, so that the hosts the relay
            # times out at the deadline are still reported from there (as frames, with their own reasons).
            left = None if deadline == float("inf") else deadline - time.monotonic()
            decoder = RelayDecoder()
            argv = self.relay_argv(subset, timeout_s, gateway=gateway, deadline_left_s=left)
            feed = _Feed(decoder, lambda runs: [deliver(gateway, r) for r in runs])
            ssh = SshTransport(fanout=1, user=self.user, ssh_options=self.ssh_options, remote=(shlex.join(argv),))
            run = ssh.run_one(gateway, payload, limit, deadline + DEADLINE_GRACE_S * depth, stdout_sink=feed)
            for r in decoder.take():
                deliver(gateway, r)
            missing(gateway, run, decoder.finish())
            return run

        def missing(gateway: str, run: HostRun, stream_error: str | None) -> None:
            why = _gateway_failure(run, stream_error)
            status = run.status if run.status != HostStatus.OK else HostStatus.FAILED
            reason = "interrupted" if run.reason == "interrupted" else f"via gateway {gateway}: no result ({why})"
            for host in plan[gateway]:
                if host not in results:
                    deliver(gateway, HostRun(host, status, reason=reason, started_at=run.started_at,
                                             finished_at=run.finished_at))

        for gw_run in run_fanout(list(plan), via_gateway, fanout=len(plan), deadline_s=self.deadline_s):
            missing(gw_run.host, gw_run, None)  # a gateway whose thread failed or was never started
        return [results[h] for h in hosts if h in results]
