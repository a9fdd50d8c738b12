"""The probe inside a Slurm job (fabricase.probe.srun): srun steps per node and one across nodes, the sweep, and
the guard rails, on the real Slurm cluster of tests/slurm/conftest.py (every slurmd is on this machine, so /proc
here shows every node's processes). The pure parts (argv, squeue parsing) are tested without it."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fabricase.errors import TargetError
from fabricase.probe.exec import TAG_VAR, sweep_script
from fabricase.probe.srun import STEP_NAME, SrunExec, allocation_job, jobs_on_nodes, probe_nodes
from fabricase.slurm import SlurmJob, resolve_job


def _job(**kw) -> SlurmJob:
    base = dict(job_id="48213", name="train", state="RUNNING", partition="gpu", nodes=["gpu001", "gpu002"],
                nodelist="gpu[001-002]", user="alice", srun_job_id="48213")
    return SlurmJob(**{**base, **kw})


def _tagged(tag: str) -> list[int]:
    """Processes on this machine (so on every test node) whose environment holds the tag."""
    want = f"{TAG_VAR}={tag}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if want in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


# -- pure: argv and parsing ------------------------------------------------------------------------------------


def test_argv_is_one_task_step_on_the_node(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    for name in [k for k in os.environ if k.startswith(("SLURM_", "SRUN_")) and k != "SLURM_CONF"]:
        monkeypatch.delenv(name)
    ex = SrunExec(_job(), limit_s=150)
    assert ex.name == "slurm"
    assert ex.argv("gpu002", "echo hi") == [
        "srun", "--jobid=48213", "--overlap", "-N1", "-n1", "-w", "gpu002", "--kill-on-bad-exit=1", "--time=4",
        "--input=none", f"--job-name={STEP_NAME}", "sh", "-c", "echo hi"]
    het = SrunExec(_job(job_id="48213+1", srun_job_id="48213", het_group=1))
    assert het.step_argv("gpu001", "x", 30)[:4] == ["srun", "--jobid=48213", "--het-group=1", "--overlap"]
    assert "--time=2" in het.step_argv("gpu001", "x", 30)


def test_srun_runs_without_the_allocations_slurm_variables(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    argv = SrunExec(_job()).argv("gpu001", "true")
    assert argv[:argv.index("srun")] == ["env", "-u", "SLURM_JOB_ID", "-u", "SLURM_NTASKS"]
    assert "SLURM_CONF" not in argv


def test_collective_argv_one_rank_per_node_in_order_under_the_tag(monkeypatch):
    for name in [k for k in os.environ if k.startswith(("SLURM_", "SRUN_")) and k != "SLURM_CONF"]:
        monkeypatch.delenv(name)
    ex = SrunExec(_job(nodes=["gpu001", "gpu002", "gpu003"]))
    argv = ex.collective_argv(["gpu003", "gpu001"], ["all_reduce_perf", "-b", "8"], tag="t-1", limit_s=60,
                              env={"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5_0,mlx5_1"})
    assert argv == ["srun", "--jobid=48213", "--overlap", "-N", "2", "--ntasks=2", "--ntasks-per-node=1", "-m",
                    "arbitrary", "-w", "gpu003,gpu001", "--kill-on-bad-exit=1", "--time=2", "--input=none",
                    f"--job-name={STEP_NAME}", "--export=ALL,FABRICASE_PROBE=t-1,NCCL_DEBUG=INFO,NCCL_IB_HCA",
                    "timeout", "-k", "5", "60", "all_reduce_perf", "-b", "8"]
    with pytest.raises(ValueError, match="invalid environment variable"):
        ex.collective_argv(["gpu001"], ["x"], tag="t", limit_s=5, env={"A,B": "1"})


def test_a_node_outside_the_job_or_a_bad_collective_fails_without_running():
    ex = SrunExec(_job())
    out = ex.start("gpu009", ["true"], tag="t", limit_s=5).wait()
    assert (out.status, out.error) == ("failed", "gpu009 is not a node of job 48213 (gpu[001-002])")
    assert ex.collective(["gpu001", "gpu009"], ["true"], tag="t", limit_s=5).wait().error == \
        "gpu009 is not a node of job 48213 (gpu[001-002])"
    assert ex.collective(["gpu001", "gpu001"], ["true"], tag="t", limit_s=5).wait().error == \
        "a collective names a node twice: gpu001,gpu001"
    assert ex.collective([], ["true"], tag="t", limit_s=5).wait().error == "a collective needs at least one host"
    assert ex.start("gpu001", ["true"], tag="bad tag", limit_s=5).wait().error == "invalid probe tag: 'bad tag'"


def test_address_falls_back_to_the_node_name():
    ex = SrunExec(_job(), scontrol="/nonexistent/scontrol")
    assert ex.address("gpu001") == "gpu001"


@pytest.mark.parametrize(("text", "expected"), [
    ("17|nobody|gpu002\n", [("17", "nobody", ["gpu002"])]),
    ("17|nobody|gpu[002-003]\n18_4|bob|gpu001\n19+1|carol$|gpu004", [
        ("17", "nobody", ["gpu002", "gpu003"]), ("18_4", "bob", ["gpu001"]), ("19+1", "carol$", ["gpu004"])]),
    ("  21|alice|gpu001  \n\n", [("21", "alice", ["gpu001"])]),
    ("", []),
    # hostile or broken lines: ignored, the good ones kept
    ("17|nobody\n17|a|b|c\nnot a line\n|nobody|gpu001\n17||gpu001\n17|nobody|\n", []),
    ("x17|nobody|gpu001\n17|no body|gpu001\n17|\x1b[31mroot|gpu001\n17|nobody|gpu[001-\n22|dave|gpu003", [
        ("22", "dave", ["gpu003"])]),
    ("17;rm -rf /|nobody|gpu001\n17|nobody|gpu001;reboot\n", [("17", "nobody", ["gpu001;reboot"])]),
])
def test_jobs_on_nodes(text, expected):
    assert jobs_on_nodes(text) == expected


def test_allocation_job():
    assert allocation_job({"SLURM_JOB_ID": "48213"}) == "48213"
    assert allocation_job({"SLURM_JOB_ID": " 48213\n"}) == "48213"
    assert allocation_job({}) is None
    assert allocation_job({"SLURM_JOB_ID": ""}) is None
    assert allocation_job({"SLURM_JOB_ID": "12; rm -rf /"}) is None


def _fake_squeue(tmp_path: Path, output: str, rc: int = 0) -> str:
    (tmp_path / "out.txt").write_text(output)
    exe = tmp_path / "squeue"
    exe.write_text(f'#!/bin/sh\necho "$@" >"{tmp_path}/args"\ncat "{tmp_path}/out.txt"\n'
                   f'[ {rc} = 0 ] || echo "squeue: error: Unable to contact slurm controller" >&2\nexit {rc}\n')
    exe.chmod(0o755)
    return str(exe)


def test_probe_nodes_guard_rails_without_a_cluster(tmp_path):
    squeue = _fake_squeue(tmp_path, "48213|alice|gpu[001-002]\n50|alice|gpu002\n")
    assert probe_nodes(_job(), user="alice", squeue=squeue) == ["gpu001", "gpu002"]
    assert (tmp_path / "args").read_text().split() == ["-h", "-t", "RUNNING", "-w", "gpu001,gpu002", "-o",
                                                       "%i|%u|%N"]
    assert probe_nodes(_job(), ["gpu002", "gpu002"], user="alice", squeue=squeue) == ["gpu002"]
    cases = [
        (dict(job=_job(state="PENDING")), "job 48213 is PENDING, not RUNNING: a probe runs only inside a running job"),
        (dict(job=_job(state="COMPLETED")), "job 48213 is COMPLETED, not RUNNING: a probe runs only inside a "
                                            "running job"),
        (dict(job=_job(user="bob")), "job 48213 belongs to user bob, not alice: a probe runs only on the nodes of "
                                     "your own job"),
        (dict(job=_job(), requested=["gpu001", "gpu007", "gpu008"]),
         "gpu007 is not a node of job 48213 (gpu[001-002]); not probed"),
    ]
    for kw, message in cases:
        with pytest.raises(TargetError) as err:
            probe_nodes(kw["job"], kw.get("requested"), user="alice", squeue=squeue)
        assert (err.value.message, err.value.where) == (message, "--job")
    other = _fake_squeue(tmp_path, "48213|alice|gpu[001-002]\n17|nobody|gpu[002-004]\n")
    with pytest.raises(TargetError) as err:
        probe_nodes(_job(), user="alice", squeue=other)
    assert err.value.message == "gpu002 runs job 17 of user nobody: a probe would load its NICs and GPUs; not probed"
    assert probe_nodes(_job(), ["gpu001"], user="alice", squeue=other) == ["gpu001"]  # that job is not on it
    broken = _fake_squeue(tmp_path, "", rc=1)
    with pytest.raises(TargetError, match=r"cannot check which jobs run on gpu001,gpu002 \(squeue: squeue: error: "
                                          r"Unable to contact slurm controller\); not probed"):
        probe_nodes(_job(), user="alice", squeue=broken)
    with pytest.raises(TargetError, match="no /nonexistent/squeue on PATH; not probed"):
        probe_nodes(_job(), user="alice", squeue="/nonexistent/squeue")


# -- the real cluster ------------------------------------------------------------------------------------------


def _probe_steps(cluster, job_id: str) -> list[str]:
    return [s for s in cluster.steps(job_id) if STEP_NAME in s]


def _wait_no_probe_steps(cluster, job_id: str, timeout: float = 15) -> None:
    end = time.monotonic() + timeout
    while _probe_steps(cluster, job_id) and time.monotonic() < end:
        time.sleep(0.2)
    assert not _probe_steps(cluster, job_id)


def test_each_node_runs_its_own_command_and_a_slow_one_times_out(slurm_cluster, job_factory):
    job = resolve_job(job_factory("-N3", "--wrap", "sleep 300"))
    ex = SrunExec(job, limit_s=30)
    runs = [ex.start(node, ["sh", "-c", 'echo "$SLURMD_NODENAME $FABRICASE_PROBE"'], tag="h4-names", limit_s=20)
            for node in job.nodes]
    outs = [r.wait() for r in runs]
    assert [(o.host, o.status, o.stdout) for o in outs] == [(n, "ok", f"{n} h4-names\n".encode()) for n in job.nodes]
    slow = ex.start(job.nodes[1], ["sleep", "60"], tag="h4-slow", limit_s=2).wait()
    assert slow.status == "timed-out" and slow.rc == 124, slow
    assert slow.error == f"did not finish within 2 s on {job.nodes[1]}"
    failed = ex.start(job.nodes[0], ["sh", "-c", "echo boom >&2; exit 3"], tag="h4-fail", limit_s=20).wait()
    assert failed.status == "failed" and failed.rc == 3 and failed.error.startswith(f"exit 3 on {job.nodes[0]}")
    assert ex.address(job.nodes[0]) == "localhost"  # NodeHostname=localhost, so NodeAddr is localhost
    assert not _tagged("h4-slow")
    _wait_no_probe_steps(slurm_cluster, job.job_id)
    assert slurm_cluster.state(job.job_id) == "RUNNING"


def test_sweep_finds_and_kills_what_a_test_left_behind(slurm_cluster, job_factory):
    job = resolve_job(job_factory("-N2", "--wrap", "sleep 300"))
    ex = SrunExec(job, limit_s=30)
    tag = "h4-left"
    # linuxproc does not follow an orphan: a background sleep outlives its step, carrying the tag
    left = ex.start(job.nodes[1], ["sh", "-c", "sleep 300 >/dev/null 2>&1 </dev/null & echo $!"], tag=tag,
                    limit_s=20).wait()
    try:
        assert left.status == "ok", left
        pid = int(left.stdout.decode().strip())
        assert _tagged(tag) == [pid]
        found = ex.sweep(job.nodes[1], tag)
        assert len(found) == 1 and found[0].split()[0] == str(pid) and "sleep 300" in found[0]
        end = time.monotonic() + 5
        while _tagged(tag) and time.monotonic() < end:
            time.sleep(0.1)
        assert _tagged(tag) == []
        assert ex.sweep(job.nodes[1], tag) == []
    finally:
        for stray in _tagged(tag):
            os.kill(stray, 9)
    _wait_no_probe_steps(slurm_cluster, job.job_id)


def test_killing_the_local_srun_leaves_nothing_with_the_tag(slurm_cluster, job_factory):
    job = resolve_job(job_factory("-N1", "--wrap", "sleep 300"))
    ex = SrunExec(job, limit_s=30)
    tag = "h4-stop"
    run = ex.start(job.nodes[0], ["sleep", "300"], tag=tag, limit_s=60)
    end = time.monotonic() + 15
    while not _tagged(tag) and time.monotonic() < end:
        time.sleep(0.1)
    assert _tagged(tag), "the test never started on the node"
    run.stop()
    assert run.wait().status == "interrupted"
    ex.sweep(job.nodes[0], tag)  # whatever slurmstepd did not already end
    end = time.monotonic() + 10
    while _tagged(tag) and time.monotonic() < end:
        time.sleep(0.1)
    assert _tagged(tag) == []
    _wait_no_probe_steps(slurm_cluster, job.job_id)


def test_collective_is_one_step_with_one_rank_per_node(slurm_cluster, job_factory):
    job = resolve_job(job_factory("-N3", "--wrap", "sleep 300"))
    ex = SrunExec(job)
    hosts = [job.nodes[2], job.nodes[0], job.nodes[1]]  # rank 0 on hosts[0], whatever Slurm's order
    run = ex.collective(hosts, ["sh", "-c", 'echo "rank $SLURM_PROCID on $SLURMD_NODENAME $FABRICASE_PROBE $X"'],
                        tag="h4-coll", limit_s=30, env={"X": "y"})
    out = run.wait()
    assert out.status == "ok" and out.host == hosts[0], out
    lines = sorted(out.stdout.decode().splitlines())
    assert lines == [f"rank {i} on {h} h4-coll y" for i, h in enumerate(hosts)]
    hang = ex.collective(job.nodes[:2], ["sh", "-c", '[ "$SLURM_PROCID" = 1 ] && exec sleep 60; echo ok'],
                         tag="h4-hang", limit_s=3).wait()
    assert hang.status == "timed-out", hang
    _wait_no_probe_steps(slurm_cluster, job.job_id)
    end = time.monotonic() + 10
    while (_tagged("h4-hang") or _tagged("h4-coll")) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _tagged("h4-hang") and not _tagged("h4-coll")
    assert slurm_cluster.state(job.job_id) == "RUNNING"


def test_probe_nodes_on_our_own_job(slurm_cluster, job_factory):
    job = resolve_job(job_factory("-N2", "--wrap", "sleep 300"))
    assert probe_nodes(job) == job.nodes
    assert probe_nodes(job, [job.nodes[1]]) == [job.nodes[1]]
    stranger = next(n for n in slurm_cluster.nodes if n not in job.nodes)
    with pytest.raises(TargetError) as err:
        probe_nodes(job, [job.nodes[0], stranger])
    assert err.value.message == f"{stranger} is not a node of job {job.job_id} ({job.nodelist}); not probed"


def _sbatch_as(cluster, user: str, *args: str) -> str:
    out = cluster.run("runuser", "-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", "-o", "/dev/null", *args)
    return out.stdout.strip().split(";")[0]


def test_probe_nodes_refuses_another_users_job_and_a_shared_node(slurm_cluster, job_factory):
    theirs = _sbatch_as(slurm_cluster, "nobody", "-N1", "-c1", "-w", "gpu003", "--wrap", "sleep 300")
    try:
        slurm_cluster.wait_state(theirs, {"RUNNING"})
        with pytest.raises(TargetError) as err:
            probe_nodes(resolve_job(theirs))
        assert err.value.message == (f"job {theirs} belongs to user nobody, not root: a probe runs only on the "
                                     "nodes of your own job")
        ours = resolve_job(job_factory("-N2", "-c1", "-w", "gpu[003-004]", "--wrap", "sleep 300"))
        assert ours.nodes == ["gpu003", "gpu004"]
        with pytest.raises(TargetError) as err:
            probe_nodes(ours)
        assert (err.value.message, err.value.where) == (
            f"gpu003 runs job {theirs} of user nobody: a probe would load its NICs and GPUs; not probed", "--job")
        assert probe_nodes(ours, ["gpu004"]) == ["gpu004"]
    finally:
        slurm_cluster.run("scancel", theirs, check=False)


def test_probe_nodes_refuses_a_job_that_is_not_running(slurm_cluster, job_factory):
    job_id = job_factory("-N1", "--wrap", "sleep 300")
    slurm_cluster.run("scontrol", "suspend", job_id)
    try:
        slurm_cluster.wait_state(job_id, {"SUSPENDED"})
        with pytest.raises(TargetError) as err:
            probe_nodes(resolve_job(job_id))
        assert err.value.message == f"job {job_id} is SUSPENDED, not RUNNING: a probe runs only inside a running job"
    finally:
        slurm_cluster.run("scontrol", "resume", job_id, check=False)
    job_factory("-N4", "--exclusive", "--wrap", "sleep 300", running=False)
    pending = job_factory("-N4", "--exclusive", "--wrap", "sleep 300", running=False)
    slurm_cluster.wait_state(pending, {"PENDING"})
    with pytest.raises(TargetError, match=f"job {pending} is PENDING"):
        probe_nodes(resolve_job(pending))  # resolve_job already refuses: no nodes yet
    running = resolve_job(job_id)
    with pytest.raises(TargetError, match=f"job {job_id} is PENDING, not RUNNING"):
        probe_nodes(replace(running, state="PENDING"))


def test_the_sweep_script_runs_through_srun_unchanged(slurm_cluster, job_factory):
    job = resolve_job(job_factory("-N1", "--wrap", "sleep 300"))
    argv = SrunExec(job).argv(job.nodes[0], sweep_script("h4-none"))
    assert argv[-3:] == ["sh", "-c", sweep_script("h4-none")]
    assert SrunExec(job).sweep(job.nodes[0], "h4-none") == []
