"""Tree mode's relay stream (protocol 2), fed as it arrives: round trips, hostile input, and the whole tree
(nested too) run end to end on this machine through an `ssh` stand-in, so no root or network is needed.

The stand-in (written by `fake_ssh`) is documented as such: it takes OpenSSH's command line, answers `-G`, and
runs the remote command here with sh, with the host's name in FAKE_SSH_HOST; a host named down* is refused
the way ssh reports it (exit 255). The real sshd version of these runs is tests/lab/test_gateway_lab.py.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

import pytest

from fabricase.models import HostStatus
from fabricase.transports.base import HostRun
from fabricase.transports.gateway import (
    PROTOCOL_LINE,
    GatewayTransport,
    RelayDecoder,
    decode_runs,
    encode_run,
    parse_gateway,
    strip_protocol_line,
)

RUNS = [HostRun("gpu001", HostStatus.OK, b"@@FC1 BEGIN\r\n\x00\xff@@FCR2 9\n{}", b"", 0, None,
                "2026-01-01T00:00:00.000001Z", "2026-01-01T00:00:01.5Z"),
        HostRun("gpu002", HostStatus.TIMED_OUT, b"", b"ssh: err\n", None, "capture did not finish within 10s"),
        HostRun("gpu003", HostStatus.PARTIAL, b"x" * 70000, b"\xff", 255, "connection lost \u00e9")]


def fields(run: HostRun) -> tuple:
    return (run.host, run.status, run.stdout, run.stderr, run.rc, run.reason, run.started_at, run.finished_at)


def test_frames_round_trip_with_timings_fed_one_byte_at_a_time():
    stream = b"".join(encode_run(r) for r in RUNS)
    decoder = RelayDecoder()
    got = [run for i in range(len(stream)) for run in decoder.feed(stream[i:i + 1])]
    assert decoder.finish() is None
    assert [fields(r) for r in got] == [fields(r) for r in RUNS]


def test_each_frame_is_handed_on_as_soon_as_it_is_complete():
    first, second = encode_run(RUNS[0]), encode_run(RUNS[1])
    decoder = RelayDecoder()
    assert [r.host for r in decoder.feed(first + second[:5])] == ["gpu001"]
    assert decoder.finish() == f"relay stream cut inside a frame header at byte {len(first)}"
    assert [r.host for r in decoder.feed(second[5:])] == ["gpu002"] and decoder.finish() is None


def test_the_decoder_holds_one_frame_at_a_time():
    runs = [HostRun(f"h{i}", HostStatus.OK, bytes([i]) * 300_000, b"", 0) for i in range(6)]
    stream = b"".join(encode_run(r) for r in runs)
    decoder, most, got = RelayDecoder(), 0, []
    for i in range(0, len(stream), 65536):  # as the gateway's ssh reads it
        got += decoder.feed(stream[i:i + 65536])
        most = max(most, decoder.buffered)
    assert [r.stdout for r in got] == [r.stdout for r in runs] and decoder.buffered == 0
    assert most < len(encode_run(runs[0])) + 65536 < len(stream) / 4


@pytest.mark.parametrize("cut", [1, 7, 12, 40, -1])
def test_a_truncated_stream_keeps_the_hosts_before_the_cut(cut):
    stream = encode_run(RUNS[0]) + encode_run(RUNS[2])
    runs, stopped = decode_runs(stream[:len(encode_run(RUNS[0])) + cut] if cut > 0 else stream[:cut])
    assert [r.host for r in runs] == ["gpu001"]
    assert stopped.startswith("relay stream cut inside")


def _frame(head: bytes, body: bytes = b"") -> bytes:
    return b"@@FCR2 %d\n" % len(head) + head + body


@pytest.mark.parametrize(("stream", "says"), [
    (b"garbage\n", "relay stream garbled at byte 172"),
    (b"@@FCR2 " + b"9" * 40, "no frame length"),
    (b"@@FCR2 99999999\n", "header length b'99999999' is not 1 to 65536"),
    (b"@@FCR2 -5\n", "header length b'-5'"),
    (b"@@FCR2 0\n", "header length b'0'"),
    (_frame(b"not json"), "header is not JSON"),
    (_frame(b"[1]"), "not a JSON object"),
    (_frame(b'{"host":"a","status":"ok","stdout":-1,"stderr":0}'), "a: stdout length -1"),
    (_frame(b'{"host":"a","status":"ok","stdout":999999999999,"stderr":0}'), "a: stdout length 999999999999"),
    (_frame(b'{"host":"a","status":"ok","stdout":0,"stderr":"3"}'), "a: stderr length '3'"),
    (_frame(b'{"host":"a","status":"dancing","stdout":0,"stderr":0}'), "a: unknown status 'dancing'"),
    (_frame(b'{"host":"a b","status":"ok","stdout":0,"stderr":0}'), "no host name"),
    (_frame(b'{"host":"a","status":"ok","rc":"0","stdout":0,"stderr":0}'), "a: rc is not an integer"),
    (_frame(b'{"host":"a","status":"ok","reason":5,"stdout":0,"stderr":0}'), "reason is not a string"),
    (b"@@FCR1 gpu001 ok 0 1 0 0\nx", "relay speaks protocol 1, this fabricase speaks 2"),
])
def test_hostile_input_is_one_clear_error_after_the_good_frames(stream, says):
    good = encode_run(RUNS[1])
    decoder = RelayDecoder()
    runs = decoder.feed(good + stream) + decoder.feed(encode_run(RUNS[0]))  # nothing after the error
    assert [r.host for r in runs] == ["gpu002"]
    assert decoder.over and says in decoder.finish()


def test_protocol_line_and_gateway_specs():
    assert strip_protocol_line(PROTOCOL_LINE + "echo hi\n") == (2, "echo hi\n")
    assert strip_protocol_line("echo hi\n") == (None, "echo hi\n")
    assert parse_gateway("gw1") == ("gw1", ()) and parse_gateway("gw1:s1,s2") == ("gw1", ("s1", "s2"))
    assert parse_gateway("fd00::7") == ("fd00::7", ())  # an IPv6 gateway is not a nested spec
    t = GatewayTransport(("gw1:s1,s2", "gw2"), command="/opt/fab", fanout=3)
    argv = t.relay_argv(["a", "b"], 5, gateway="gw1", deadline_left_s=12.5)
    assert argv[-8:] == ["--deadline", "12.500", "--gateway", "s1", "--gateway", "s2", "--gateway-command", "/opt/fab"]
    assert "--gateway" not in t.relay_argv(["a"], 5, gateway="gw2")


FAKE_SSH = """#!/bin/sh
# A stand-in for OpenSSH (test only): ssh [options] -- HOST COMMAND runs COMMAND here.
for a; do shift; [ "$a" = "--" ] && break; [ "$a" = "-G" ] && exit 0; done
host=$1; shift
[ -n "$FAKE_SSH_LOG" ] && echo "$host" >> "$FAKE_SSH_LOG"
case "$host" in down*) echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255;; esac
FAKE_SSH_HOST=$host exec sh -c "$*"
"""


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(ssh.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    src = Path(__file__).resolve().parents[2] / "src"
    monkeypatch.setenv("FAKE_SSH_LOG", str(tmp_path / "ssh.log"))
    monkeypatch.setenv("PYTHONPATH", f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return tmp_path


def _gated_script(gate: Path) -> str:
    # h-slow waits for a file the caller creates when h-fast is handed on: only a streamed result releases it
    # (a relay that answered at exit would leave h-slow waiting out its 20 s and failing the check below).
    return (f'if [ "$FAKE_SSH_HOST" = h-slow ]; then i=0; while [ ! -e {shlex.quote(str(gate))} ]; do '
            'i=$((i+1)); [ $i -gt 200 ] && { echo gate-not-released; exit 3; }; sleep 0.1; done; fi\n'
            'printf "stream of %s\\000\\377\\n" "$FAKE_SSH_HOST"\n')


@pytest.mark.parametrize("gateways", [("gw1",), ("gw1:gw1a,gw1b",)], ids=["one-tier", "nested"])
def test_tree_mode_hands_on_each_host_before_its_gateway_ends(fake_ssh: Path, gateways):
    gate = fake_ssh / "released"
    seen: list[HostRun] = []

    def on_done(run: HostRun) -> None:
        seen.append(run)
        if run.host == "h-fast":
            gate.touch()

    t = GatewayTransport(gateways, command=f"{shlex.quote(sys.executable)} -m fabricase", fanout=4, deadline_s=120)
    runs = t.run(["h-fast", "h-slow", "down1"], _gated_script(gate), timeout_s=60, on_done=on_done)
    by_host = {r.host: r for r in runs}
    order = [r.host for r in seen]
    # h-slow is handed on after h-fast (it waited for h-fast's hand-on); down1 comes through another relay of
    # its own in the nested case, so where it falls in the order is a matter of scheduling, not of the protocol.
    assert sorted(order) == ["down1", "h-fast", "h-slow"] and order.index("h-fast") < order.index("h-slow")
    for host in ("h-fast", "h-slow"):
        assert by_host[host].status == HostStatus.OK, by_host[host].reason
        assert by_host[host].stdout == f"stream of {host}\0\xff\n".encode("latin-1")
        assert by_host[host].started_at <= by_host[host].finished_at
    assert by_host["h-fast"].finished_at <= by_host["h-slow"].finished_at
    assert by_host["down1"].status == HostStatus.UNREACHABLE and "Connection refused" in by_host["down1"].reason
    reached = (fake_ssh / "ssh.log").read_text().split()
    tiers = {"gw1"} | ({"gw1a", "gw1b"} if ":" in gateways[0] else set())
    assert set(reached) == tiers | {"h-fast", "h-slow", "down1"} and reached[0] == "gw1"


def test_a_gateway_that_cannot_be_reached_fails_each_of_its_hosts(fake_ssh: Path):
    t = GatewayTransport(("down-gw", "gw2"), command=f"{shlex.quote(sys.executable)} -m fabricase")
    runs = t.run(["a", "b", "c"], "echo ok\n", timeout_s=30)
    assert [(r.host, r.status) for r in runs] == [("a", HostStatus.UNREACHABLE), ("b", HostStatus.UNREACHABLE),
                                                  ("c", HostStatus.OK)]
    assert runs[0].reason.startswith("via gateway down-gw: no result (") and "Connection refused" in runs[0].reason


def test_a_relay_refuses_a_caller_without_its_protocol(fake_ssh: Path):
    from click.testing import CliRunner

    from fabricase.cli import cli

    result = CliRunner().invoke(cli, ["relay", "--hosts", "a", "--timeout", "5"], input="echo old caller\n")
    assert result.exit_code == 2 and "this relay speaks relay protocol 2" in result.output


def test_the_overall_deadline_reaches_the_relay(fake_ssh: Path):
    # The relay times the slow host out itself and reports it as a frame, before this side stops reading.
    script = 'if [ "$FAKE_SSH_HOST" = h-slow ]; then sleep 60; fi\necho done\n'
    t = GatewayTransport(("gw1",), command=f"{shlex.quote(sys.executable)} -m fabricase", deadline_s=8)
    runs = {r.host: r for r in t.run(["h-fast", "h-slow"], script, timeout_s=60)}
    assert runs["h-fast"].status == HostStatus.OK
    slow = runs["h-slow"]
    assert slow.status == HostStatus.TIMED_OUT and slow.reason.endswith("(overall deadline)"), slow.reason
