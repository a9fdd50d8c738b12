"""`fabricase probe --job ID` on the real Slurm cluster (conftest.py): the capture and every test go through
`srun --jobid --overlap` on the job's own nodes; ib_write_bw pairs and the all_reduce_perf bisection run the
stand-ins (tests/probe/standins: no RDMA or GPU here; every slurmd is on this machine, so the pairs meet over
loopback). What is checked is the Slurm path: the job's nodes only, srun steps, the items stored, nothing left
running, and the refusal of a node that runs someone else's job.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from fabricase.cli import cli
from fabricase.probe.model import ProbeDoc

STANDINS = Path(__file__).parents[1] / "probe" / "standins"


def _args(job_id: str, out: Path, *extra: str) -> list[str]:
    return ["probe", "--job", job_id, "--interval", "0", "--collector", "identity", "--tools-path", str(STANDINS),
            "--rdma-device", "standin0", "--duration", "1", "--nccl-sizes", "64K:256K", "--nccl-iters", "2",
            "--test-timeout", "60", "-o", str(out), "--json", *extra]


def _tagged(tag: str) -> list[int]:
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"FABRICASE_PROBE={tag}".encode() in env.read_bytes().split(b"\0"):
                found.append(int(env.parent.name))
        except OSError:
            continue
    return found


def test_probe_runs_inside_our_job_through_srun(slurm_cluster, job_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    job_id = job_factory("-N3", "-c1", "-w", "gpu[001-003]", "--wrap", "sleep 300")
    # Every "node" of this cluster is this machine, and its pairs share loopback and 2 cores with slurmd: held
    # against each other, one direction at under half the others' median is scheduling noise (it made a
    # probe-slow-path once in CI). Held against a stated rate far below loopback's, a healthy run has no slow pair,
    # and what this test checks is the srun path.
    result = CliRunner().invoke(cli, _args(job_id, tmp_path / "cap", "--test", "rdma", "--test", "nccl", "--bisect",
                                           "--expect-gbps", "1"), catch_exceptions=False)
    assert result.exit_code == 0, result.output[-3000:]
    doc = json.loads(result.output)
    probe = ProbeDoc.from_dict(doc["probe"])
    assert probe.transport == "slurm" and probe.hosts == ["gpu001", "gpu002", "gpu003"]
    kinds = {r.test.kind for r in probe.results}
    assert kinds == {"ib_write_bw", "all_reduce_perf"}
    assert all(r.status == "ok" for r in probe.results), [(r.test.id, r.status, r.error) for r in probe.results]
    pairs = [r for r in probe.results if r.test.kind == "ib_write_bw"]
    assert len(pairs) == 6  # a ring of 3: three edges, both directions
    assert all(r.test.argv[-1] == "localhost" for r in pairs)  # the server's NodeAddr
    first = next(r for r in probe.results if r.test.stage == "collective")
    assert first.test.hosts == ("gpu001", "gpu002", "gpu003")
    assert not [f for f in doc["findings"] if f["kind"].startswith("probe-slow")]
    assert not _tagged(probe.options["tag"])
    assert slurm_cluster.state(job_id) == "RUNNING"  # the probe's steps ended; the job runs on


def test_a_node_with_another_users_job_is_refused_before_anything_runs(slurm_cluster, job_factory, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    theirs = slurm_cluster.run("runuser", "-u", "nobody", "--", "sbatch", "--parsable", "--chdir=/tmp", "-o",
                               "/dev/null", "-N1", "-c1", "-w", "gpu004", "--wrap", "sleep 300").stdout.strip()
    try:
        slurm_cluster.wait_state(theirs, {"RUNNING"})
        ours = job_factory("-N2", "-c1", "-w", "gpu[003-004]", "--wrap", "sleep 300")
        result = CliRunner().invoke(cli, _args(ours, tmp_path / "cap", "--test", "rdma"))
        assert result.exit_code == 1
        assert f"gpu004 runs job {theirs} of user nobody" in result.output
        assert "Traceback" not in result.output
        assert not (tmp_path / "cap" / "probe.json").exists()
    finally:
        slurm_cluster.run("scancel", theirs, check=False)
