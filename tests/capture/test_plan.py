"""The compiled capture script, run for real with sh: framing, snapshots, caps, timeouts, processes."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from fabricase.collectors import COLLECTORS
from fabricase.collectors.base import Collector, CommandSpec, FileSpec
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan, compile_script


class _Probe(Collector):
    name = "probe"
    files = (
        FileSpec("/sys/class/net/*/statistics/*", counter=True),
        FileSpec("/sys/class/net/*/operstate", counter=True),
        FileSpec("/sys/class/net/*/mtu"),
        FileSpec("/bin/blob", mode="raw", cap=300),
        FileSpec("/proc/net/empty"),
        FileSpec("/does/not/exist/*"),
    )
    commands = (
        CommandSpec("binary", r"printf '\000\001\377end'", timeout_s=5),
        CommandSpec("silent", "true", timeout_s=5),
        CommandSpec("hangs", "sleep 30", timeout_s=1),
        CommandSpec("fails", "echo oops >&2; exit 3", timeout_s=5),
        CommandSpec("chatty", "yes fabric | head -c 5000", timeout_s=5, cap=1000),
    )


def run_script(script: str, env: dict | None = None) -> bytes:
    return subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, check=True,
                          timeout=60, env=env).stdout


def items_by(stream_items):
    return {(i.source, i.snapshot, i.kind): i for i in stream_items}


def test_script_frames_files_commands_and_two_snapshots(fake_root: Path):
    plan = CapturePlan(collectors=(_Probe,), interval_s=0.2, root=str(fake_root))
    r = parse_stream(run_script(compile_script(plan)))
    assert r.complete and r.error is None
    got = items_by(r.items)
    # Counters in both snapshots, once-only files in snapshot 0 only; sources are host paths, not root paths.
    assert got[("/sys/class/net/eth1/statistics/rx_crc_errors", 0, "file")].content == b"57\n"
    assert got[("/sys/class/net/eth1/statistics/rx_crc_errors", 1, "file")].content == b"57\n"
    assert ("/sys/class/net/eth0/mtu", 0, "file") in got and ("/sys/class/net/eth0/mtu", 1, "file") not in got
    assert set(r.snapshots) == {0, 1}
    assert r.snapshots[1].uptime_start >= r.snapshots[0].uptime_start
    # Raw file: binary-safe and cut at its cap.
    blob = got[("/bin/blob", 0, "file")]
    assert blob.content == (bytes(range(256)) * 4)[:300] and blob.truncated
    # Empty file and empty command output are items of size 0, not missing.
    assert got[("/proc/net/empty", 0, "file")].content == b""
    assert got[("cmd:silent", 0, "command")].content == b"" and got[("cmd:silent", 0, "command")].rc == 0
    assert got[("cmd:binary", 0, "command")].content == b"\x00\x01\xffend"
    # A glob matching nothing yields no item at all.
    assert not [k for k in got if k[0].startswith("/does/not")]


def test_hanging_command_is_killed_at_its_timeout_and_the_rest_still_runs(fake_root: Path):
    plan = CapturePlan(collectors=(_Probe,), interval_s=0, root=str(fake_root))
    r = parse_stream(run_script(compile_script(plan)))
    got = items_by(r.items)
    hung = got[("cmd:hangs", 0, "command")]
    assert hung.rc in (124, 137)  # killed by its timeout, not finished
    assert got[("cmd:fails", 0, "command")].rc == 3
    assert got[("cmd:fails", 0, "stderr")].content == b"oops\n"
    chatty = got[("cmd:chatty", 0, "command")]
    assert chatty.truncated and len(chatty.content) == 1000
    assert r.complete


def _wrap_every_program(bindir: Path, log: Path) -> str:
    """A PATH where every external program logs its own start before running the real one."""
    bindir.mkdir()
    seen: set[str] = set()
    for d in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            real = os.path.join(d, name)
            if name in seen or not os.access(real, os.X_OK) or os.path.isdir(real):
                continue
            seen.add(name)
            w = bindir / name
            w.write_text(f'#!/bin/sh\necho {name} >> "{log}"\nexec "{real}" "$@"\n')
            w.chmod(w.stat().st_mode | stat.S_IEXEC)
    return str(bindir)


def test_text_files_cost_no_process_each(tmp_path: Path):
    """600 counter files x 2 snapshots are read by the one shell, not by one process per file."""
    root = tmp_path / "root"
    for i in range(60):
        stats = root / "sys/class/net" / f"eth{i}" / "statistics"
        stats.mkdir(parents=True)
        for j in range(10):
            (stats / f"c{j}").write_text(f"{i * j}\n")
    log = tmp_path / "exec.log"
    path = _wrap_every_program(tmp_path / "bin", log)
    plan = CapturePlan(collectors=(COLLECTORS["netdev"],), interval_s=0, root=str(root))
    env = {"PATH": path, "HOME": str(tmp_path)}
    r = parse_stream(run_script(compile_script(plan), env=env))
    assert r.complete
    assert len([i for i in r.items if "/statistics/" in i.source]) == 1200
    programs = log.read_text().split()
    # rm + mkdir + date per snapshot mark + sleep + rm at exit: a handful, whatever the number of files.
    assert len(programs) < 15, programs
    assert shutil.which("sh")


def test_guards_are_hoisted_out_of_the_command():
    from fabricase.collectors.plan import hoist_guards

    assert hoist_guards("command -v dcb >/dev/null 2>&1 || exit 0; dcb pfc show") == (["dcb"], [], "dcb pfc show")
    assert hoist_guards("command -v mlnx_qos >/dev/null 2>&1 && exit 0; command -v dcb >/dev/null 2>&1 || exit 0; "
                        "x") == (["dcb"], ["mlnx_qos"], "x")
    assert hoist_guards("uname -a") == ([], [], "uname -a")


class _Guarded(Collector):
    name = "guarded"
    commands = (
        CommandSpec("absent", "command -v no-such-tool-fc >/dev/null 2>&1 || exit 0; no-such-tool-fc"),
        CommandSpec("present", "command -v sh >/dev/null 2>&1 || exit 0; echo here"),
        CommandSpec("vetoed", "command -v sh >/dev/null 2>&1 && exit 0; echo never"),
    )


def test_an_absent_tool_gives_an_empty_item_without_running(tmp_path):
    r = parse_stream(run_script(compile_script(CapturePlan(collectors=(_Guarded,), interval_s=0))))
    got = items_by(r.items)
    assert (got[("cmd:absent", 0, "command")].rc, got[("cmd:absent", 0, "command")].content) == (0, b"")
    assert got[("cmd:absent", 0, "command")].t0 is None  # never started
    assert got[("cmd:present", 0, "command")].content == b"here\n"
    assert got[("cmd:vetoed", 0, "command")].content == b"" and got[("cmd:vetoed", 0, "command")].rc == 0
