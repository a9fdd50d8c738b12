"""Slurm job resolution and the srun step, the pure parts: real `scontrol` output captured on the test cluster
(tests/slurm/fixtures, see SOURCE.txt there), errors, the srun command line, per-node reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricase.errors import TargetError, TransportError
from fabricase.models import HostStatus
from fabricase.slurm import (
    SlurmJob,
    expand_nodelist,
    job_from_records,
    parse_hostnames,
    parse_scontrol_records,
    resolve_job,
    scontrol_error,
    slurm_env,
    validate_job_id,
)
from fabricase.transports.slurm import SlurmTransport, srun_argv, srun_reason, step_minutes, unfinished_node

FIX = Path(__file__).parents[1] / "slurm" / "fixtures"


def _job(name: str, job_id: str = "X") -> SlurmJob:
    return job_from_records(job_id, parse_scontrol_records((FIX / name).read_text()))


# fixture -> (state, nodes, nodelist, partition, name, user, start, end, srun job id, het group)
JOBS = {
    "job-running-2nodes.txt": ("RUNNING", ["gpu001", "gpu002"], "gpu[001-002]", "gpu", "nccl allreduce=8", "root",
                               "2026-11-30T00:13:10", None, "8", None),
    "job-cancelled-running.txt": ("CANCELLED", ["gpu001", "gpu002"], "gpu[001-002]", "gpu", "nccl allreduce=8",
                                  "root", "2026-11-30T00:13:10", "2026-11-30T00:13:19", "8", None),
    "job-completed.txt": ("COMPLETED", ["gpu001"], "gpu001", "gpu", "wrap", "root", "2026-11-30T00:13:13",
                          "2026-11-30T00:13:13", "10", None),
    "job-failed.txt": ("FAILED", ["gpu001"], "gpu001", "gpu", "wrap", "root", "2026-11-30T00:13:16",
                       "2026-11-30T00:13:16", "11", None),
    "job-array-task.txt": ("RUNNING", ["gpu001"], "gpu001", "gpu", "wrap", "root", "2026-11-30T00:13:20", None,
                           "13", None),
    "job-het-component.txt": ("RUNNING", ["gpu002"], "gpu002", "gpu", "het.sh", "root", "2026-11-30T00:14:16",
                              None, "22", 1),
}


@pytest.mark.parametrize("fixture", sorted(JOBS))
def test_jobs_from_real_scontrol_output(fixture):
    job = _job(fixture)
    got = (job.state, job.nodes, job.nodelist, job.partition, job.name, job.user, job.start_time, job.end_time,
           job.srun_job_id, job.het_group)
    assert got == JOBS[fixture]
    assert job.running == (job.state == "RUNNING")
    assert job.ended == (job.state in {"CANCELLED", "COMPLETED", "FAILED"})


@pytest.mark.parametrize(("fixture", "message"), [
    ("job-pending.txt", "job 9 is PENDING: no nodes allocated yet (reason: Resources)"),
    ("job-cancelled-pending.txt", "job 9 ended (CANCELLED) before any node was allocated"),
    ("job-array-all.txt", "job 12 is an array job with 2 tasks (12_1, 12_2); give one task, e.g. --job 12_1"),
    ("job-het-all.txt", "job 22 is a heterogeneous job with 2 components (22+0, 22+1); give one component, "
                        "e.g. --job 22+0"),
])
def test_jobs_that_cannot_be_captured_say_why(fixture, message):
    job_id = message.split()[1]
    with pytest.raises(TargetError) as err:
        _job(fixture, job_id)
    assert err.value.message == message and err.value.where == "--job"


def test_a_record_keeps_values_with_spaces_and_equals_signs():
    (r,) = parse_scontrol_records("JobId=5 JobName=NCCL Run Partition=evil UserId=bob(1) JobState=RUNNING "
                                  "Partition=gpu NodeList=n[1-2] WorkDir=/home/a b/c Power=\n")
    assert r["JobName"] == "NCCL Run Partition=evil" and r["Partition"] == "gpu"
    assert r["WorkDir"] == "/home/a b/c" and r["Power"] == "" and r["UserId"] == "bob(1)"
    assert job_from_records("5", [r]).user == "bob"
    assert parse_scontrol_records("\n\n") == []


@pytest.mark.parametrize(("stem", "job_id", "message"), [
    ("job-unknown", "999", "job 999 does not exist (scontrol: Invalid job id specified)"),
    ("job-malformed", "abc", "job abc does not exist (scontrol: Invalid job id specified)"),
    ("job-ctld-down", "1", "cannot read job 1 from Slurm (scontrol: Unable to contact slurm controller "
                           "(connect failure))"),
])
def test_scontrol_errors(stem, job_id, message):
    rc = int((FIX / f"{stem}.rc").read_text())
    assert rc == 1
    assert scontrol_error(job_id, rc, (FIX / f"{stem}.stderr").read_text()) == message


def test_scontrol_error_without_stderr():
    assert scontrol_error("7", 2, "") == "cannot read job 7 from Slurm (scontrol: exit status 2)"


@pytest.mark.parametrize("text", ["48213", "48213_7", "48213+1", " 12 "])
def test_valid_job_ids(text):
    assert validate_job_id(text) == text.strip()


@pytest.mark.parametrize("text", ["", "abc", "12_", "1,2", "-1", "12;rm -rf /", "12 13", "0x10"])
def test_malformed_job_ids(text):
    with pytest.raises(TargetError, match="malformed job id"):
        validate_job_id(text)


def test_node_lists_expand_like_scontrol_show_hostnames():
    assert expand_nodelist("gpu[001-003,010],login1") == parse_hostnames((FIX / "hostnames.txt").read_text())
    assert expand_nodelist("gpu[003-001]") == []  # unreadable: resolve_job then asks scontrol


def _fake_scontrol(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "scontrol"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return str(exe)


def test_resolve_job_runs_scontrol_and_reads_its_answer(tmp_path):
    scontrol = _fake_scontrol(tmp_path, f'[ "$*" = "show job -o 8" ] || exit 9\ncat {FIX}/job-running-2nodes.txt\n')
    job = resolve_job("8", scontrol=scontrol)
    assert job.job_id == "8" and job.nodes == ["gpu001", "gpu002"] and job.state == "RUNNING"


def test_resolve_job_turns_scontrol_failure_into_one_line(tmp_path):
    scontrol = _fake_scontrol(tmp_path, f"cat {FIX}/job-unknown.stderr >&2; exit 1\n")
    with pytest.raises(TargetError) as err:
        resolve_job("999", scontrol=scontrol)
    assert str(err.value) == "--job: job 999 does not exist (scontrol: Invalid job id specified)"


def test_resolve_job_without_slurm_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no scontrol, no srun
    with pytest.raises(TargetError) as err:
        resolve_job("48213")
    assert err.value.message == "Slurm is not installed here (no scontrol on PATH)"
    with pytest.raises(TransportError) as err:
        SlurmTransport(_job("job-running-2nodes.txt", "8")).run(["gpu001"], "true", timeout_s=5)
    assert err.value.message == "Slurm is not installed here (no srun on PATH)"


def test_the_transport_refuses_a_job_that_is_not_running():
    with pytest.raises(TransportError) as err:
        SlurmTransport(_job("job-completed.txt", "10")).run(["gpu001"], "true", timeout_s=5)
    assert err.value.message == "job 10 has ended (COMPLETED); capture its nodes with --via ssh"
    suspended = SlurmJob("5", "x", "SUSPENDED", "gpu", ["n1"], "n1", "bob", srun_job_id="5")
    with pytest.raises(TransportError, match="job 5 is SUSPENDED, not RUNNING"):
        SlurmTransport(suspended).run(["n1"], "true", timeout_s=5)


def test_from_options_needs_a_job():
    with pytest.raises(TransportError, match="--via slurm needs --job ID"):
        SlurmTransport.from_options(fanout=64, deadline_s=None, ssh_options=(), user=None)
    job = _job("job-running-2nodes.txt", "8")
    t = SlurmTransport.from_options(job=job, fanout=8, deadline_s=30.0, ssh_options=(), user=None)
    assert t.job is job and t.deadline_s == 30.0


def test_srun_command_line():
    job = _job("job-running-2nodes.txt", "8")
    argv = srun_argv(job, ["gpu002", "gpu001"], Path("/home/u/.fabricase-slurm-x"), 90, srun="/usr/bin/srun")
    assert argv[:13] == ["/usr/bin/srun", "--jobid=8", "--overlap", "-N", "2", "--ntasks=2", "--ntasks-per-node=1",
                         "-w", "gpu[001-002]", "--kill-on-bad-exit=0", "--time=3", "--input=none",
                         "--job-name=fabricase-capture"]
    assert argv[13:15] == ["sh", "-c"] and argv[16:] == ["fabricase", "/home/u/.fabricase-slurm-x"]
    het = srun_argv(_job("job-het-component.txt", "22+1"), ["gpu002"], Path("/d"), 10)
    assert het[1:3] == ["--jobid=22", "--het-group=1"]


@pytest.mark.parametrize(("limit", "minutes"), [(0.5, 2), (1, 2), (60, 2), (61, 3), (600, 11)])
def test_step_time_limit_is_past_our_own(limit, minutes):
    assert step_minutes(limit) == minutes


SRUN_ERR = """srun: error: gpu002: task 1: Killed
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
fabricase: gpu003: cannot see /x/capture.sh (the folder must be on a file system shared with the nodes)
srun: error: Timed out waiting for job step to complete
"""


@pytest.mark.parametrize(("node", "err", "rc", "reason"), [
    ("gpu002", SRUN_ERR, 137, "srun: error: gpu002: task 1: Killed"),
    ("gpu003", SRUN_ERR, 1, "fabricase: gpu003: cannot see /x/capture.sh (the folder must be on a file system "
                            "shared with the nodes)"),
    ("gpu004", SRUN_ERR, 1, "srun: error: Timed out waiting for job step to complete"),
    ("gpu004", "srun: Job step aborted\n", 1, "srun: Job step aborted"),
    ("gpu004", "", 1, "srun exited 1"),
    ("gpu00", "srun: error: gpu001: task 0: Killed\nsrun: error: step ended\n", 1, "srun: error: step ended"),
])
def test_srun_reason_names_the_node_when_srun_does(node, err, rc, reason):
    assert srun_reason(node, err, rc) == reason


@pytest.mark.parametrize(("kw", "expected"), [
    (dict(wrote=True, timed_out=False, interrupted=True), (HostStatus.FAILED, "interrupted")),
    (dict(wrote=True, timed_out=True, interrupted=False),
     (HostStatus.TIMED_OUT, "capture did not finish within 5s on gpu002")),
    (dict(wrote=True, timed_out=False, interrupted=False),
     (HostStatus.PARTIAL, "capture on gpu002 stopped before it finished (srun: error: gpu002: task 1: Killed)")),
    (dict(wrote=False, timed_out=False, interrupted=False),
     (HostStatus.FAILED, "no output from gpu002 (srun: error: gpu002: task 1: Killed)")),
])
def test_a_node_that_never_reported_its_exit_status(kw, expected):
    assert unfinished_node("gpu002", limit_s=5, srun_rc=137, srun_err=SRUN_ERR, **kw) == expected


def test_slurm_env_drops_the_enclosing_jobs_variables():
    env = slurm_env({"PATH": "/bin", "SLURM_CONF": "/etc/slurm/x.conf", "SLURM_JOB_ID": "7", "SLURM_NTASKS": "64",
                     "SRUN_CPUS_PER_TASK": "8", "HOME": "/root"})
    assert env == {"PATH": "/bin", "SLURM_CONF": "/etc/slurm/x.conf", "HOME": "/root"}


def test_harvest_reports_10000_nodes_in_order_in_one_pass(tmp_path):
    """Issue 18: the nodes that reported are found in one pass over the listing and dropped in O(1) each (the
    list of pending nodes used to be scanned and shrunk once per report: O(n^2) at 10,000 nodes)."""
    nodes = [f"gpu{i:05d}" for i in range(10_000)]
    for i, node in enumerate(nodes):
        if i % 3 != 1:  # two thirds have reported; the others are still running
            (tmp_path / f"{node}.rc").write_text("0\n")
            (tmp_path / f"{node}.out").write_bytes(b"stream")
    job = SlurmJob("7", "train", "RUNNING", "gpu", nodes, "gpu[00000-09999]", "me", srun_job_id="7")
    seen = []
    pending = dict.fromkeys(nodes)
    SlurmTransport(job)._harvest(pending, tmp_path, "2026-12-01T00:00:00Z", seen.append)
    assert [r.host for r in seen] == [n for i, n in enumerate(nodes) if i % 3 != 1]
    assert all(r.status == HostStatus.OK and r.stdout == b"stream" for r in seen)
    assert list(pending) == [n for i, n in enumerate(nodes) if i % 3 == 1]
