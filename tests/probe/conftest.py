"""The probe lab: eight "hosts", each a network namespace with its own address, its own process table and its
own real sshd, joined by one bridge, so that pair tests and collectives run between real sockets and a slow link
is a real shaper on a real veth.

    host side                          namespaces (ip netns + a pid namespace each)
    fcbr1 10.78.0.1/24 --- fcpv1 ==== fcpn1 10.78.0.11  fc-p1  sshd   alias probe-h1
                       --- fcpv2 ==== fcpn2 10.78.0.12  fc-p2  sshd   alias probe-h2
                       ...
                       --- fcpv8 ==== fcpn8 10.78.0.18  fc-p8  sshd   alias probe-h8

A slow link (`slow_link(i, rate)`) is a tc tbf on both ends of host i's veth: the namespace side shapes what
host i sends, the bridge port what it receives.

Each sshd runs in its own pid namespace (with its own /proc) as well as its own network namespace, because the
probe's sweep finds what it left by reading /proc/*/environ: with one shared process table, sweeping host 3
would also kill what the probe runs on host 4 under the same tag, which never happens between real hosts.
From this side every process is still visible, so `probe_processes(i)` reads them by network namespace.

The client side is a generated ssh config (`-F FILE`, so the user's ~/.ssh/config is never read) with aliases
probe-h1..probe-h8, a generated known_hosts and BatchMode. The sshd sessions have sshd's default PATH
(/usr/bin holds python3, which the stand-in tools need); the probe prefixes its tools path to it.

The lock: both labs take /run/fabricase-lab.lock, so that the two never run at once from two processes (a
2-core machine: the bandwidth figures would be noise). Within one pytest process the 6-host lab's session
fixture holds that lock until the session ends, so this lab (1) goes ahead when its own process already holds
the lock (the other lab sits idle while these tests run: tests run one at a time), and (2) is package-scoped,
so it is torn down, and its lock released, after the last test under tests/probe, before tests/lab starts when
tests/probe runs first. Only an interleaving of tests/lab and tests/probe tests (a random-order plugin) would
make the 6-host lab wait for the lock and then skip.

Needs root, iproute2, tc, iperf3, unshare, ssh and Debian's openssh-server; skipped with a reason elsewhere,
failed instead when CI=true. Leftovers of a crashed earlier run (fc-p*, fcpv*, fcbr1) are removed first and
everything is torn down at the end, even on failure.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lab.conftest import (
    LOCK,
    LOCK_WAIT_S,
    SSHD,
    LabHost,
    _keygen,
    _port_open,
    _wait,
    make_network,
    ns_sh,
    remove_lab,
    sh,
    sshd_config_lines,
    unavailable,
)

__all__ = ["BRIDGE", "N_HOSTS", "NET", "ProbeHost", "ProbeLab", "probe_lab", "tbf_args"]

BRIDGE = "fcbr1"
NET = "10.78.0"
HOST_IP = f"{NET}.1"
N_HOSTS = 8
TOOLS = ("ip", "tc", "iperf3", "ssh", "ssh-keygen", "unshare")
TAG_VAR = "FABRICASE_PROBE"  # as fabricase.probe.exec.TAG_VAR; spelled here so the lab imports nothing to test
STANDINS = Path(__file__).parent / "standins"

ProbeHost = LabHost  # index, alias, ns, ip, ifname (namespace side), peer (bridge port): the 6-host lab's record


def tbf_args(rate: str) -> list[str]:
    """tc tbf parameters that make iperf3 measure close to `rate`: a bucket of ~10 ms of the rate (at least
    16 KiB, so one full-size segment always fits and a low rate is not starved), and a 100 ms queue so TCP
    keeps the link busy instead of losing its window to drops."""
    bits = _rate_bits(rate)
    burst = max(16 * 1024, bits // 8 // 100)
    return ["rate", rate, "burst", str(burst), "latency", "100ms"]


def _rate_bits(rate: str) -> int:
    units = {"kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "bit": 1}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return int(float(rate[: -len(unit)]) * scale)
    raise ValueError(f"rate must be like 20mbit, 500kbit or 1gbit: {rate!r}")


def _tagged(pid: str, tag: str | None) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    want = f"{TAG_VAR}=".encode()
    return any(e.startswith(want) and (tag is None or e == want + tag.encode()) for e in env)


def _cmdline(pid: str) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")[:-1] or None


@dataclass
class ProbeLab:
    tmp: Path
    ssh_config: Path
    key: Path
    by_alias: dict[str, ProbeHost]
    daemons: list[subprocess.Popen] = field(default_factory=list)
    tools_path: str = str(STANDINS)

    @property
    def hosts(self) -> list[str]:
        """The aliases in order, probe-h1 first."""
        return [self.host(i).alias for i in range(1, N_HOSTS + 1)]

    def host(self, i: int) -> ProbeHost:
        return self.by_alias[f"probe-h{i}"]

    @property
    def ssh_options(self) -> tuple[str, ...]:
        return (f"-F {self.ssh_config}",)

    def ssh_exec(self, **kw):
        """An SshExec into the lab (the stand-ins' tools path unless told otherwise)."""
        from fabricase.probe.exec import SshExec

        kw.setdefault("tools_path", self.tools_path)
        kw.setdefault("connect_timeout_s", 5)
        return SshExec(ssh_options=self.ssh_options, **kw)

    def set_slow(self, i: int, rate: str = "20mbit") -> None:
        """Shape host i's link to `rate` both ways: what it sends (namespace side) and what it receives (the
        bridge port's egress toward it)."""
        h = self.host(i)
        args = tbf_args(rate)
        ns_sh(h.ns, "tc", "qdisc", "replace", "dev", h.ifname, "root", "tbf", *args)
        sh("tc", "qdisc", "replace", "dev", h.peer, "root", "tbf", *args)

    def clear_slow(self, i: int) -> None:
        h = self.host(i)
        ns_sh(h.ns, "tc", "qdisc", "del", "dev", h.ifname, "root", check=False)
        sh("tc", "qdisc", "del", "dev", h.peer, "root", check=False)

    @contextlib.contextmanager
    def slow_link(self, i: int, rate: str = "20mbit") -> Iterator[ProbeHost]:
        self.set_slow(i, rate)
        try:
            yield self.host(i)
        finally:
            self.clear_slow(i)

    def qdiscs(self, i: int) -> tuple[str, str]:
        """`tc qdisc show` of host i's link: (namespace side, bridge port)."""
        h = self.host(i)
        return (ns_sh(h.ns, "tc", "qdisc", "show", "dev", h.ifname).stdout,
                sh("tc", "qdisc", "show", "dev", h.peer).stdout)

    def probe_processes(self, i: int, tag: str | None = None) -> list[list[str]]:
        """argv of the processes in host i whose environment holds FABRICASE_PROBE (=`tag` when given): what a
        probe left behind there."""
        out = []
        for pid in sh("ip", "netns", "pids", self.host(i).ns, check=False).stdout.split():
            if _tagged(pid, tag) and (argv := _cmdline(pid)) is not None:
                out.append(argv)
        return out

    def all_probe_processes(self, tag: str | None = None) -> dict[str, list[list[str]]]:
        """By alias, the hosts where a probe left something (hosts with nothing are left out)."""
        found = {self.host(i).alias: self.probe_processes(i, tag) for i in range(1, N_HOSTS + 1)}
        return {alias: procs for alias, procs in found.items() if procs}


def cleanup() -> None:
    """Remove the lab and whatever a crashed earlier run left (fc-p* namespaces, fcpv* ports, the bridge)."""
    remove_lab("fc-p", [f"fcpv{i}" for i in range(1, N_HOSTS + 1)], BRIDGE)


def _sshd_config(tmp: Path, host: ProbeHost, authorized: Path) -> Path:
    # a probe round opens a server and a client session on every host at once, plus its sweeps
    lines = [*sshd_config_lines(tmp, host, authorized, max_startups=100), "MaxSessions 50"]
    path = tmp / host.ns / "sshd_config"
    path.write_text("\n".join(lines) + "\n")
    return path


def _client_config(tmp: Path, hosts: list[ProbeHost], key: Path, known: Path) -> Path:
    blocks = [*((h.alias, [f"HostName {h.ip}", f"IdentityFile {key}"]) for h in hosts),
              ("*", ["User root", "IdentitiesOnly yes", f"UserKnownHostsFile {known}",
                     "GlobalKnownHostsFile /dev/null", "StrictHostKeyChecking yes", "BatchMode yes"])]
    text = "".join(f"Host {name}\n" + "".join(f"  {line}\n" for line in body) for name, body in blocks)
    path = tmp / "ssh_config"
    path.write_text(text)
    return path


def _start(tmp: Path) -> ProbeLab:
    hosts = [ProbeHost(i, f"probe-h{i}", f"fc-p{i}", f"{NET}.{10 + i}", f"fcpn{i}", f"fcpv{i}")
             for i in range(1, N_HOSTS + 1)]
    make_network(BRIDGE, HOST_IP, hosts)
    key = tmp / "client_key"
    authorized = tmp / "authorized_keys"
    authorized.write_text(_keygen(key) + "\n")
    known_lines = []
    for h in hosts:
        (tmp / h.ns).mkdir()
        known_lines.append(f"{h.ip} {_keygen(tmp / h.ns / 'host_ed25519')}")
    known = tmp / "known_hosts"
    known.write_text("\n".join(known_lines) + "\n")
    lab = ProbeLab(tmp, _client_config(tmp, hosts, key, known), key, {h.alias: h for h in hosts})
    for h in hosts:
        cfg = _sshd_config(tmp, h, authorized)
        check = sh(SSHD, "-t", "-f", str(cfg), check=False)
        if check.returncode != 0:
            raise RuntimeError(f"sshd -t for {h.ns}: {check.stderr.strip()}")
        with open(tmp / h.ns / "sshd.log", "wb") as log:
            # its own pid namespace and /proc: see the module doc (the sweep reads /proc/*/environ)
            argv = ["ip", "netns", "exec", h.ns, "unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                    SSHD, "-D", "-e", "-f", str(cfg)]
            lab.daemons.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    for h in hosts:
        try:
            _wait(lambda h=h: _port_open(h.ip, 22), 10, f"sshd in {h.ns}")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {(tmp / h.ns / 'sshd.log').read_text()[-500:]}") from exc
    return lab


def _stop(lab: ProbeLab | None) -> None:
    if lab is not None:
        for proc in lab.daemons:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
    cleanup()


def _held_here(fd: int) -> bool:
    """Whether this process already holds the lab lock (the 6-host lab's session fixture took it): /proc/locks
    names the holder's pid and the file's inode."""
    inode = os.fstat(fd).st_ino
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[1] == "FLOCK" and parts[4] == str(os.getpid()) \
                    and parts[5].rsplit(":", 1)[-1] == str(inode):
                return True
    return False


@contextlib.contextmanager
def _lab_lock() -> Iterator[None]:
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _held_here(fd):
            yield
            return
        waited = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > waited:
                    unavailable(f"another namespace lab run held {LOCK} for {LOCK_WAIT_S}s")
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)  # releases the lock when this fd took it


def _check_machine() -> None:
    if os.geteuid() != 0:
        unavailable("the probe lab needs root (ip netns, bridges, tc, sshd)")
    missing = [t for t in TOOLS if shutil.which(t) is None] + ([SSHD] if not os.access(SSHD, os.X_OK) else [])
    if missing:
        unavailable(f"the probe lab needs {', '.join(missing)} (Debian: iproute2 iperf3 util-linux "
                    "openssh-client openssh-server)")
    probe = sh("ip", "netns", "add", "fc-p-check", check=False)
    sh("ip", "netns", "del", "fc-p-check", check=False)
    if probe.returncode != 0:
        unavailable(f"network namespaces are not available here: {probe.stderr.strip()}")


@pytest.fixture(scope="package")
def probe_lab() -> Iterator[ProbeLab]:
    """The 8-host lab, shared by every test under tests/probe (package scope: see the module doc)."""
    _check_machine()
    with _lab_lock():
        cleanup()
        made_run_sshd = not os.path.isdir("/run/sshd")
        if made_run_sshd:
            os.makedirs("/run/sshd", mode=0o755)
        tmp = Path(tempfile.mkdtemp(prefix="fc-probe-"))
        lab = None
        try:
            lab = _start(tmp)
            yield lab
        finally:
            _stop(lab)
            shutil.rmtree(tmp, ignore_errors=True)
            if made_run_sshd:
                shutil.rmtree("/run/sshd", ignore_errors=True)
