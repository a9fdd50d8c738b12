"""The probe lab itself: every host answers over SshExec from its own address, the stand-ins' tools path reaches
an sshd session, real iperf3 between namespaces measures a clean link fast and a slow_link near its rate (both
directions, alone and with four pairs at once), and what a probe leaves running is found and swept per host."""

from __future__ import annotations

import json

import pytest

from fabricase.probe.judge import slow_pairs
from lab.conftest import _wait, ns_sh
from probe.conftest import tbf_args

CLEAN_MIN_BPS = 200e6  # a veth pair on this machine moves Gb/s; far above any shaped rate
SLOW_MAX_BPS = 30e6  # slow_link(i, "20mbit")
SLOW_MIN_BPS = 10e6  # ... and still near its rate, not starved by the shaper
SECONDS = 2


def _listening(lab, i: int, port: int) -> bool:
    return f":{port} " in ns_sh(lab.host(i).ns, "ss", "-Hltn").stdout


def _iperf3_pairs(lab, pairs: list[tuple[int, int]], tag: str, *args: str) -> list[float]:
    """Run iperf3 (server on the first host of each pair, client on the second), all pairs at once, as the probe
    runs a round; the received bits per second of each pair."""
    ex = lab.ssh_exec()
    servers = []
    for n, (s, _) in enumerate(pairs):
        port = 5301 + n
        servers.append(ex.start(lab.host(s).alias, ["iperf3", "-s", "-1", "-p", str(port)], tag=tag, limit_s=30))
    for n, (s, _) in enumerate(pairs):
        _wait(lambda s=s, n=n: _listening(lab, s, 5301 + n), 10, f"iperf3 server on probe-h{s}")
    clients = [ex.start(lab.host(c).alias, ["iperf3", "-c", lab.host(s).ip, "-p", str(5301 + n), "-t", str(SECONDS),
                                            "-J", *args], tag=tag, limit_s=30)
               for n, (s, c) in enumerate(pairs)]
    figures = []
    for client, server in zip(clients, servers, strict=True):
        out = client.wait()
        assert out.status == "ok", (out.error, out.stdout[-500:])
        figures.append(float(json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]))
        assert server.wait().status == "ok"
    return figures


def test_all_hosts_answer_from_their_own_address(probe_lab):
    ex = probe_lab.ssh_exec()
    running = [ex.start(alias, ["sh", "-c", "echo $SSH_CONNECTION"], tag="smoke-conn", limit_s=20)
               for alias in probe_lab.hosts]
    assert probe_lab.hosts == [f"probe-h{i}" for i in range(1, 9)]
    for i, run in enumerate(running, start=1):
        out = run.wait()
        assert out.status == "ok", out.error
        client_ip, _, server_ip, server_port = out.stdout.decode().split()
        assert (client_ip, server_ip, server_port) == ("10.78.0.1", probe_lab.host(i).ip, "22")


def test_session_path_has_the_tools_path_and_python3(probe_lab):
    out = probe_lab.ssh_exec().start("probe-h2", ["sh", "-c", 'echo "$PATH"; python3 -c "print(6 * 7)"'],
                                     tag="smoke-path", limit_s=20).wait()
    assert out.status == "ok", out.error
    path, answer = out.stdout.decode().split()
    # sshd's default PATH, plus whatever root's ~/.bashrc adds (bash reads it for a command over ssh)
    assert path.split(":")[0] == probe_lab.tools_path
    assert "/usr/bin" in path.split(":")
    assert answer == "42"


def test_iperf3_clean_then_slow_both_ways_then_clean(probe_lab):
    (clean,) = _iperf3_pairs(probe_lab, [(1, 2)], "smoke-iperf")
    with probe_lab.slow_link(1, "20mbit"):
        ns_side, bridge_side = probe_lab.qdiscs(1)
        assert "tbf" in ns_side and "rate 20Mbit" in ns_side
        assert "tbf" in bridge_side and "rate 20Mbit" in bridge_side
        (into_slow,) = _iperf3_pairs(probe_lab, [(1, 2)], "smoke-iperf")  # host 1 receives: bridge port shapes
        (out_of_slow,) = _iperf3_pairs(probe_lab, [(1, 2)], "smoke-iperf", "-R")  # host 1 sends: its own veth
    after = _iperf3_pairs(probe_lab, [(1, 2)], "smoke-iperf")[0]
    print(f"\niperf3 1<-2: clean {clean / 1e6:.0f} Mb/s, 20mbit into slow {into_slow / 1e6:.1f} Mb/s, "
          f"out of slow {out_of_slow / 1e6:.1f} Mb/s, after {after / 1e6:.0f} Mb/s")
    assert clean > CLEAN_MIN_BPS
    assert SLOW_MIN_BPS < into_slow < SLOW_MAX_BPS
    assert SLOW_MIN_BPS < out_of_slow < SLOW_MAX_BPS
    assert after > CLEAN_MIN_BPS
    assert all("tbf" not in q for q in probe_lab.qdiscs(1))


def test_four_pairs_at_once_separate_the_slow_one(probe_lab):
    pairs = [(1, 2), (3, 4), (5, 6), (7, 8)]
    with probe_lab.slow_link(6):
        figures = _iperf3_pairs(probe_lab, pairs, "smoke-round")
    print("\niperf3 4 pairs at once, probe-h6 at 20mbit: "
          + ", ".join(f"{s}<-{c} {v / 1e6:.1f} Mb/s" for (s, c), v in zip(pairs, figures, strict=True)))
    slow = figures[2]
    assert slow < SLOW_MAX_BPS
    assert all(v > 5 * slow and v > CLEAN_MIN_BPS / 2 for n, v in enumerate(figures) if n != 2)
    assert slow_pairs([v / 1e9 for v in figures]) == [False, False, True, False]


def test_left_running_is_seen_and_swept_per_host(probe_lab):
    ex = probe_lab.ssh_exec()
    tag = "smoke-left"
    left = [ex.start(alias, ["sleep", "300"], tag=tag, limit_s=120) for alias in ("probe-h3", "probe-h4")]
    for i in (3, 4):
        _wait(lambda i=i: ["sleep", "300"] in probe_lab.probe_processes(i, tag), 10, f"sleep on probe-h{i}")
    for run in left:
        run.stop()  # the connection is gone; what it started on the host is not
        run.wait(5)
    assert ["sleep", "300"] in probe_lab.probe_processes(3, tag)
    assert probe_lab.probe_processes(5, tag) == []
    assert set(probe_lab.all_probe_processes(tag)) == {"probe-h3", "probe-h4"}

    found = ex.sweep("probe-h3", tag)
    assert any(line.split(" ", 1)[1].strip() == "sleep 300" for line in found), found
    _wait(lambda: probe_lab.probe_processes(3, tag) == [], 5, "the sweep on probe-h3")
    # each host has its own process table: the sweep of probe-h3 left probe-h4 alone
    assert ["sleep", "300"] in probe_lab.probe_processes(4, tag)
    assert any("sleep 300" in line for line in ex.sweep("probe-h4", tag))
    _wait(lambda: probe_lab.all_probe_processes(tag) == {}, 5, "the sweep on probe-h4")


@pytest.mark.parametrize(("rate", "burst"), [("5mbit", 16384), ("20mbit", 25000), ("1gbit", 1250000)])
def test_tbf_bucket_is_ten_ms_of_the_rate_at_least_16_kib(rate, burst):
    assert tbf_args(rate) == ["rate", rate, "burst", str(burst), "latency", "100ms"]


def test_tbf_rejects_a_rate_without_a_unit():
    with pytest.raises(ValueError, match="rate must be like"):
        tbf_args("20")
