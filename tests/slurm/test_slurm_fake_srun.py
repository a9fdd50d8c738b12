"""The slurm transport's own logic (per-node files, live on_done, timeouts, partial and missing nodes, the output
cap, Ctrl-C) against a stand-in `srun` that runs the step's command once per node on this machine, the way
slurmstepd would. Needs no Slurm and no root; the real cluster is exercised in test_slurm_cluster.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fabricase.models import HostStatus
from fabricase.slurm import SlurmJob
from fabricase.transports.slurm import SlurmTransport

# Runs `sh -c WRAPPER fabricase DIR` (everything from `sh` on) once per node of FAKE_SRUN_NODES, in parallel,
# with SLURMD_NODENAME set; a node in FAKE_SRUN_LOST gets srun's own error instead. SIGTERM ends the step.
FAKE_SRUN = """#!/bin/sh
trap 'trap - TERM; kill -TERM 0 2>/dev/null; exit 143' TERM
echo "$@" > "$FAKE_SRUN_ARGS"
while [ $# -gt 0 ] && [ "$1" != sh ]; do shift; done
i=0
for n in $FAKE_SRUN_NODES; do
  case " $FAKE_SRUN_LOST " in
    *" $n "*) echo "srun: error: $n: task $i: Killed" >&2 ;;
    *) SLURMD_NODENAME=$n "$@" & ;;
  esac
  i=$((i+1))
done
wait
"""
NODES = ["gpu001", "gpu002", "gpu003"]


@pytest.fixture
def fake_srun(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "srun"
    exe.parent.mkdir()
    exe.write_text(FAKE_SRUN)
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_SRUN_NODES", " ".join(NODES))
    monkeypatch.setenv("FAKE_SRUN_ARGS", str(tmp_path / "args"))
    monkeypatch.setenv("FABRICASE_SLURM_DIR", str(tmp_path))
    return str(exe)


def _transport(srun: str, **kw) -> SlurmTransport:
    job = SlurmJob("77", "train", "RUNNING", "gpu", list(NODES), "gpu[001-003]", "bob", srun_job_id="77")
    return SlurmTransport(job, srun, poll_s=0.05, kill_grace_s=5, **kw)


def _by_host(runs):
    return {r.host: r for r in runs}


def test_each_node_reports_as_it_finishes(fake_srun, tmp_path):
    script = 'sleep "$(( ${SLURMD_NODENAME#gpu00} - 1 ))"; printf "%s\\r\\n" "$SLURMD_NODENAME"; echo warn >&2'
    seen = []
    t0 = time.monotonic()
    runs = _transport(fake_srun).run(NODES, script, timeout_s=20,
                                     on_done=lambda r: seen.append((r.host, round(time.monotonic() - t0))))
    assert [h for h, _ in seen] == NODES and [t for _, t in seen] == [0, 1, 2]  # live, not all at the end
    for run in runs:
        assert (run.status, run.rc, run.stdout, run.stderr) == (HostStatus.OK, 0, f"{run.host}\r\n".encode(),
                                                                b"warn\n")
    args = (tmp_path / "args").read_text()
    assert "--jobid=77 --overlap -N 3 --ntasks=3 --ntasks-per-node=1 -w gpu[001-003]" in args
    assert not list(tmp_path.glob(".fabricase-slurm-*"))  # removed afterwards


def test_the_work_folder_is_private(fake_srun, tmp_path):
    script = 'ls -ld "$(dirname "$0")" | cut -c1-10; ls -l "$(dirname "$0")/$SLURMD_NODENAME.out" | cut -c1-10'
    runs = _transport(fake_srun).run(["gpu001"], script, timeout_s=20)
    assert runs[0].stdout == b"drwx------\n-rw-------\n"


def test_a_node_srun_lost_a_node_cut_short_and_a_script_failure(fake_srun, monkeypatch):
    monkeypatch.setenv("FAKE_SRUN_LOST", "gpu003")
    script = ('echo begin; case "$SLURMD_NODENAME" in gpu001) echo bad >&2; exit 2;; '
              'gpu002) kill -9 $PPID; exit 0;; esac')  # gpu002: the step's task dies under the script
    runs = _by_host(_transport(fake_srun).run(NODES, script, timeout_s=20))
    assert (runs["gpu001"].status, runs["gpu001"].rc) == (HostStatus.FAILED, 2)
    assert runs["gpu001"].reason == "capture script exited 2 on gpu001: bad"
    assert runs["gpu002"].status == HostStatus.PARTIAL and runs["gpu002"].stdout == b"begin\n"
    assert runs["gpu002"].reason == ("capture on gpu002 stopped before it finished "
                                     "(srun: error: gpu003: task 2: Killed)")
    assert runs["gpu003"].status == HostStatus.FAILED and runs["gpu003"].stdout == b""
    assert runs["gpu003"].reason == "no output from gpu003 (srun: error: gpu003: task 2: Killed)"


def test_a_hanging_node_times_out_and_the_others_are_kept(fake_srun):
    script = 'echo begin; [ "$SLURMD_NODENAME" = gpu002 ] && exec sleep 60; echo end'
    t0 = time.monotonic()
    runs = _by_host(_transport(fake_srun).run(NODES, script, timeout_s=1.5))
    assert time.monotonic() - t0 < 5
    assert runs["gpu001"].status == HostStatus.OK and runs["gpu003"].stdout == b"begin\nend\n"
    assert runs["gpu002"].status == HostStatus.TIMED_OUT and runs["gpu002"].stdout == b"begin\n"
    assert runs["gpu002"].reason == "capture did not finish within 1.5s on gpu002"


def test_the_overall_deadline_caps_the_step(fake_srun):
    runs = _transport(fake_srun, deadline_s=1).run(["gpu001"], "sleep 60", timeout_s=30)
    assert runs[0].reason == "capture did not finish within 1s on gpu001"


def test_output_over_the_cap_is_cut_and_the_node_partial(fake_srun):
    runs = _transport(fake_srun, max_output_bytes=1000).run(["gpu001"], "head -c 5000 /dev/zero", timeout_s=20)
    assert runs[0].status == HostStatus.PARTIAL and runs[0].stdout == b"\0" * 1000
    assert runs[0].reason == "output from gpu001 exceeded 1000 bytes; the first ones are kept"


def test_ctrl_c_keeps_what_came_back(fake_srun):
    calls = []

    def interrupt(run):  # Ctrl-C once, while the first node is being recorded
        calls.append(run.host)
        if len(calls) == 1:
            raise KeyboardInterrupt

    script = '[ "$SLURMD_NODENAME" = gpu001 ] || exec sleep 60; echo quick'
    t0 = time.monotonic()
    runs = _by_host(_transport(fake_srun).run(NODES, script, timeout_s=30, on_done=interrupt))
    assert time.monotonic() - t0 < 10
    assert runs["gpu001"].status == HostStatus.OK and runs["gpu001"].stdout == b"quick\n"
    assert [runs[h].reason for h in ("gpu002", "gpu003")] == ["interrupted", "interrupted"]
    assert sorted(calls) == NODES  # every node is still reported, so the capture records it


def test_a_work_folder_that_cannot_be_made(fake_srun, tmp_path, monkeypatch):
    from fabricase.errors import TransportError

    t = _transport(fake_srun, workdir=tmp_path / "missing" / "deeper")
    with pytest.raises(TransportError, match="cannot create the srun work folder .*FABRICASE_SLURM_DIR"):
        t.run(["gpu001"], "true", timeout_s=5)
    assert Path(tmp_path / "args").exists() is False
