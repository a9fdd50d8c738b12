"""`--job ID` resolution and the slurm transport on a real Slurm cluster (tests/slurm/conftest.py): the job's
own nodes, one srun step across them, per-node framed streams, timeouts, ended and unknown jobs."""

from __future__ import annotations

import json
import sys
import time
import types

import pytest

from fabricase.collectors.framing import parse_stream
from fabricase.errors import TargetError, TransportError
from fabricase.models import HostStatus
from fabricase.slurm import resolve_job
from fabricase.transports.slurm import STEP_NAME, SlurmTransport

# Every byte value, a CR before LF, no trailing newline: what comes back must be exactly this.
BINARY = "printf 'node=%s\\r\\n' \"$SLURMD_NODENAME\"; printf '\\000\\001\\377\\r\\n'; printf 'end'"


def test_cluster_is_up(slurm_cluster):
    print(f"\nslurm cluster up in {slurm_cluster.started_s:.1f}s")
    assert slurm_cluster.started_s < 60


def test_resolve_gives_exactly_the_jobs_nodes_and_partition(slurm_cluster, job_factory):
    job_id = job_factory("-N2", "-J", "nccl allreduce", "--wrap", "sleep 300")
    expected = slurm_cluster.run("squeue", "-h", "-j", job_id, "-o", "%N").stdout.strip()
    want = slurm_cluster.run("scontrol", "show", "hostnames", expected).stdout.split()
    job = resolve_job(job_id)
    assert job.job_id == job_id and job.state == "RUNNING" and job.running and not job.ended
    assert job.nodes == want and len(job.nodes) == 2 and set(job.nodes) <= set(slurm_cluster.nodes)
    assert job.nodelist == expected
    assert job.partition == "gpu" and job.user == "root" and job.name == "nccl allreduce"
    assert job.start_time  # end_time, for a running job, is when its time limit would end it
    assert job.describe()["nodes"] == want


def test_one_step_brings_back_each_nodes_own_bytes(slurm_cluster, job_factory):
    job_id = job_factory("-N2", "--wrap", "sleep 300")
    job = resolve_job(job_id)
    done = []
    t0 = time.monotonic()
    runs = SlurmTransport(job).run(job.nodes, BINARY, timeout_s=30, on_done=done.append)
    print(f"\nsrun step on {len(job.nodes)} nodes: {time.monotonic() - t0:.2f}s")
    assert [r.host for r in runs] == job.nodes and sorted(r.host for r in done) == sorted(job.nodes)
    for run in runs:
        assert run.status == HostStatus.OK and run.rc == 0 and run.reason is None, run
        assert run.stdout == f"node={run.host}\r\n".encode() + b"\x00\x01\xff\r\nend"
        assert run.started_at and run.finished_at
    assert not [s for s in slurm_cluster.steps(job_id) if STEP_NAME in s]  # the step is gone
    assert slurm_cluster.state(job_id) == "RUNNING"


def test_failing_and_hanging_nodes_are_reported_and_the_job_keeps_running(slurm_cluster, job_factory):
    job_id = job_factory("-N3", "--wrap", "sleep 300")
    job = resolve_job(job_id)
    first, second, third = job.nodes
    script = (f'echo begin; case "$SLURMD_NODENAME" in {second}) echo boom >&2; exit 3;; '
              f'{third}) exec sleep 120;; esac; echo end')
    runs = {r.host: r for r in SlurmTransport(job, kill_grace_s=10).run(job.nodes, script, timeout_s=3)}
    assert runs[first].status == HostStatus.OK and runs[first].stdout == b"begin\nend\n"
    assert runs[second].status == HostStatus.FAILED and runs[second].rc == 3
    assert runs[second].reason == f"capture script exited 3 on {second}: boom"
    assert runs[third].status == HostStatus.TIMED_OUT and runs[third].stdout == b"begin\n"
    assert runs[third].reason == f"capture did not finish within 3s on {third}"
    assert slurm_cluster.state(job_id) == "RUNNING"
    deadline = time.monotonic() + 15
    while [s for s in slurm_cluster.steps(job_id) if STEP_NAME in s] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [s for s in slurm_cluster.steps(job_id) if STEP_NAME in s]


def test_a_host_outside_the_job_is_failed_with_the_reason(slurm_cluster, job_factory):
    job = resolve_job(job_factory("-N1", "--wrap", "sleep 300"))
    stranger = next(n for n in slurm_cluster.nodes if n not in job.nodes)
    runs = SlurmTransport(job).run([*job.nodes, stranger], "echo hi", timeout_s=30)
    assert runs[0].status == HostStatus.OK and runs[0].stdout == b"hi\n"
    assert runs[1].status == HostStatus.FAILED
    assert runs[1].reason == f"{stranger} is not a node of job {job.job_id} ({job.nodelist})"


def test_an_array_task_is_captured_through_its_own_job_id(slurm_cluster, job_factory):
    array = job_factory("-N1", "--array=1-2", "--wrap", "sleep 300", running=False)
    slurm_cluster.wait_state(f"{array}_1", {"RUNNING"})
    with pytest.raises(TargetError, match=rf"job {array} is an array job with 2 tasks .*--job {array}_1"):
        resolve_job(array)
    job = resolve_job(f"{array}_1")
    assert job.job_id == f"{array}_1" and job.srun_job_id != array
    runs = SlurmTransport(job).run(job.nodes, 'echo "$SLURM_JOB_ID"', timeout_s=30)
    assert [(r.status, r.stdout) for r in runs] == [(HostStatus.OK, f"{job.srun_job_id}\n".encode())]


def test_a_het_job_component_is_captured_in_its_own_group(slurm_cluster, job_factory, tmp_path):
    batch = tmp_path / "het.sh"
    batch.write_text("#!/bin/sh\n#SBATCH -N1\n#SBATCH hetjob\n#SBATCH -N1\nsleep 300\n")
    het = job_factory(str(batch), running=False)
    slurm_cluster.wait_state(f"{het}+1", {"RUNNING"})
    with pytest.raises(TargetError, match=rf"job {het} is a heterogeneous job with 2 components"):
        resolve_job(het)
    job = resolve_job(f"{het}+1")
    assert (job.srun_job_id, job.het_group) == (het, 1) and len(job.nodes) == 1
    runs = SlurmTransport(job).run(job.nodes, 'echo "$SLURMD_NODENAME"', timeout_s=30)
    assert [(r.status, r.stdout) for r in runs] == [(HostStatus.OK, f"{job.nodes[0]}\n".encode())]


def test_collect_through_the_pipeline_captures_exactly_the_jobs_nodes(slurm_cluster, job_factory, tmp_path,
                                                                      monkeypatch):
    from fabricase import transports
    from fabricase.pipeline import CollectOptions, collect
    from fabricase.targets import Targets

    job_id = job_factory("-N2", "--wrap", "sleep 300")
    job = resolve_job(job_id)
    if transports.TRANSPORTS.get("slurm") is None:  # until --job -> resolve_job -> SlurmTransport is wired
        hook = types.ModuleType("fc_slurm_test_wiring")

        class JobTransport(SlurmTransport):
            @classmethod
            def from_options(cls, **options):
                return SlurmTransport.from_options(**{**options, "job": job})

        hook.JobTransport = JobTransport
        monkeypatch.setitem(sys.modules, hook.__name__, hook)
        monkeypatch.setitem(transports.TRANSPORTS, "slurm", f"{hook.__name__}:JobTransport")
    monkeypatch.chdir(tmp_path)  # the srun work folder goes here (shared with the nodes: same machine)
    t0 = time.monotonic()
    capture = collect(Targets(hosts=tuple(job.nodes), job=job_id), CollectOptions(via="slurm", interval_s=0),
                      tmp_path / "cap")
    print(f"\ncollect --job {job_id} --via slurm ({len(job.nodes)} nodes): {time.monotonic() - t0:.2f}s")
    assert [h.host for h in capture.hosts] == job.nodes
    for hc in capture.hosts:
        assert hc.status == HostStatus.OK, (hc.host, hc.reason)
        assert hc.transport == "slurm" and len(hc.items) > 50
        assert any(i.source == "/proc/net/dev" for i in hc.items)
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert meta["targets"]["job"] == job_id and meta["targets"]["via"] == "slurm"
    assert meta["hosts"] == job.nodes
    assert not list(tmp_path.glob(".fabricase-slurm-*"))  # the work folder is removed


def test_the_real_capture_script_comes_back_as_a_complete_stream(slurm_cluster, job_factory):
    from fabricase.collectors import select_collectors
    from fabricase.collectors.plan import CapturePlan, compile_script

    job = resolve_job(job_factory("-N2", "--wrap", "sleep 300"))
    script = compile_script(CapturePlan(collectors=tuple(select_collectors([])), interval_s=0))
    for run in SlurmTransport(job).run(job.nodes, script, timeout_s=60):
        stream = parse_stream(run.stdout)
        assert run.status == HostStatus.OK and stream.complete and stream.error is None, (run.host, run.reason)
        assert len(stream.items) > 50


def test_an_ended_job_resolves_with_its_state_and_the_transport_refuses(slurm_cluster, job_factory):
    job_id = job_factory("-N2", "--wrap", "sleep 300")
    nodes = resolve_job(job_id).nodes
    slurm_cluster.run("scancel", job_id)
    slurm_cluster.wait_state(job_id, {"CANCELLED"})
    job = resolve_job(job_id)
    assert job.state == "CANCELLED" and job.ended and not job.running
    assert job.nodes == nodes and job.end_time  # still known: capture them over ssh
    with pytest.raises(TransportError) as err:
        SlurmTransport(job).run(job.nodes, "echo hi", timeout_s=10)
    assert err.value.message == f"job {job_id} has ended (CANCELLED); capture its nodes with --via ssh"


def test_a_pending_job_has_no_nodes_yet(slurm_cluster, job_factory):
    job_factory("-N4", "--exclusive", "--wrap", "sleep 300")
    pending = job_factory("-N4", "--exclusive", "--wrap", "sleep 300", running=False)
    slurm_cluster.wait_state(pending, {"PENDING"})
    with pytest.raises(TargetError) as err:
        resolve_job(pending)
    assert err.value.message.startswith(f"job {pending} is PENDING: no nodes allocated yet")


def test_an_unknown_job_id(slurm_cluster):
    with pytest.raises(TargetError) as err:
        resolve_job("999999")
    assert err.value.message == "job 999999 does not exist (scontrol: Invalid job id specified)"


def test_fabricase_collect_job_via_slurm_on_the_command_line(slurm_cluster, job_factory, tmp_path):
    import os
    import subprocess

    job_id = job_factory("-N2", "--wrap", "sleep 300")
    nodes = resolve_job(job_id).nodes
    proc = subprocess.run([sys.executable, "-m", "fabricase", "collect", "--job", job_id, "--via", "slurm",
                           "--interval", "0", "-o", str(tmp_path / "cap"), "--json"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, env={**os.environ, "FABRICASE_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [h["host"] for h in out["hosts"]] == nodes and {h["status"] for h in out["hosts"]} == {"ok"}
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert meta["targets"]["job"] == job_id and meta["hosts"] == nodes
