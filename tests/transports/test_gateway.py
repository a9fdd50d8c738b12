"""Tree mode's pieces: the relay stream, the split, and --gateway reaching the engine."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fabricase.cli import cli
from fabricase.models import HostStatus
from fabricase.transports import get_transport
from fabricase.transports.base import HostRun
from fabricase.transports.gateway import GatewayTransport, decode_runs, encode_run, split_hosts


def test_relay_stream_round_trips_any_bytes():
    runs = [HostRun("gpu001", HostStatus.OK, b"@@FC1 BEGIN\r\n\x00\xff@@FCR1 x", b"", 0, None),
            HostRun("gpu002", HostStatus.TIMED_OUT, b"", b"ssh: err\n", None, "capture did not finish within 10s")]
    decoded, stopped = decode_runs(b"".join(encode_run(r) for r in runs))
    assert stopped is None
    assert [(r.host, r.status, r.stdout, r.stderr, r.rc, r.reason) for r in decoded] == [
        (r.host, r.status, r.stdout, r.stderr, r.rc, r.reason) for r in runs]


def test_a_cut_relay_stream_keeps_the_hosts_before_the_cut():
    data = encode_run(HostRun("a", HostStatus.OK, b"1")) + encode_run(HostRun("b", HostStatus.OK, b"22222"))
    decoded, stopped = decode_runs(data[:-2])
    assert [r.host for r in decoded] == ["a"] and "cut inside b" in stopped
    assert decode_runs(b"garbage\n")[1].startswith("relay stream garbled")


def test_split_hosts_contiguously():
    hosts = [f"h{i}" for i in range(5)]
    assert split_hosts(hosts, ["g1", "g2"]) == {"g1": ["h0", "h1", "h2"], "g2": ["h3", "h4"]}
    assert split_hosts(hosts[:1], ["g1", "g2"]) == {"g1": ["h0"]}


def test_gateway_options_reach_the_engine():
    t = get_transport("ssh", fanout=7, ssh_options=("-F /etc/fab/ssh_config",), user="ops",
                      gateways=("gw1", "gw2"), gateway_command="/opt/fab/bin/fabricase")
    assert isinstance(t, GatewayTransport) and t.gateways == ("gw1", "gw2")
    argv = t.relay_argv(["gpu001", "gpu002", "gpu003"], 12)
    assert argv[:4] == ["/opt/fab/bin/fabricase", "relay", "--hosts", "gpu[001-003]"]
    assert argv[4:6] == ["--fanout", "7"] and argv[6:8] == ["--timeout", "12"]
    assert argv[8:] == ["--ssh-option", "-F /etc/fab/ssh_config", "--user", "ops"]


def test_cli_gateway_flags_reach_the_transport(tmp_path, monkeypatch):
    seen = {}

    def fake_run(self, hosts, script, *, timeout_s, on_done=None):
        seen.update(gateways=self.gateways, command=self.command, fanout=self.fanout, hosts=hosts)
        runs = [HostRun(h, HostStatus.UNREACHABLE, reason="via gateway gw1: test") for h in hosts]
        for r in runs:
            on_done(r)
        return runs

    monkeypatch.setattr(GatewayTransport, "run", fake_run)
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, ["collect", "--hosts", "gpu[001-004]", "--gateway", "gw1", "--gateway", "gw2",
                                      "--gateway-command", "python3 -m fabricase", "--fanout", "16", "--interval",
                                      "0", "-o", str(tmp_path / "cap"), "--json"])
    assert result.exit_code == 1, result.output  # no host captured
    assert seen == {"gateways": ("gw1", "gw2"), "command": "python3 -m fabricase", "fanout": 16,
                    "hosts": ["gpu001", "gpu002", "gpu003", "gpu004"]}
    hosts = json.loads(result.stdout)["hosts"]
    assert {h["status"] for h in hosts} == {"unreachable"} and hosts[0]["reason"] == "via gateway gw1: test"
