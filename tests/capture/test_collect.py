"""collect -> capture directory -> load, with the real local transport and sh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricase.capturedir import load_capture
from fabricase.errors import CaptureError, CorruptItemError, TargetError, TransportError
from fabricase.models import HostStatus
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets, parse_nodeset, resolve_targets
from fabricase.transports.local import LocalTransport


def _collect(tmp_path: Path, root: Path, **kw) -> Path:
    opts = CollectOptions(interval_s=0.1, root=str(root), **kw)
    out = tmp_path / "cap"
    collect(Targets(hosts=("localhost",), nodeset="localhost"), opts, out)
    return out


def test_collect_writes_a_verifiable_capture_directory(tmp_path, fake_root):
    out = _collect(tmp_path, fake_root)
    meta = json.loads((out / "capture.json").read_text())
    assert meta["format"] == "fabricase-capture" and meta["format_version"] == 3
    from fabricase.collectors import COLLECTORS

    assert set(meta["collectors"]) == {n for n, c in COLLECTORS.items() if not c.opt_in}
    cap = load_capture(out)
    hc = cap.host("localhost")
    assert hc.status == HostStatus.OK and hc.transport == "local"
    it = hc.item("/sys/class/net/eth1/statistics/rx_crc_errors", 1)
    assert it.path == "stream.fc1" and it.offset > 0
    assert hc.read(it) == b"57\n"
    # The stream is stored exactly as the host sent it: every item is a slice of it.
    raw = (out / "hosts/localhost/stream.fc1").read_bytes()
    assert raw.startswith(b"@@FC1 BEGIN") and raw.endswith(b"@@FC1 END\n")
    assert raw[it.offset:it.offset + it.bytes] == b"57\n"
    assert hc.interval_s is not None and hc.interval_s >= 0.0
    # The kernel-log command ran (whatever this machine allows); stderr is kept apart, and only when not empty.
    assert hc.item("cmd:kernel-log", 0, kind="command") is not None
    stderr = hc.item("cmd:kernel-log", 0, kind="stderr")
    assert stderr is None or stderr.bytes > 0


def test_corrupt_and_truncated_items_are_named(tmp_path, fake_root):
    out = _collect(tmp_path, fake_root)
    stream = out / "hosts/localhost/stream.fc1"
    raw = stream.read_bytes()
    item = load_capture(out).host("localhost").item("/sys/class/net/eth1/mtu")
    flipped = bytearray(raw)
    flipped[item.offset] ^= 0x01  # same size, other bytes
    stream.write_bytes(bytes(flipped))
    with pytest.raises(CorruptItemError, match="stream.fc1 item /sys/class/net/eth1/mtu .*sha256"):
        load_capture(out)
    stream.write_bytes(raw[: item.offset + 2])
    with pytest.raises(CorruptItemError, match="item /sys/class/net/eth1/mtu .*short of the item"):
        load_capture(out)
    stream.unlink()
    with pytest.raises(CorruptItemError, match="stream.fc1.*missing"):
        load_capture(out)


def test_format_1_captures_stay_readable(tmp_path):
    """A capture written by fabricase 0.1 (one file per item) still loads and verifies."""
    import hashlib

    root = tmp_path / "v1"
    hdir = root / "hosts" / "h1"
    (hdir / "s0/fs/proc/net").mkdir(parents=True)
    snmp = b"Tcp: RetransSegs\nTcp: 7\n"
    (hdir / "s0/fs/proc/net/snmp").write_bytes(snmp)
    item = {"source": "/proc/net/snmp", "snapshot": 0, "kind": "file", "collector": "netstat",
            "path": "s0/fs/proc/net/snmp", "bytes": 24, "sha256": hashlib.sha256(snmp).hexdigest(),
            "rc": 0, "duration_ms": None, "truncated": False, "error": None, "command": None}
    (hdir / "index.json").write_text(json.dumps({"items": [item]}))
    (hdir / "host.json").write_text(json.dumps({"host": "h1", "status": "ok", "transport": "local", "snapshots": []}))
    (root / "capture.json").write_text(json.dumps({"format": "fabricase-capture", "format_version": 1,
                                                   "created_at": "2026-11-29T00:00:00Z", "hosts": ["h1"]}))
    hc = load_capture(root).host("h1")
    assert hc.text("/proc/net/snmp") == "Tcp: RetransSegs\nTcp: 7\n"


def test_replay_rejects_missing_and_foreign_directories(tmp_path):
    with pytest.raises(TargetError, match="no such directory"):
        load_capture(tmp_path / "nope")
    (tmp_path / "random").mkdir()
    with pytest.raises(TargetError, match="not a capture directory"):
        load_capture(tmp_path / "random")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "capture.json").write_text("{not json")
    with pytest.raises(CaptureError, match="unreadable JSON"):
        load_capture(bad)
    (bad / "capture.json").write_text(json.dumps({"format": "fabricase-capture", "format_version": 99}))
    with pytest.raises(CaptureError, match="format 99 is not supported"):
        load_capture(bad)


def test_output_directory_must_be_new_or_empty(tmp_path, fake_root):
    (tmp_path / "cap").mkdir()
    (tmp_path / "cap" / "keep.txt").write_text("mine")
    with pytest.raises(CaptureError, match="not empty"):
        _collect(tmp_path, fake_root)
    assert (tmp_path / "cap" / "keep.txt").read_text() == "mine"


def test_a_hung_capture_times_out_and_keeps_what_came_back():
    script = "printf '@@FC1 BEGIN 1 1\\n@@FC1 I t file 0 0 2 0 - - /a\\nok\\n'; sleep 30\n"
    run = LocalTransport().run_one("localhost", script, timeout_s=1)
    assert run.status == HostStatus.TIMED_OUT and "within 1s" in run.reason
    assert run.stdout.startswith(b"@@FC1 BEGIN")


def test_timed_out_host_is_recorded_partial(tmp_path, fake_root):
    out = _collect(tmp_path, fake_root, timeout_s=0.05)
    hc = load_capture(out).host("localhost")
    assert hc.status == HostStatus.TIMED_OUT
    assert "within 0.05s" in hc.reason


def test_local_transport_refuses_remote_hosts(tmp_path, fake_root):
    with pytest.raises(TransportError, match="gpu001 is not this machine"):
        collect(Targets(hosts=("gpu001",)), CollectOptions(via="local", interval_s=0), tmp_path / "c")
    # Remote hosts go over ssh by default; a broken ssh configuration fails once, before any host is tried.
    opts = CollectOptions(interval_s=0, ssh_options=(f"-F {tmp_path / 'missing-config'}",))
    with pytest.raises(TransportError):
        collect(Targets(hosts=("gpu001",)), opts, tmp_path / "d")


@pytest.mark.parametrize("spec,hosts", [
    ("gpu[001-004,010]", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010"]),
    ("localhost", ["localhost"]),
    ("a1,b2", ["a1", "b2"]),
])
def test_nodesets(spec, hosts):
    assert parse_nodeset(spec) == hosts


@pytest.mark.parametrize("spec", ["", "   ", "gpu[001-", "gpu[4-1]", ",", "gpu[a-b]", "bad host"])
def test_malformed_nodesets(spec):
    with pytest.raises(TargetError):
        parse_nodeset(spec)


def test_exactly_one_target_kind(tmp_path, monkeypatch):
    with pytest.raises(TargetError, match="exactly one"):
        resolve_targets(None, None, None)
    with pytest.raises(TargetError, match="--hosts and --replay"):
        resolve_targets("a", None, "/x")
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol here
    with pytest.raises(TargetError, match="Slurm is not installed here"):
        resolve_targets(None, "48213", None)


def test_ctrl_c_keeps_what_was_gathered(tmp_path, fake_root, monkeypatch):
    """A real SIGINT to this process mid-capture: the script is killed, its items so far are kept."""
    import os

    from fabricase.collectors import COLLECTORS
    from fabricase.collectors.base import Collector, CommandSpec
    from fabricase.errors import CaptureInterrupted

    class Interrupter(Collector):
        name = "interrupter"
        commands = (CommandSpec("ctrl-c", f"kill -INT {os.getpid()}; sleep 20", timeout_s=30),)

    monkeypatch.setitem(COLLECTORS, "interrupter", Interrupter)
    out = tmp_path / "cap"
    opts = CollectOptions(interval_s=0, root=str(fake_root), collectors=("netdev", "interrupter"))
    with pytest.raises(CaptureInterrupted) as info:
        collect(Targets(hosts=("localhost",)), opts, out)
    assert info.value.where == str(out)
    hc = load_capture(out).host("localhost")
    assert hc.status == HostStatus.FAILED and hc.reason.startswith("interrupted")
    assert hc.item("/sys/class/net/eth1/statistics/rx_crc_errors", 1) is not None


def test_nccl_logs_are_copied_listed_and_verified(tmp_path, fake_root):
    logs = tmp_path / "job"
    logs.mkdir()
    (logs / "slurm-1.out").write_text("gpu001:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE\n")
    (logs / "slurm-2.out").write_text("gpu002:2:2 [0] NCCL WARN oops\n")
    out = tmp_path / "cap"
    opts = CollectOptions(interval_s=0, root=str(fake_root), collectors=("netdev",),
                          nccl_logs=(str(logs / "slurm-*.out"),))
    cap = collect(Targets(hosts=("localhost",)), opts, out)
    assert [(i.kind, Path(i.source).name, i.path) for i in cap.inputs] == [
        ("nccl-log", "slurm-1.out", "inputs/nccl-log/000-slurm-1.out"),
        ("nccl-log", "slurm-2.out", "inputs/nccl-log/001-slurm-2.out"),
    ]
    assert cap.read_input(cap.inputs[1]) == b"gpu002:2:2 [0] NCCL WARN oops\n"
    (out / "inputs/nccl-log/001-slurm-2.out").write_text("edited\n")
    with pytest.raises(CorruptItemError, match="001-slurm-2.out"):
        load_capture(out)


def test_a_log_glob_that_matches_nothing_fails_before_capturing(tmp_path, fake_root):
    opts = CollectOptions(interval_s=0, root=str(fake_root), nccl_logs=(str(tmp_path / "none-*.log"),))
    with pytest.raises(TargetError, match="no file matches"):
        collect(Targets(hosts=("localhost",)), opts, tmp_path / "cap")
    assert not (tmp_path / "cap").exists()
