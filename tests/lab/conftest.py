"""The namespace lab: six "hosts", each a network namespace with its own address and its own real sshd.

    host side                         namespaces (ip netns)
    fcbr0 10.77.0.1/24 --- fcv1 ==== fcnic1 10.77.0.11  fc-h1  sshd                      clean
                       --- fcv2 ==== fcnic2 10.77.0.12  fc-h2  sshd, tc tbf 10mbit       downshifted link
                       --- fcv3 ==== fcnic3 10.77.0.13  fc-h3  sshd, flapped by a test   link flaps
                       --- fcv4 ==== fcnic4 10.77.0.14  fc-h4  sshd, nft 20% drop        lossy link
                       --- fcv5 ==== fcnic5 10.77.0.15  fc-h5  no sshd                   unreachable
                       --- fcv6 ==== fcnic6 10.77.0.16  fc-h6  sshd: ForceCommand sleep  capture hangs
                                                                port 2222: echo garbage  garbage stream

Each sshd is started with `ip netns exec`, which gives it (and every session it starts) the namespace's own
/sys, so a capture over ssh reads that namespace's interfaces and counters. The client side is a generated
ssh config (aliases lab-h1..lab-h6 and a few for bad inputs) handed to the transport as `-F FILE`, so the
user's own ~/.ssh/config is never read. Needs root, iproute2, tc, nft, iperf3 and Debian's openssh-server;
skipped with a reason elsewhere, failed instead when CI=true. Everything is torn down at the end, and
leftovers of a crashed earlier run (same fc- names) are removed first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

import pytest

BRIDGE = "fcbr0"
NET = "10.77.0"
HOST_IP = f"{NET}.1"
N_HOSTS = 6
IPERF_PORT = 5201
SSHD = "/usr/sbin/sshd"
TOOLS = ("ip", "ss", "tc", "nft", "iperf3", "ssh", "ssh-keygen")
LOCK = "/run/fabricase-lab.lock"  # one lab per machine: the names are fixed, a second run would tear this one down
LOCK_WAIT_S = 300


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the namespace lab must run in CI: {reason}")
    pytest.skip(reason)


def sh(*argv: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def ns_sh(ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", ns, *argv, check=check)


@dataclass(frozen=True)
class LabHost:
    index: int
    alias: str  # the ssh config alias the tests capture
    ns: str
    ip: str
    ifname: str  # the namespace side of its veth
    peer: str  # the host side, a port of the bridge


@dataclass
class Lab:
    tmp: Path
    ssh_config: Path
    key: Path
    hosts: dict[str, LabHost]  # by alias
    daemons: list[subprocess.Popen] = field(default_factory=list)

    def by_index(self, i: int) -> LabHost:
        return self.hosts[f"lab-h{i}"]

    @property
    def ssh_options(self) -> tuple[str, ...]:
        return (f"-F {self.ssh_config}",)

    def transport(self, **kw):
        from fabricase.transports.ssh import SshTransport

        kw.setdefault("connect_timeout_s", 3)
        return SshTransport(ssh_options=self.ssh_options, **kw)

    def read_in_ns(self, host: LabHost, path: str) -> str:
        return ns_sh(host.ns, "cat", path).stdout

    def nft_counter(self, host: LabHost, name: str = "lossy") -> int:
        out = json.loads(ns_sh(host.ns, "nft", "-j", "list", "counter", "inet", "fcdrop", name).stdout)
        return next(o["counter"]["packets"] for o in out["nftables"] if "counter" in o)

    @contextlib.contextmanager
    def iperf3_server(self, host: LabHost) -> Iterator[None]:
        proc = subprocess.Popen(["ip", "netns", "exec", host.ns, "iperf3", "-s", "-B", host.ip, "-p", str(IPERF_PORT)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            _wait(lambda: f":{IPERF_PORT}" in ns_sh(host.ns, "ss", "-Hltn").stdout, 5, f"iperf3 in {host.ns}")
            yield
        finally:
            proc.kill()
            proc.wait()

    def iperf3(self, host: LabHost, *args: str, seconds: float = 1) -> dict:
        """A client on the host side; JSON result. Add "-R" to have the namespace send."""
        out = sh("iperf3", "-c", host.ip, "-p", str(IPERF_PORT), "-t", f"{seconds:g}", "-J", *args,
                 check=False, timeout=30).stdout
        return json.loads(out)


def _wait(cond, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def _port_open(ip: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((ip, port)) == 0


def processes_in(ns: str) -> list[list[str]]:
    """argv of every process in a namespace (ip netns pids)."""
    out = []
    for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
        with contextlib.suppress(OSError):
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1])
    return out


def wait_for_interval_sleep(ns: str, interval_s: float, timeout: float = 15) -> bool:
    """True once the capture script in `ns` has taken snapshot 0 and sleeps the interval (`sleep N`)."""
    want = ["sleep", f"{interval_s:g}"]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if want in processes_in(ns):
            return True
        time.sleep(0.03)
    return False


def remove_lab(ns_prefix: str, links: list[str], bridge: str) -> None:
    """Remove a namespace lab and whatever a crashed earlier run left: processes in its namespaces, the
    namespaces (their veths and nft tables go with them), stray bridge ports, the bridge. Shared with the probe
    lab (tests/probe/conftest.py)."""
    names = [ln.split()[0] for ln in sh("ip", "netns", "list", check=False).stdout.splitlines() if ln.strip()]
    for ns in (n for n in names if n.startswith(ns_prefix)):
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        sh("ip", "netns", "del", ns, check=False)
    for link in links:
        sh("ip", "link", "del", link, check=False)
    sh("ip", "link", "del", bridge, check=False)


def cleanup() -> None:
    remove_lab("fc-h", [f"fcv{i}" for i in range(1, N_HOSTS + 1)], BRIDGE)


def make_network(bridge: str, host_ip: str, hosts: list) -> None:
    """A bridge with the host side's address, and per host a namespace joined to it by a veth pair."""
    sh("ip", "link", "add", bridge, "type", "bridge")
    sh("ip", "addr", "add", f"{host_ip}/24", "dev", bridge)
    sh("ip", "link", "set", bridge, "up")
    for h in hosts:
        sh("ip", "netns", "add", h.ns)
        sh("ip", "link", "add", h.peer, "type", "veth", "peer", "name", h.ifname, "netns", h.ns)
        sh("ip", "link", "set", h.peer, "master", bridge, "up")
        sh("ip", "-n", h.ns, "addr", "add", f"{h.ip}/24", "dev", h.ifname)
        sh("ip", "-n", h.ns, "link", "set", h.ifname, "up")
        sh("ip", "-n", h.ns, "link", "set", "lo", "up")


def sshd_config_lines(tmp: Path, host, authorized: Path, *, max_startups: int = 50) -> list[str]:
    """A namespace host's sshd: its address, its generated host key, key authentication only."""
    d = tmp / host.ns
    return [
        f"ListenAddress {host.ip}:22",
        f"HostKey {d / 'host_ed25519'}",
        f"PidFile {d / 'sshd.pid'}",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        f"AuthorizedKeysFile {authorized}",
        "StrictModes no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UseDNS no",
        "PrintMotd no",
        f"MaxStartups {max_startups}",
        "LogLevel INFO",
    ]


def _keygen(path: Path) -> str:
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fabricase-lab", "-f", str(path))
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


def _sshd_config(tmp: Path, host: LabHost, authorized: Path) -> Path:
    d = tmp / host.ns
    lines = sshd_config_lines(tmp, host, authorized)
    if host.index == 6:  # the capture hangs on port 22; port 2222 answers with garbage
        lines += [f"ListenAddress {host.ip}:2222", "Match LocalPort 22", "  ForceCommand sleep 600",
                  "Match LocalPort 2222", "  ForceCommand echo garbage"]
    path = d / "sshd_config"
    path.write_text("\n".join(lines) + "\n")
    return path


def _client_config(tmp: Path, hosts: list[LabHost], key: Path, wrong_key: Path, known: Path,
                   other_known: Path) -> Path:
    h1, h3, h6 = hosts[0], hosts[2], hosts[5]
    blocks = [
        # bad inputs: a key the host does not accept; known_hosts holding another key for the host
        ("lab-h1-wrongkey", [f"HostName {h1.ip}", f"IdentityFile {wrong_key}"]),
        ("lab-h1-newhostkey", [f"HostName {h1.ip}", f"IdentityFile {key}", f"UserKnownHostsFile {other_known}"]),
        ("lab-h6-garbage", [f"HostName {h6.ip}", "Port 2222", f"IdentityFile {key}"]),
        # what a user's ~/.ssh/config does: a multiplexed master, a jump host
        ("lab-h1-cm", [f"HostName {h1.ip}", f"IdentityFile {key}", "ControlMaster auto",
                       f"ControlPath {tmp}/cm-%C", "ControlPersist 30"]),
        ("lab-h3-jump", [f"HostName {h3.ip}", f"IdentityFile {key}", "ProxyJump lab-h1"]),
        *((h.alias, [f"HostName {h.ip}", f"IdentityFile {key}"]) for h in hosts),
        ("*", ["User root", "IdentitiesOnly yes", f"UserKnownHostsFile {known}", "GlobalKnownHostsFile /dev/null",
               "StrictHostKeyChecking yes"]),
    ]
    text = "".join(f"Host {name}\n" + "".join(f"  {line}\n" for line in body) for name, body in blocks)
    path = tmp / "ssh_config"
    path.write_text(text)
    return path


def _start(tmp: Path, key: Path) -> Lab:
    hosts = [LabHost(i, f"lab-h{i}", f"fc-h{i}", f"{NET}.{10 + i}", f"fcnic{i}", f"fcv{i}")
             for i in range(1, N_HOSTS + 1)]
    make_network(BRIDGE, HOST_IP, hosts)

    # faults that stay for the whole session
    ns_sh("fc-h2", "tc", "qdisc", "add", "dev", "fcnic2", "root", "tbf", "rate", "10mbit", "burst", "32kbit",
          "latency", "50ms")
    nft = subprocess.run(["ip", "netns", "exec", "fc-h4", "nft", "-f", "-"], capture_output=True, text=True, input=(
        "table inet fcdrop {\n"
        "  counter lossy { }\n"
        "  chain input {\n"
        "    type filter hook input priority 0; policy accept;\n"
        # 20% of the data segments iperf3 sends to it; never a SYN or a small control message, whose loss
        # would cost a 1 s (SYN) or 200 ms+ retransmission timeout and push the run past the capture interval
        f'    iifname "fcnic4" ip saddr {HOST_IP} tcp dport {IPERF_PORT} tcp flags & syn == 0 meta length > 200 '
        'numgen random mod 100 < 20 counter name "lossy" drop\n'
        "  }\n"
        "}\n"))
    if nft.returncode != 0:
        raise RuntimeError(f"nft in fc-h4: {nft.stderr.strip()}")

    wrong_key = tmp / "wrong_key"
    authorized = tmp / "authorized_keys"
    authorized.write_text(_keygen(key) + "\n")
    _keygen(wrong_key)
    known_lines, other_lines = [], []
    other_key = _keygen(tmp / "other_host_key")
    lab = Lab(tmp, tmp / "ssh_config", key, {h.alias: h for h in hosts})
    for h in hosts:
        (tmp / h.ns).mkdir()
        pub = _keygen(tmp / h.ns / "host_ed25519")
        known_lines.append(f"{h.ip} {pub}")
        if h.index == 6:
            known_lines.append(f"[{h.ip}]:2222 {pub}")
        if h.index == 1:
            other_lines.append(f"{h.ip} {other_key}")
    known, other_known = tmp / "known_hosts", tmp / "known_hosts_other"
    known.write_text("\n".join(known_lines) + "\n")
    other_known.write_text("\n".join(other_lines) + "\n")
    _client_config(tmp, hosts, key, wrong_key, known, other_known)

    for h in hosts:
        if h.index == 5:  # its sshd is not running: connection refused
            continue
        cfg = _sshd_config(tmp, h, authorized)
        check = sh(SSHD, "-t", "-f", str(cfg), check=False)
        if check.returncode != 0:
            raise RuntimeError(f"sshd -t for {h.ns}: {check.stderr.strip()}")
        with open(tmp / h.ns / "sshd.log", "wb") as log:
            lab.daemons.append(subprocess.Popen(["ip", "netns", "exec", h.ns, SSHD, "-D", "-e", "-f", str(cfg)],
                                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    for h in hosts:
        if h.index != 5:
            try:
                _wait(lambda h=h: _port_open(h.ip, 22), 10, f"sshd in {h.ns}")
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}: {(tmp / h.ns / 'sshd.log').read_text()[-500:]}") from exc
    return lab


def _stop(lab: Lab | None) -> None:
    if lab is not None:
        with contextlib.suppress(Exception):
            sh("ssh", "-F", str(lab.ssh_config), "-O", "exit", "lab-h1-cm", check=False, timeout=5)
        for proc in lab.daemons:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
    cleanup()


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    if os.geteuid() != 0:
        unavailable("the namespace lab needs root (ip netns, bridges, sshd)")
    missing = [t for t in TOOLS if shutil.which(t) is None] + ([SSHD] if not os.access(SSHD, os.X_OK) else [])
    if missing:
        unavailable(f"the namespace lab needs {', '.join(missing)} (Debian: iproute2 nftables iperf3 "
                    "openssh-client openssh-server)")
    probe = sh("ip", "netns", "add", "fc-probe", check=False)
    sh("ip", "netns", "del", "fc-probe", check=False)
    if probe.returncode != 0:
        unavailable(f"network namespaces are not available here: {probe.stderr.strip()}")
    lock = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    waited = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > waited:
                os.close(lock)
                unavailable(f"another namespace lab run held {LOCK} for {LOCK_WAIT_S}s")
            time.sleep(0.5)
    try:
        yield from _lab_session()
    finally:
        os.close(lock)  # releases the lock


def _lab_session() -> Iterator[Lab]:
    cleanup()
    made_run_sshd = not os.path.isdir("/run/sshd")
    if made_run_sshd:
        os.makedirs("/run/sshd", mode=0o755)
    tmp = Path(tempfile.mkdtemp(prefix="fc-lab-"))  # short: ControlPath sockets live here
    lab = None
    try:
        lab = _start(tmp, tmp / "client_key")
        yield lab
    finally:
        _stop(lab)
        shutil.rmtree(tmp, ignore_errors=True)
        if made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)


@contextlib.contextmanager
def ssh_collect_options(lab: Lab, **transport_kw) -> Iterator[dict]:
    """CollectOptions fields for `--via ssh` in the lab.

    The lab's ssh config goes through the real path: CollectOptions.ssh_options -> get_transport ->
    SshTransport.from_options (while the registry does not list ssh yet, it is pointed at SshTransport here).
    A test that needs transport settings the options do not carry (`transport_kw`, e.g. max_output_bytes) gets
    a configured SshTransport from the pipeline's get_transport instead."""
    from fabricase import pipeline, transports
    from fabricase.transports.ssh import SshTransport

    with pytest.MonkeyPatch.context() as mp:
        if transport_kw or "ssh_options" not in {f.name for f in fields(pipeline.CollectOptions)}:
            real = pipeline.get_transport

            def get_transport(name: str, **options):
                return lab.transport(**transport_kw) if name == "ssh" else real(name, **options)

            mp.setattr(pipeline, "get_transport", get_transport)
            yield {"via": "ssh"}
            return
        if transports.TRANSPORTS.get("ssh") is None:
            local = transports.TRANSPORTS["local"]
            mp.setitem(transports.TRANSPORTS, "ssh",
                       "fabricase.transports.ssh:SshTransport" if isinstance(local, str) else SshTransport)
        yield {"via": "ssh", "ssh_options": lab.ssh_options}


def in_thread(fn, *args) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def target() -> None:
        try:
            box["result"] = fn(*args)
        except Exception as exc:  # reported by the test that reads the box
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box
