"""Tree mode: past one machine's fan-out, or to hosts only gateways can reach.

The hosts are split among gateways. Each gateway is reached over ssh and runs `fabricase relay`, which fans
the capture out from there (over ssh, with the same options) and sends every host's result back as soon as
it ends, multiplexed on one stream:

    @@FCR1 <host> <status> <rc|-> <stdout bytes> <stderr bytes> <reason bytes>\\n<stdout><stderr><reason>

So one machine holds one connection per gateway, not one per host, and each gateway's fan-out adds up.
A gateway that cannot be reached makes each of its hosts fail with that reason; a host the relay never
reported is recorded as such. Nothing else changes: the streams are the hosts' own, byte for byte.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Sequence

from fabricase.models import HostStatus
from fabricase.transports.base import HostRun, Transport
from fabricase.transports.fanout import run_fanout
from fabricase.transports.ssh import MAX_OUTPUT_BYTES, SshTransport

__all__ = ["GatewayTransport", "decode_runs", "encode_run", "split_hosts"]

_MAGIC = b"@@FCR1 "


def encode_run(run: HostRun) -> bytes:
    reason = (run.reason or "").encode()
    rc = "-" if run.rc is None else str(run.rc)
    head = f"@@FCR1 {run.host} {run.status} {rc} {len(run.stdout)} {len(run.stderr)} {len(reason)}\n".encode()
    return head + run.stdout + run.stderr + reason


def decode_runs(data: bytes) -> tuple[list[HostRun], str | None]:
    """The runs in a relay stream, and why it stopped early (None when it ended cleanly)."""
    runs: list[HostRun] = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0 or not data.startswith(_MAGIC, pos):
            return runs, f"relay stream garbled at byte {pos}"
        fields = data[pos + len(_MAGIC):nl].split(b" ")
        try:
            host, status, rc = fields[0].decode(), HostStatus(fields[1].decode()), fields[2]
            n_out, n_err, n_reason = (int(x) for x in fields[3:6])
        except (ValueError, IndexError, UnicodeDecodeError):
            return runs, f"relay header malformed at byte {pos}"
        body = nl + 1
        end = body + n_out + n_err + n_reason
        if end > len(data):
            return runs, f"relay stream cut inside {host}'s result"
        out, err = data[body:body + n_out], data[body + n_out:body + n_out + n_err]
        reason = data[body + n_out + n_err:end].decode("utf-8", "replace") or None
        runs.append(HostRun(host, status, out, err, None if rc == b"-" else int(rc), reason))
        pos = end
    return runs, None


def split_hosts(hosts: Sequence[str], gateways: Sequence[str]) -> dict[str, list[str]]:
    """Contiguous slices, one per gateway (neighbouring hosts usually share a gateway's network)."""
    size = math.ceil(len(hosts) / len(gateways)) if hosts else 0
    return {gw: list(hosts[i * size:(i + 1) * size]) for i, gw in enumerate(gateways) if hosts[i * size:]}


class GatewayTransport(Transport):
    name = "ssh"

    def __init__(self, gateways: tuple[str, ...], *, command: str = "fabricase", fanout: int = 64,
                 user: str | None = None, ssh_options: tuple[str, ...] = (), deadline_s: float | None = None) -> None:
        self.gateways = gateways
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

    def relay_argv(self, hosts: list[str], timeout_s: float) -> list[str]:
        from ClusterShell.NodeSet import NodeSet

        argv = [*shlex.split(self.command), "relay", "--hosts", str(NodeSet.fromlist(hosts)),
                "--fanout", str(self.fanout), "--timeout", f"{timeout_s:g}"]
        for option in self.ssh_options:
            argv += ["--ssh-option", option]
        if self.user:
            argv += ["--user", self.user]
        return argv

    def run(self, hosts: list[str], script: str, *, timeout_s: float,
            on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
        plan = split_hosts(hosts, self.gateways)
        payload = script.encode()

        def via_gateway(gateway: str, deadline: float) -> HostRun:
            subset = plan[gateway]
            rounds = math.ceil(len(subset) / self.fanout)
            ssh = SshTransport(fanout=1, user=self.user, ssh_options=self.ssh_options,
                               max_output_bytes=MAX_OUTPUT_BYTES * len(subset),
                               remote=(shlex.join(self.relay_argv(subset, timeout_s)),))
            return ssh.run_one(gateway, payload, timeout_s * rounds + 30, deadline)

        results: dict[str, HostRun] = {}

        def gateway_done(run: HostRun) -> None:
            decoded, stopped = decode_runs(run.stdout)
            got = {r.host: r for r in decoded if r.host in plan[run.host]}
            for host in plan[run.host]:
                if host in got:
                    result = got[host]
                else:
                    why = stopped or run.reason or f"relay exited {run.rc}"
                    status = run.status if run.status != HostStatus.OK else HostStatus.FAILED
                    result = HostRun(host, status, reason=f"via gateway {run.host}: no result ({why})")
                results[host] = result
                if on_done:
                    on_done(result)

        run_fanout(list(plan), via_gateway, fanout=len(plan), deadline_s=self.deadline_s, on_done=gateway_done)
        return [results[h] for h in hosts if h in results]
