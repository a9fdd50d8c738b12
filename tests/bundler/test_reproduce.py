"""reproduce.sh and capture-script.sh: the commands that capture the same evidence again, run for real.

The `fabricase collect` branch is run against a stand-in `fabricase` that records its arguments, and those
are checked against the real `collect` command's options; the fallback branch runs the capture script on
this machine (via local) and through a stand-in `ssh` (via ssh), and the streams it keeps parse."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import click
import pytest

from fabricase.bundler.reproduce import capture_plan, capture_script, reproduce_script
from fabricase.cli import cli
from fabricase.collectors.framing import parse_stream
from fabricase.errors import BundleError

NCCL = "/scratch/job 1/nccl's.log"
META = {
    "format": "fabricase-capture",
    "format_version": 2,
    "created_at": "2026-11-30T00:00:00Z",
    "tool_version": "0.1.0",
    "interval_s": 5.0,
    "since_s": 7200,
    "collectors": {"ethtool": 1, "rdma": 1},  # as capture.json stores them: sorted by name
    "targets": {"nodeset": "gpu[001-003]", "hosts": ["gpu001", "gpu002", "gpu003"], "via": "ssh"},
    "hosts": ["gpu001", "gpu002", "gpu003"],
    "inputs": [{"kind": "nccl-log", "source": NCCL, "path": "inputs/nccl-log/000-nccl_s.log", "bytes": 1,
                "sha256": "0" * 64, "truncated": False}],
}


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def bundle_dir(tmp_path: Path, meta: dict) -> Path:
    """reproduce.sh and capture-script.sh as they lie in an extracted bundle (mode 0644: run with sh)."""
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "reproduce.sh").write_text(reproduce_script(meta))
    (folder / "capture-script.sh").write_text(capture_script(meta))
    return folder


def run(folder: Path, out: Path, path: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(folder / "reproduce.sh"), str(out)], capture_output=True, text=True,
                          env={"PATH": path, "HOME": str(folder), **env}, timeout=120, cwd=folder.parent)


def fake_fabricase(tmp_path: Path) -> str:
    """A `fabricase` on PATH that writes its arguments, one per NUL, to $ARGS_FILE."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "fabricase", '#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done >"$ARGS_FILE"\n')
    return f"{bin_dir}:{os.environ['PATH']}"


def collect_args(tmp_path: Path, meta: dict) -> list[str]:
    folder = bundle_dir(tmp_path, meta)
    args_file = tmp_path / "args"
    result = run(folder, tmp_path / "out", fake_fabricase(tmp_path), ARGS_FILE=str(args_file))
    assert result.returncode == 0, result.stderr
    return args_file.read_text().split("\0")[:-1]


def test_both_scripts_pass_sh_n(tmp_path):
    folder = bundle_dir(tmp_path, META)
    for name in ("reproduce.sh", "capture-script.sh"):
        subprocess.run(["sh", "-n", str(folder / name)], check=True)
        assert (folder / name).read_text().startswith("#!/bin/sh\n")


def test_fabricase_collect_gets_the_capture_s_targets_and_options(tmp_path):
    args = collect_args(tmp_path, META)
    assert args == ["collect", "--hosts", "gpu[001-003]", "--via", "ssh", "--interval", "5", "--since", "2",
                    "--collector", "rdma", "--collector", "ethtool", "--nccl-log", NCCL, "-o", str(tmp_path / "out")]
    options = {opt for p in cli.get_command(click.Context(cli), "collect").params for opt in p.opts}
    assert {a for a in args if a.startswith("-")} <= options


def test_a_slurm_job_is_captured_by_job(tmp_path):
    meta = {**META, "targets": {"job": "48213", "hosts": ["gpu001", "gpu002"], "via": "slurm",
                                "slurm": {"job_id": "48213", "state": "RUNNING"}}}
    args = collect_args(tmp_path, meta)
    assert args[:5] == ["collect", "--job", "48213", "--via", "slurm"]
    assert "Slurm job 48213 on gpu[001-002]" in reproduce_script(meta)


def test_default_collectors_give_no_collector_option_and_perf_gives_perf(tmp_path):
    from fabricase.collectors import select_collectors

    default = {c.name: c.version for c in select_collectors()}
    assert "--collector" not in reproduce_script({**META, "collectors": default})
    text = reproduce_script({**META, "collectors": {**default, "perf": 1}})
    assert "--perf" in text and "--collector" not in text
    assert [c.name for c in capture_plan({**META, "collectors": {**default, "perf": 1}}).collectors][-1] == "perf"


def test_what_capture_json_does_not_record_is_said(tmp_path):
    meta = {k: v for k, v in META.items() if k != "since_s"}
    assert "--since" not in collect_args(tmp_path, meta)
    assert "does not record the kernel-log window (--since)" in reproduce_script(meta)
    assert capture_plan(meta).since_s == 24 * 3600 and capture_plan(META).since_s == 7200
    changed = reproduce_script({**META, "collectors": {"rdma": 99, "gone": 1}})
    assert "collector rdma was version 99 at capture" in changed
    assert "collector gone (version 1) is unknown to this fabricase" in changed


def test_targets_without_a_nodeset_fold_the_hosts(tmp_path):
    meta = {**META, "targets": {"harness": "bad-switch-0"}, "hosts": ["gpu003", "gpu001", "gpu002"]}
    assert collect_args(tmp_path, meta)[1:3] == ["--hosts", "gpu[001-003]"]


def test_hostile_capture_json_cannot_run_anything(tmp_path):
    marker = tmp_path / "pwned"
    meta = {**META, "created_at": f"x\ntouch {marker}\n", "tool_version": f"$(touch {marker})",
            "inputs": [{"kind": "nccl-log", "source": f"'; touch {marker}; '"}]}
    args = collect_args(tmp_path, meta)
    assert not marker.exists()
    assert args[args.index("--nccl-log") + 1] == f"'; touch {marker}; '"
    for hosts in (["gpu001; touch x"], ["-oProxyCommand=touch x"], ["../../etc"]):
        with pytest.raises(BundleError, match="capture.json: invalid host name"):
            reproduce_script({**META, "targets": {"via": "ssh"}, "hosts": hosts})
    with pytest.raises(BundleError, match="capture.json: malformed nodeset"):
        reproduce_script({**META, "targets": {"nodeset": "gpu[1-2"}})
    with pytest.raises(BundleError, match="names no host"):
        reproduce_script({**META, "targets": {}, "hosts": []})
    with pytest.raises(BundleError, match="interval_s is not a number"):
        reproduce_script({**META, "interval_s": "5; reboot"})


def stream_items(path: Path) -> list:
    stream = parse_stream(path.read_bytes())
    assert stream.complete and stream.error is None
    return stream.items


def test_without_fabricase_the_capture_script_runs_here(tmp_path):
    meta = {**META, "interval_s": 0, "collectors": {"netdev": 1}, "targets": {"nodeset": "localhost", "via": "local"},
            "hosts": ["localhost"]}
    folder = bundle_dir(tmp_path, meta)
    out = tmp_path / "out"
    result = run(folder, out, os.environ["PATH"], FABRICASE_NO_TOOL="1")
    assert result.returncode == 0, result.stderr
    items = stream_items(out / "localhost.fc1")
    assert {i.collector for i in items} == {"netdev"}
    assert any(i.source == "/sys/class/net/lo/statistics/rx_bytes" and i.snapshot == 1 for i in items)


def test_without_fabricase_each_host_is_captured_over_ssh(tmp_path):
    """A stand-in ssh that records how it was called and runs the script here."""
    bin_dir = tmp_path / "sshbin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    executable(bin_dir / "ssh", f'#!/bin/sh\necho "$*" >>{calls}\nexec sh -s\n')
    meta = {**META, "interval_s": 0, "collectors": {"netdev": 1}}
    folder = bundle_dir(tmp_path, meta)
    result = run(folder, tmp_path / "out", f"{bin_dir}:/usr/bin:/bin", FABRICASE_NO_TOOL="1")
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [f"-o BatchMode=yes -- {h} sh -s" for h in META["hosts"]]
    for host in META["hosts"]:
        assert stream_items(tmp_path / "out" / f"{host}.fc1")


def test_a_host_that_fails_is_reported_and_the_rest_still_run(tmp_path):
    bin_dir = tmp_path / "sshbin"
    bin_dir.mkdir()
    executable(bin_dir / "ssh", '#!/bin/sh\n[ "$4" = gpu002 ] && exit 255\nexec sh -s\n')
    folder = bundle_dir(tmp_path, {**META, "interval_s": 0, "collectors": {"netdev": 1}})
    result = run(folder, tmp_path / "out", f"{bin_dir}:/usr/bin:/bin", FABRICASE_NO_TOOL="1")
    assert result.returncode == 1
    assert "gpu002: the capture exited 255" in result.stderr
    assert stream_items(tmp_path / "out" / "gpu003.fc1")


def test_from_a_loaded_capture(tmp_path):
    """A Capture (what pipeline.load_input gives) works as well as capture.json's document."""
    from fabricase.capturedir import load_capture, write_capture_meta
    from fabricase.collectors import select_collectors
    from fabricase.collectors.plan import CapturePlan

    root = tmp_path / "cap"
    root.mkdir()
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma"])), interval_s=2)
    write_capture_meta(root, plan=plan, targets={"nodeset": "gpu[001-002]", "hosts": ["gpu001", "gpu002"],
                                                 "via": "ssh"}, hosts=[], created_at="2026-11-30T00:00:00Z")
    text = reproduce_script(load_capture(root))
    assert "--hosts 'gpu[001-002]'" in text and "--collector rdma" in text and "--interval 2" in text
