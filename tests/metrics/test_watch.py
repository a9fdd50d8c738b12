"""`fabricase watch` over a recorded host tree: each round rewrites the textfile and /metrics serves the same
series on 127.0.0.1; a failing round is a warning and the loop goes on; Ctrl-C exits 130 and keeps the file."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricase.cli import metrics_cmds
from fabricase.errors import CaptureError
from fabricase.metrics import TEXTFILE_NAME
from fabricase.metrics.watch import parse_listen, watch_loop
from loopback import free_port


def _series(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_watch_two_rounds_rewrites_the_textfile_and_serves_metrics(run, host_tree, tmp_path, monkeypatch):
    out, port = tmp_path / "tf", free_port()
    seen: list[tuple[int, str, str]] = []

    def scrape_instead_of_sleeping(seconds: float) -> None:
        # Between the rounds: the file holds round 1, and /metrics serves exactly what the file holds.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            served = response.read().decode()
        path = out / TEXTFILE_NAME
        seen.append((path.stat().st_ino, path.read_text(), served))

    monkeypatch.setattr(metrics_cmds, "_sleep", scrape_instead_of_sleeping)
    result = run("watch", "--hosts", "localhost", "--root", str(host_tree), "--interval", "0", "--interval-s", "30",
                 "--count", "2", "--textfile", str(out), "--listen", f"127.0.0.1:{port}", "--json")
    rounds = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    assert all(r["textfile"] == str(out / TEXTFILE_NAME) for r in rounds)
    assert rounds[0]["capture_dir"] != rounds[1]["capture_dir"]
    assert not any(Path(r["capture_dir"]).exists() for r in rounds)  # each round's capture is deleted
    [(inode, file_text, served)] = seen
    assert _series(served) == _series(file_text)
    final = (out / TEXTFILE_NAME).read_text()
    assert (out / TEXTFILE_NAME).stat().st_ino != inode  # round 2 wrote a new file
    series = _series(final)
    assert series[("fabricase_link_up", (("device", "eth0"), ("host", "localhost"), ("port", "")))] == 1
    assert series[("fabricase_link_up", (("device", "eth1"), ("host", "localhost"), ("port", "")))] == 0
    assert series[("fabricase_link_speed_bytes_per_second",
                   (("device", "eth0"), ("host", "localhost"), ("port", "")))] == 12.5e9
    assert series[("fabricase_host_capture_status", (("host", "localhost"), ("status", "ok")))] == 1
    with pytest.raises(OSError):  # the server is gone with the watch
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_watch_loop_keeps_going_after_a_failed_round_and_keeps_the_period():
    now = [0.0]
    slept, warned, ran = [], [], []

    def one_round(n: int) -> None:
        ran.append(n)
        now[0] += 4.0  # each round takes 4 s
        if n == 2:
            raise CaptureError("no host reachable", where="gpu[001-004]")

    done = watch_loop(one_round, interval_s=10, count=3, on_error=lambda n, exc: warned.append((n, str(exc))),
                      sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)), clock=lambda: now[0])
    assert (done, ran) == (2, [1, 2, 3])
    assert warned == [(2, "gpu[001-004]: no host reachable")]
    assert slept == [6.0, 6.0]  # a round starts every 10 s; no wait after the last


def test_a_failing_round_is_a_warning_and_all_failing_is_exit_1(run, tmp_path):
    result = run("watch", "--replay", str(tmp_path / "missing"), "--interval-s", "0", "--count", "2",
                 "--textfile", str(tmp_path / "tf"), code=1)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: round")]
    assert len(warnings) == 2 and "no such directory" in warnings[0]


@pytest.mark.parametrize("listen", ["9464", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"])
def test_bad_listen_address_is_one_line(run, tmp_path, listen):
    result = run("watch", "--hosts", "localhost", "--textfile", str(tmp_path / "tf"), "--listen", listen, code=1)
    assert result.stderr.startswith("fabricase: error: --listen: expected ADDR:PORT")


def test_listen_parses_ipv6_and_a_busy_port_is_one_line(run, tmp_path):
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run("watch", "--hosts", "localhost", "--textfile", str(tmp_path / "tf"),
                     "--listen", f"127.0.0.1:{port}", code=1)
    assert "cannot listen" in result.stderr and result.stderr.count("\n") == 1


def test_ctrl_c_exits_130_and_keeps_the_textfile(host_tree, tmp_path, home):
    out = tmp_path / "tf"
    env = {**os.environ, "FABRICASE_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabricase", "watch", "--hosts", "localhost", "--root", str(host_tree),
         "--interval", "0", "--interval-s", "3600", "--textfile", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not (out / TEXTFILE_NAME).exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (out / TEXTFILE_NAME).exists(), proc.stderr.read() if proc.poll() is not None else "no textfile"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert "fabricase_host_capture_status" in (out / TEXTFILE_NAME).read_text()
