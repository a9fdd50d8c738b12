"""`--via ssh` on the namespace lab (see conftest.py): real sshd per host, real faults, the real pipeline.

One fleet capture (module fixture) covers the good hosts, the injected faults and the bad inputs at once,
as a user would meet them: ten targets, one `collect`, every host ending with a status and a reason.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from fabricase.analysis import analyze
from fabricase.models import Capture, Finding, HostCapture, HostStatus
from fabricase.parsers.iperf3 import parse_iperf3
from fabricase.parsers.procnet import parse_proc_net_snmp
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from fabricase.transports import HostRun

from .conftest import Lab, in_thread, sh, ssh_collect_options, wait_for_interval_sleep

INTERVAL = 3  # long enough for the h3 flaps and the h4 iperf3 run to fall between the two snapshots
TIMEOUT = 7  # per host: the good hosts need about INTERVAL + 1 s; lab-h6 hangs until this
FLAPS = 3
COLLECTORS = ("identity", "netdev", "netstat")
GOOD = ("lab-h1", "lab-h2", "lab-h3", "lab-h4")
TARGETS = (*GOOD, "lab-h5", "lab-h6", "lab-h1-wrongkey", "lab-h1-newhostkey", "lab-h6-garbage",
           "fc-nosuch.invalid")


@dataclass
class Fleet:
    capture: Capture
    findings: list[Finding]
    runs: list[HostRun]
    flaps: dict
    traffic: dict
    dropped: int  # packets the nft rule in fc-h4 dropped during the capture


def _text(hc: HostCapture, source: str, snapshot: int = 0) -> str:
    item = hc.item(source, snapshot)
    assert item is not None, f"{hc.host}: {source} (snapshot {snapshot}) not captured"
    return hc.read(item).decode()


def _delta(hc: HostCapture, source: str) -> int:
    return int(_text(hc, source, 1)) - int(_text(hc, source, 0))


@pytest.fixture(scope="module")
def fleet(lab: Lab, tmp_path_factory) -> Fleet:
    h3, h4 = lab.by_index(3), lab.by_index(4)

    def flap() -> tuple[int, int]:
        # Between the snapshots: the capture script in fc-h3 has read its counters and sleeps the interval.
        if not wait_for_interval_sleep(h3.ns, INTERVAL):
            raise RuntimeError("the capture in fc-h3 never reached its interval")
        path = f"/sys/class/net/{h3.ifname}/carrier_changes"
        before = int(lab.read_in_ns(h3, path))
        for _ in range(FLAPS):
            sh("ip", "-n", h3.ns, "link", "set", h3.ifname, "down")
            time.sleep(0.1)
            sh("ip", "-n", h3.ns, "link", "set", h3.ifname, "up")
            time.sleep(0.1)
        return before, int(lab.read_in_ns(h3, path))

    def lossy_traffic() -> dict:
        if not wait_for_interval_sleep(h4.ns, INTERVAL):
            raise RuntimeError("the capture in fc-h4 never reached its interval")
        return lab.iperf3(h4, seconds=1)  # host side -> fc-h4, through its 20% drop rule

    out = tmp_path_factory.mktemp("fleet") / "capture"
    runs: list[HostRun] = []
    with lab.iperf3_server(h4):
        drops0 = lab.nft_counter(h4)
        t3, flaps = in_thread(flap)
        t4, traffic = in_thread(lossy_traffic)
        with ssh_collect_options(lab) as kw:
            opts = CollectOptions(**kw, interval_s=INTERVAL, timeout_s=TIMEOUT, collectors=COLLECTORS)
            capture = collect(Targets(hosts=TARGETS, nodeset=",".join(TARGETS)), opts, out, on_host=runs.append)
        t3.join(15)
        t4.join(30)
        dropped = lab.nft_counter(h4) - drops0
    return Fleet(capture, analyze(capture), runs, flaps, traffic, dropped)


def test_every_host_ends_with_its_status(fleet: Fleet) -> None:
    status = {hc.host: hc.status for hc in fleet.capture.hosts}
    assert status == {
        "lab-h1": HostStatus.OK, "lab-h2": HostStatus.OK, "lab-h3": HostStatus.OK, "lab-h4": HostStatus.OK,
        "lab-h5": HostStatus.UNREACHABLE,
        "lab-h6": HostStatus.TIMED_OUT,
        "lab-h1-wrongkey": HostStatus.AUTH_FAILED,
        "lab-h1-newhostkey": HostStatus.AUTH_FAILED,
        "lab-h6-garbage": HostStatus.FAILED,
        "fc-nosuch.invalid": HostStatus.UNREACHABLE,
    }, {hc.host: hc.reason for hc in fleet.capture.hosts}
    assert sorted(r.host for r in fleet.runs) == sorted(TARGETS)  # on_done once per host
    assert all(hc.transport == "ssh" for hc in fleet.capture.hosts)


def test_each_failure_says_why(fleet: Fleet) -> None:
    reason = {hc.host: hc.reason or "" for hc in fleet.capture.hosts}
    assert all(reason[h] == "" for h in GOOD), reason
    assert "Connection refused" in reason["lab-h5"] and "10.77.0.15" in reason["lab-h5"]
    assert reason["lab-h6"] == f"capture did not finish within {TIMEOUT}s"
    assert reason["lab-h1-wrongkey"].startswith("ssh key refused") and "Permission denied" in reason["lab-h1-wrongkey"]
    assert reason["lab-h1-newhostkey"].startswith("host key changed")
    assert reason["lab-h6-garbage"].startswith("capture stream:")
    assert "Could not resolve hostname fc-nosuch.invalid" in reason["fc-nosuch.invalid"]
    # the reason is in the capture directory too, and the host's folder exists with an empty index
    for host in ("lab-h5", "lab-h6", "lab-h1-wrongkey"):
        assert (fleet.capture.root / "hosts" / host / "host.json").is_file()
        assert not fleet.capture.host(host).items
    assert not [f for f in fleet.findings if f.kind == "host-unreachable" and f.host in GOOD]


def test_each_host_reports_its_own_namespace(fleet: Fleet, lab: Lab) -> None:
    """ip netns exec gave each sshd (and so each capture) its namespace's /sys and /proc/net."""
    seen_addresses = set()
    for alias in GOOD:
        h, hc = lab.hosts[alias], fleet.capture.host(alias)
        names = {it.source.split("/")[4] for it in hc.matching("/sys/class/net/*/ifindex")}
        assert names == {"lo", h.ifname}, f"{alias} saw {names}"
        for attr in ("ifindex", "address", "mtu"):
            source = f"/sys/class/net/{h.ifname}/{attr}"
            assert _text(hc, source) == lab.read_in_ns(h, source), f"{alias}: {attr}"
        seen_addresses.add(_text(hc, f"/sys/class/net/{h.ifname}/address"))
        dev = _text(hc, "/proc/net/dev")
        assert f"{h.ifname}:" in dev and not any(f"fcnic{i}:" in dev for i in range(1, 7) if i != h.index)
        assert _delta(hc, f"/sys/class/net/{h.ifname}/statistics/rx_packets") > 0  # the ssh session itself
    assert len(seen_addresses) == len(GOOD)


def test_link_flaps_show_as_carrier_changes(fleet: Fleet, lab: Lab) -> None:
    assert "error" not in fleet.flaps, fleet.flaps.get("error")
    before, after = fleet.flaps["result"]
    assert after - before >= 2 * FLAPS  # a veth counts carrier off and carrier on
    h3 = lab.by_index(3)
    hc = fleet.capture.host("lab-h3")
    assert _delta(hc, f"/sys/class/net/{h3.ifname}/carrier_changes") == after - before
    flaps = [f for f in fleet.findings if f.kind == "link-flap"]
    assert [(f.host, f.component) for f in flaps] == [("lab-h3", f"netdev:{h3.ifname}")], flaps
    for alias in ("lab-h1", "lab-h2", "lab-h4"):
        h = lab.hosts[alias]
        assert _delta(fleet.capture.host(alias), f"/sys/class/net/{h.ifname}/carrier_changes") == 0


def test_lossy_link_drops_show_in_the_captured_counters(fleet: Fleet, lab: Lab) -> None:
    assert "error" not in fleet.traffic, fleet.traffic.get("error")
    result = parse_iperf3(json.dumps(fleet.traffic["result"]))
    assert result.ok, result.error or result.errors
    assert result.retransmits and result.retransmits > 0  # the sender saw the losses
    assert fleet.dropped >= 5  # the nft rule's own counter (GRO: one dropped packet may hold many segments)
    def undelivered(alias: str) -> int:  # IPv4 packets received during the interval but never delivered
        hc = fleet.capture.host(alias)
        s0, s1 = (parse_proc_net_snmp(_text(hc, "/proc/net/snmp", s))["Ip"] for s in (0, 1))
        return (s1["InReceives"] - s0["InReceives"]) - (s1["InDelivers"] - s0["InDelivers"])

    # netfilter drops on input count as received, never delivered: the capture of fc-h4 sees the loss (nearly
    # all of it: the run's last segments may come just after the second snapshot)
    assert undelivered("lab-h4") >= max(5, 0.8 * fleet.dropped)
    assert undelivered("lab-h1") < undelivered("lab-h4")  # a clean host
    hc = fleet.capture.host("lab-h4")
    netstat = [parse_proc_net_snmp(_text(hc, "/proc/net/netstat", s)) for s in (0, 1)]
    assert netstat[1]["TcpExt"]["TCPOFOQueue"] > netstat[0]["TcpExt"]["TCPOFOQueue"]  # holes in the stream
    def rx_bytes(i: int) -> int:
        return _delta(fleet.capture.host(f"lab-h{i}"), f"/sys/class/net/{lab.by_index(i).ifname}/statistics/rx_bytes")

    assert rx_bytes(4) > 10 * rx_bytes(1)  # the iperf3 traffic fell between the snapshots; h1 had only its ssh


def test_downshifted_link_measured_by_iperf3(lab: Lab) -> None:
    """tc tbf 10mbit on fc-h2's interface: iperf3 (the namespace sending) gets under 15 Mbit/s, a clean one
    gets far more."""
    h1, h2 = lab.by_index(1), lab.by_index(2)
    with lab.iperf3_server(h1), lab.iperf3_server(h2):
        t, slow = in_thread(lab.iperf3, h2, "-R")
        fast = lab.iperf3(h1, "-R")
        t.join(30)
    slow_r, fast_r = parse_iperf3(json.dumps(slow["result"])), parse_iperf3(
        json.dumps(fast))
    assert slow_r.ok and fast_r.ok, (slow_r.error, fast_r.error)
    assert slow_r.received_bps < 15e6, slow_r.received_bps
    assert fast_r.received_bps > 10 * slow_r.received_bps, (fast_r.received_bps, slow_r.received_bps)
    qdisc = sh("ip", "netns", "exec", h2.ns, "tc", "qdisc", "show", "dev", h2.ifname).stdout
    assert "tbf" in qdisc and "10Mbit" in qdisc


def test_output_over_the_cap_is_cut_and_kept(lab: Lab, tmp_path: Path) -> None:
    cap = 4096
    with ssh_collect_options(lab, max_output_bytes=cap) as kw:
        capture = collect(Targets(hosts=("lab-h1",), nodeset="lab-h1"),
                          CollectOptions(**kw, interval_s=0, timeout_s=10, collectors=COLLECTORS), tmp_path / "c")
    hc = capture.host("lab-h1")
    assert hc.status == HostStatus.FAILED
    assert hc.reason.startswith(f"output exceeded {cap} bytes; first {cap} kept; "), hc.reason
    assert hc.items and sum(it.bytes for it in hc.items) < cap


def test_users_ssh_config_is_honored(lab: Lab) -> None:
    """ProxyJump and a ControlPersist master from the ssh config the transport is given."""
    transport = lab.transport()
    script = "ls /sys/class/net; cat /proc/net/dev"
    started = time.monotonic()
    runs = {r.host: r for r in transport.run(["lab-h3-jump", "lab-h1-cm"], script, timeout_s=15)}
    jump, cm = runs["lab-h3-jump"], runs["lab-h1-cm"]
    assert jump.status == HostStatus.OK, jump.reason
    assert jump.stdout.split(b"\n")[:2] == [b"fcnic3", b"lo"]  # through fc-h1's sshd, into fc-h3
    assert cm.status == HostStatus.OK, cm.reason
    assert cm.stdout.startswith(b"fcnic1\nlo\n")
    # The master stays in the background holding ssh's stderr open; the capture did not wait on it.
    check = subprocess.run(["ssh", "-F", str(lab.ssh_config), "-O", "check", "lab-h1-cm"], capture_output=True,
                           text=True, timeout=10)
    assert check.returncode == 0, check.stderr
    again = transport.run(["lab-h1-cm"], script, timeout_s=15)[0]
    assert again.status == HostStatus.OK and again.stdout.startswith(b"fcnic1\nlo\n"), again.reason
    assert time.monotonic() - started < 15


def test_cli_collect_over_ssh(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fabricase collect --via ssh --ssh-option "-F FILE"` with a nodeset: one host ok, one refused."""
    from click.testing import CliRunner

    from fabricase.cli import cli
    from fabricase.cli.app import EXIT_PARTIAL

    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    out = tmp_path / "capture"
    with ssh_collect_options(lab):
        result = CliRunner().invoke(cli, ["collect", "--hosts", "lab-h[1,5]", "--via", "ssh", "--ssh-option",
                                          f"-F {lab.ssh_config}", "--fanout", "2", "--interval", "0",
                                          "--collector", "netdev", "--timeout", "20", "-o", str(out), "--json"],
                                    catch_exceptions=False)
    assert result.exit_code == EXIT_PARTIAL, (result.stdout, result.stderr)
    hosts = {h["host"]: h for h in json.loads(result.stdout)["hosts"]}
    assert hosts["lab-h1"]["status"] == "ok" and hosts["lab-h1"]["items"] > 0
    assert hosts["lab-h5"]["status"] == "unreachable" and "Connection refused" in hosts["lab-h5"]["reason"]
    assert json.loads((out / "hosts" / "lab-h1" / "host.json").read_text())["transport"] == "ssh"
