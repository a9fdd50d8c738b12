"""The ssh transport without a network: the pure parts (failure classification from real OpenSSH messages,
option handling, the command line), then SshTransport driving a stand-in `ssh` script that runs the remote
command locally (binary safety, timeouts, the output cap, lost connections, the overall deadline)."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricase.errors import TransportError
from fabricase.models import HostStatus
from fabricase.transports.ssh import (
    MAX_STDERR_BYTES,
    SshTransport,
    classify_ssh_failure,
    normalize_ssh_options,
    ssh_command,
)

# Verbatim stderr of OpenSSH 9.2 (Debian 12), as the transport reads it (ssh ends its lines with \r\n).
HOST_KEY_CHANGED = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n"
    "Someone could be eavesdropping on you right now (man-in-the-middle attack)!\r\n"
    "It is also possible that a host key has just been changed.\r\n"
    "The fingerprint for the ED25519 key sent by the remote host is\r\n"
    "SHA256:5kYNaEaM3meNhpehA/PZBKHEG3Xhn05ZFK8FY6MD78M.\r\n"
    "Please contact your system administrator.\r\n"
    "Add correct host key in /root/.ssh/known_hosts to get rid of this message.\r\n"
    "Offending ED25519 key in /root/.ssh/known_hosts:1\r\n"
    "  remove with:\r\n"
    '  ssh-keygen -f "/root/.ssh/known_hosts" -R "10.78.0.11"\r\n'
    "Host key for 10.78.0.11 has changed and you have requested strict checking.\r\n"
    "Host key verification failed.\r\n"
)

CASES = [
    # (rc, stderr, status, reason starts with, reason contains)
    (0, "", HostStatus.OK, None, None),
    (255, "root@10.78.0.11: Permission denied (publickey).\r\n", HostStatus.AUTH_FAILED, "ssh key refused: ",
     "Permission denied (publickey)"),
    (255, "Warning: Permanently added '10.0.0.5' (ED25519) to the list of known hosts.\r\n"
          "alice@10.0.0.5: Permission denied (publickey,password).\r\n", HostStatus.AUTH_FAILED, "ssh key refused: ",
     "(publickey,password)"),
    (255, "Received disconnect from 10.0.0.5 port 22:2: Too many authentication failures\r\n"
          "Disconnected from 10.0.0.5 port 22\r\n", HostStatus.AUTH_FAILED, "ssh key refused: ",
     "Too many authentication failures"),
    (255, HOST_KEY_CHANGED, HostStatus.AUTH_FAILED, "host key changed", None),
    (255, "No ED25519 host key is known for 10.78.0.11 and you have requested strict checking.\r\n"
          "Host key verification failed.\r\n", HostStatus.AUTH_FAILED, "host key unknown",
     "No ED25519 host key is known for 10.78.0.11"),
    (255, "ssh: connect to host 10.78.0.11 port 2222: Connection refused\r\n", HostStatus.UNREACHABLE,
     "ssh: connect to host 10.78.0.11 port 2222: Connection refused", None),
    (255, "ssh: Could not resolve hostname nosuchhost.invalid: Name or service not known\r\n",
     HostStatus.UNREACHABLE, "ssh: Could not resolve hostname nosuchhost.invalid", None),
    (255, "ssh: Could not resolve hostname gpu001: Temporary failure in name resolution\r\n",
     HostStatus.UNREACHABLE, "ssh: Could not resolve hostname gpu001", None),
    (255, "ssh: connect to host 10.78.0.99 port 22: Connection timed out\r\n", HostStatus.UNREACHABLE,
     "ssh: connect to host 10.78.0.99 port 22: Connection timed out", None),
    (255, "Connection timed out during banner exchange\r\nConnection to 10.99.0.1 port 22 timed out\r\n",
     HostStatus.UNREACHABLE, "Connection timed out during banner exchange", None),
    (255, "ssh: connect to host 10.1.2.3 port 22: No route to host\r\n", HostStatus.UNREACHABLE,
     "ssh: connect to host 10.1.2.3 port 22: No route to host", None),
    (255, "ssh: connect to host 10.1.2.3 port 22: Network is unreachable\r\n", HostStatus.UNREACHABLE,
     "ssh: connect to host 10.1.2.3 port 22: Network is unreachable", None),
    (255, "kex_exchange_identification: read: Connection reset by peer\r\nConnection reset by 10.0.0.1 port 22\r\n",
     HostStatus.UNREACHABLE, "kex_exchange_identification: read: Connection reset by peer", None),
    # ProxyJump: the jump host cannot reach the target
    (255, "channel 0: open failed: connect failed: No route to host\r\nstdio forwarding failed\r\n"
          "kex_exchange_identification: Connection closed by remote host\r\n"
          "Connection closed by UNKNOWN port 65535\r\n", HostStatus.UNREACHABLE, "channel 0: open failed", None),
    (255, "Connection to gpu001 closed by remote host.\r\n", HostStatus.UNREACHABLE,
     "Connection to gpu001 closed by remote host.", None),
    (255, "something ssh never said before\r\n", HostStatus.UNREACHABLE,
     "ssh failed (exit 255): something ssh never said before", None),
    (255, "", HostStatus.UNREACHABLE, "ssh failed (exit 255)", None),
    # the remote side ran: its exit status, never an ssh verdict (even with "Permission denied" in it)
    (127, "bash: line 1: sh: command not found\n", HostStatus.FAILED, "no sh on the host: ", "sh: command not found"),
    (127, "sh: 1: sh: not found\n", HostStatus.FAILED, "no sh on the host: ", None),
    (127, "sh: 1: ethtool: not found\n", HostStatus.FAILED, "capture script exited 127: ", None),
    (1, "cat: /sys/x: Permission denied\n", HostStatus.FAILED, "capture script exited 1: cat: /sys/x", None),
    (2, "", HostStatus.FAILED, "capture script exited 2", None),
]


@pytest.mark.parametrize(("rc", "stderr", "status", "starts", "contains"), CASES)
def test_classify_real_openssh_messages(rc, stderr, status, starts, contains) -> None:
    got_status, reason = classify_ssh_failure(rc, stderr)
    assert got_status == status, reason
    if starts is None:
        assert reason is None
    else:
        assert reason.startswith(starts), reason
        assert "\n" not in reason and "\r" not in reason and len(reason) < 300
    if contains:
        assert contains in reason


def test_reasons_for_host_keys_say_host_key() -> None:
    for text in (HOST_KEY_CHANGED, "Host key verification failed.\r\n"):
        status, reason = classify_ssh_failure(255, text)
        assert status == HostStatus.AUTH_FAILED and "host key" in reason


@pytest.mark.parametrize(("given", "args"), [
    (["ProxyJump=bastion"], ["-o", "ProxyJump=bastion"]),
    (["ProxyJump bastion"], ["-o", "ProxyJump=bastion"]),
    (["  StrictHostKeyChecking=accept-new "], ["-o", "StrictHostKeyChecking=accept-new"]),
    (["-F /etc/fabricase/ssh_config"], ["-F", "/etc/fabricase/ssh_config"]),
    (["-i ~/.ssh/fleet_ed25519"], ["-i", "~/.ssh/fleet_ed25519"]),
    (["-J jump1,jump2", "-p2222"], ["-J", "jump1,jump2", "-p", "2222"]),
    (["-o Ciphers=aes128-gcm@openssh.com"], ["-o", "Ciphers=aes128-gcm@openssh.com"]),
    (["-4", "-C"], ["-4", "-C"]),
])
def test_ssh_options_normalized(given, args) -> None:
    assert normalize_ssh_options(given) == args


@pytest.mark.parametrize("bad", ["", "-v", "-L 8080:db:5432", "-F", "Proxy Jump=x", "=x", "ProxyJump=", "-tt"])
def test_bad_ssh_options_refused(bad) -> None:
    with pytest.raises(TransportError) as err:
        normalize_ssh_options([bad])
    assert err.value.where == "--ssh-option"


def test_command_line_order_lets_user_options_win_over_defaults() -> None:
    argv = ssh_command("gpu001", user="ops", options=["-o", "ConnectTimeout=30"], connect_timeout_s=10)
    assert argv == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "-o", "ConnectTimeout=10", "-l", "ops",
                    "--", "gpu001", "sh", "-s"]
    assert ssh_command("-oProxyCommand=x")[-4:] == ["--", "-oProxyCommand=x", "sh", "-s"]  # a host, never an option


def test_from_options_takes_the_cli_options() -> None:
    t = SshTransport.from_options(fanout=8, deadline_s=30, ssh_options=("ProxyJump=bastion",), user="ops",
                                  collectors=("netdev",))
    assert (t.fanout, t.deadline_s, t.user, t.options) == (8, 30, "ops", ["-o", "ProxyJump=bastion"])
    with pytest.raises(TransportError):
        SshTransport(fanout=0)


# --- SshTransport driving a stand-in ssh ------------------------------------------------------------------

FAKE_SSH = r"""#!/bin/sh
# A stand-in for ssh: `-G` answers like ssh does; otherwise the host name picks a behaviour and the remote
# command runs here.
for a; do
  [ "$a" = "-G" ] || continue
  [ -n "$FAKE_G_FAIL" ] && { echo "$FAKE_G_FAIL" >&2; exit 255; }
  echo "user root"; exit 0
done
while [ $# -gt 0 ]; do a=$1; shift; [ "$a" = "--" ] && break; done
host=$1; shift
case $host in
  refused*) cat >/dev/null; echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255 ;;
  denied*) echo "root@$host: Permission denied (publickey)." >&2; exit 255 ;;
  lost*) "$@" | head -c 40; echo "Connection to $host closed by remote host." >&2; exit 255 ;;
  noisy*) "$@"; head -c 200000 /dev/zero | tr '\0' 'x' >&2; echo >&2; echo "the last line" >&2; exit 0 ;;
  persist*) sleep 3 </dev/null >/dev/null & echo $! >"$FAKE_BG_PID"; exec "$@" ;;  # holds stderr open, like a
                                                                                   # ControlPersist master
esac
exec "$@"
"""


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch) -> Iterator[str]:
    path = tmp_path / "ssh"
    path.write_text(FAKE_SSH)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("FAKE_G_FAIL", raising=False)
    bg = tmp_path / "bg.pid"
    monkeypatch.setenv("FAKE_BG_PID", str(bg))
    yield str(path)
    if bg.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(bg.read_text()), signal.SIGKILL)


BINARY = r"printf 'a\r\nb\000c\377\n\r'"


def test_stream_comes_back_byte_for_byte(fake_ssh) -> None:
    seen = []
    runs = SshTransport(ssh=fake_ssh).run(["h1", "h2"], BINARY, timeout_s=10, on_done=seen.append)
    assert [r.host for r in runs] == ["h1", "h2"] and sorted(r.host for r in seen) == ["h1", "h2"]
    for r in runs:
        assert (r.status, r.rc, r.reason) == (HostStatus.OK, 0, None)
        assert r.stdout == b"a\r\nb\x00c\xff\n\r"
        assert r.started_at and r.finished_at


def test_script_goes_in_on_stdin(fake_ssh) -> None:
    script = "echo " + "x" * 300_000 + " | wc -c\n"  # bigger than a pipe buffer
    run = SshTransport(ssh=fake_ssh).run(["h1"], script, timeout_s=10)[0]
    assert run.status == HostStatus.OK and run.stdout.strip() == b"300001"


def test_failures_classified_and_the_rest_carry_on(fake_ssh) -> None:
    runs = {r.host: r for r in SshTransport(ssh=fake_ssh).run(["refused1", "ok1", "denied1", "lost1"],
                                                               "echo hello; exit 0", timeout_s=10)}
    assert runs["ok1"].status == HostStatus.OK
    assert runs["refused1"].status == HostStatus.UNREACHABLE and "Connection refused" in runs["refused1"].reason
    assert runs["denied1"].status == HostStatus.AUTH_FAILED
    assert runs["denied1"].reason == "ssh key refused: root@denied1: Permission denied (publickey)."


def test_connection_lost_mid_stream_is_partial(fake_ssh) -> None:
    run = SshTransport(ssh=fake_ssh).run(["lost1"], "head -c 100 /dev/zero", timeout_s=10)[0]
    assert run.status == HostStatus.PARTIAL and len(run.stdout) == 40
    assert run.reason == "connection lost after 40 bytes: Connection to lost1 closed by remote host."


def test_timeout_kills_and_keeps_partial_output(fake_ssh) -> None:
    run = SshTransport(ssh=fake_ssh).run(["h1"], "echo started; sleep 30", timeout_s=1)[0]
    assert run.status == HostStatus.TIMED_OUT and run.reason == "capture did not finish within 1s"
    assert run.stdout == b"started\n"


def test_output_over_the_cap_is_cut(fake_ssh) -> None:
    run = SshTransport(ssh=fake_ssh, max_output_bytes=1000).run(["h1"], "head -c 5000 /dev/zero; sleep 30",
                                                                 timeout_s=10)[0]
    assert run.status == HostStatus.FAILED and run.reason == "output exceeded 1000 bytes; first 1000 kept"
    assert run.stdout == b"\0" * 1000


def test_stderr_capped_keeping_the_last_lines(fake_ssh) -> None:
    run = SshTransport(ssh=fake_ssh).run(["noisy1"], "echo ok", timeout_s=10)[0]
    assert run.status == HostStatus.OK and run.stdout == b"ok\n"
    assert len(run.stderr) <= MAX_STDERR_BYTES + 100 and run.stderr.endswith(b"the last line\n")
    assert b"bytes dropped" in run.stderr


def test_a_background_master_holding_stderr_does_not_hold_the_capture(fake_ssh) -> None:
    run = SshTransport(ssh=fake_ssh).run(["persist1"], "echo ok", timeout_s=2)[0]
    assert (run.status, run.stdout) == (HostStatus.OK, b"ok\n")  # not timed out waiting for stderr to close


def test_overall_deadline(fake_ssh) -> None:
    runs = SshTransport(ssh=fake_ssh, fanout=1, deadline_s=1).run(["h1", "h2", "h3"], "sleep 20", timeout_s=10)
    assert [r.status for r in runs] == [HostStatus.TIMED_OUT] * 3
    assert runs[0].reason == "capture did not finish within 1s (overall deadline)"
    assert runs[1].reason == "not captured: overall deadline reached before this host was started"


def test_no_ssh_on_path_is_a_transport_error(tmp_path: Path) -> None:
    with pytest.raises(TransportError, match="no '/nonexistent/ssh' on PATH"):
        SshTransport(ssh="/nonexistent/ssh").run(["h1"], "true", timeout_s=5)


def test_options_ssh_rejects_fail_once_before_any_host(fake_ssh, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_G_FAIL", "command-line: line 0: Bad configuration option: proxyjumpp")
    with pytest.raises(TransportError, match="Bad configuration option: proxyjumpp") as err:
        SshTransport(ssh=fake_ssh, ssh_options=["ProxyJumpp=x"]).run(["h1", "h2"], "true", timeout_s=5)
    assert err.value.where == "--ssh-option"


def test_real_ssh_checks_options_without_connecting(tmp_path: Path) -> None:
    if not os.access("/usr/bin/ssh", os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail("no OpenSSH client: .ci/run installs openssh-client")
        pytest.skip("no OpenSSH client")
    with pytest.raises(TransportError, match="Bad configuration option"):
        SshTransport(ssh="/usr/bin/ssh", ssh_options=["NoSuchOption=1"]).run(["h1"], "true", timeout_s=5)
    with pytest.raises(TransportError, match="ssh rejects"):
        SshTransport(ssh="/usr/bin/ssh", ssh_options=[f"-F {tmp_path}/missing"]).run(["h1"], "true", timeout_s=5)
