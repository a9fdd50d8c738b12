"""The test stand-ins for ib_*_bw, all_reduce_perf and mpirun (tests/probe/standins/): they really move data over
loopback, print the real tools' formats, and fabricase's real parsers read what they print.

Loopback only: every socket is on 127.0.0.1, every "host" a name given to a local process.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fabricase.parsers.nccl_log import parse_nccl_log
from fabricase.parsers.nccl_tests import parse_nccl_tests
from fabricase.parsers.perftest import parse_perftest
from fabricase.perf.runners import ib_write_bw_command, run_server_client
from fabricase.probe.exec import TAG_VAR, SshExec, sweep_script
from loopback import free_port

STANDINS = Path(__file__).parent / "standins"
SIZES = [65536, 131072, 262144, 524288, 1048576]
TEST_ARGV = ["all_reduce_perf", "-b", "64K", "-e", "1M", "-f", "2", "-g", "1", "-n", "2", "-w", "1", "-c", "1"]
TITLES = {"ib_write_bw": "RDMA_Write BW Test", "ib_read_bw": "RDMA_Read BW Test", "ib_send_bw": "Send BW Test"}
# Stands in for ssh: drops ssh's options and the host, and runs the rest here as the remote shell would. A host
# named in FC_TEST_CORRUPT / FC_TEST_DIE gets the stand-in's hook; FC_TEST_DOWN is a host it cannot reach.
AGENT = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -o|-l|-p) shift 2;; -*) shift;; *) break;; esac; done
host=$1; shift
[ "$host" = "$FC_TEST_DOWN" ] && { echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255; }
[ "$host" = "$FC_TEST_CORRUPT" ] && export FC_STANDIN_CORRUPT=1
[ "$host" = "$FC_TEST_DIE" ] && export FC_STANDIN_DIE=1
SSH_CONNECTION="127.0.0.1 1 127.0.0.1 22" exec sh -c "$*"
"""


class LoopbackSsh(SshExec):
    """The probe's own SshExec (its mpirun command line, tag, limit and PATH), with the first hop run here."""

    def argv(self, host: str, script: str) -> list[str]:
        return ["sh", "-c", script]


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent"
    path.write_text(AGENT)
    path.chmod(0o755)
    return path


def collective(agent: Path, hosts: list[str], env: dict[str, str] | None = None, **hooks: str):
    """all_reduce_perf across `hosts` through the mpirun stand-in, launched exactly as the probe launches it."""
    old = {k: os.environ.get(k) for k in hooks}
    os.environ.update(hooks)
    try:
        running = LoopbackSsh(ssh=str(agent), tools_path=str(STANDINS)).collective(
            hosts, TEST_ARGV, tag="standin-test", limit_s=120, env=env)
        return running.wait()
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---- ib_write_bw / ib_read_bw / ib_send_bw


@pytest.mark.parametrize("tool", sorted(TITLES))
def test_pair_moves_data_and_prints_perftest(tool: str) -> None:
    port = free_port()
    binary = str(STANDINS / tool)
    server = [binary, *ib_write_bw_command("mlx5_0", 1, size=1 << 20, duration=1, binary=tool, tcp_port=port)[1:]]
    client = [binary, *ib_write_bw_command("mlx5_0", 1, server="127.0.0.1", size=1 << 20, duration=1, binary=tool,
                                           tcp_port=port)[1:]]
    served, ran = run_server_client(server, client, timeout_s=40, start_delay_s=0.3)
    assert (served.rc, ran.rc) == (0, 0), (served.stderr, ran.stderr)
    assert "Waiting for client to connect" in served.stdout
    results = [parse_perftest(served.stdout), parse_perftest(ran.stdout)]
    for result in results:
        assert result.ok and result.errors == [], result.errors
        assert (result.test, result.device, result.link_type, result.qps, result.bw_unit) == (
            TITLES[tool], "mlx5_0", "Ethernet", 1, "Gb/sec")
        assert [row.bytes for row in result.rows] == [1 << 20]
    server_row, client_row = (r.largest() for r in results)
    assert client_row.bw_avg_gbps > 0
    assert abs(server_row.bw_avg_gbps - client_row.bw_avg_gbps) <= 0.1 * client_row.bw_avg_gbps
    moved = client_row.iterations * client_row.bytes
    assert moved >= 16 << 20  # a second over loopback moves far more than 16 MiB
    # The figure is the measured one: the bytes it counts over about the one second it ran.
    assert 0.5 <= (moved * 8 / 1e9) / client_row.bw_avg_gbps <= 1.5


def test_client_to_a_closed_port_fails_like_perftest() -> None:
    port = free_port()
    done = subprocess.run([str(STANDINS / "ib_write_bw"), "-d", "mlx5_0", "-D", "1", "-p", str(port), "127.0.0.1"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert f" Couldn't connect to 127.0.0.1:{port}" in done.stderr
    assert parse_perftest(done.stderr).errors == [f"Couldn't connect to 127.0.0.1:{port}"]


# ---- all_reduce_perf under mpirun


@pytest.mark.parametrize("n", [3, 4])
def test_all_reduce_across_ranks_via_the_probes_mpirun_line(agent: Path, n: int) -> None:
    hosts = [f"gpu-{chr(ord('a') + i)}" for i in range(n)]
    out = collective(agent, hosts)
    assert out.status == "ok", out.stderr.decode()
    result = parse_nccl_tests(out.stdout.decode())
    assert result.errors == []
    assert (result.collective, result.min_bytes, result.max_bytes, result.iters, result.warmup_iters) == (
        "all_reduce", 65536, 1048576, 2, 1)
    assert [(r.rank, r.host) for r in result.ranks] == list(enumerate(hosts))
    assert [row.size for row in result.rows] == SIZES
    assert [row.count for row in result.rows] == [s // 8 for s in SIZES]
    assert result.wrong_column == "#wrong" and result.wrong_total == 0
    assert result.largest().busbw > 0 and result.avg_busbw > 0
    # busbw = algbw * 2(n-1)/n, as nccl-tests defines it
    half = result.largest().out_of_place
    assert half.busbw == pytest.approx(half.algbw * 2 * (n - 1) / n, rel=0.05, abs=1e-4)


def test_a_corrupt_contribution_counts_wrong_elements(agent: Path) -> None:
    hosts = ["gpu-a", "gpu-b", "gpu-c"]
    out = collective(agent, hosts, FC_TEST_CORRUPT="gpu-b")
    assert out.status == "ok", out.stderr.decode()
    result = parse_nccl_tests(out.stdout.decode())
    # one element in 64 is off on one rank; every rank's result then holds those, and #wrong sums the ranks
    want = [3 * math.ceil(size // 8 / 64) for size in SIZES]
    assert [row.out_of_place.wrong for row in result.rows] == want
    assert [row.in_place.wrong for row in result.rows] == want


def test_nccl_debug_info_lines_parse_as_an_nccl_log(agent: Path) -> None:
    hosts = ["gpu-a", "gpu-b", "gpu-c"]
    out = collective(agent, hosts, env={"NCCL_DEBUG": "INFO"})
    assert out.status == "ok", out.stderr.decode()
    log = parse_nccl_log(out.stdout.decode())
    assert log.errors == [] and log.events == []
    assert {r: (log.ranks[r].host, log.ranks[r].nranks) for r in log.ranks} == {
        0: ("gpu-a", 3), 1: ("gpu-b", 3), 2: ("gpu-c", 3)}
    assert log.transport == "Socket"
    assert log.oob == {"gpu-a": "127.0.0.1", "gpu-b": "127.0.0.1", "gpu-c": "127.0.0.1"}
    result = parse_nccl_tests(out.stdout.decode())
    assert [row.size for row in result.rows] == SIZES and result.wrong_total == 0
    assert result.errors == []  # NCCL_DEBUG=INFO lines between the rows are not rows


def test_nccl_tests_parser_ignores_nccl_info_lines(agent: Path) -> None:
    out = collective(agent, ["gpu-a", "gpu-b", "gpu-c"], env={"NCCL_DEBUG": "INFO"})
    assert parse_nccl_tests(out.stdout.decode()).errors == []


def test_a_rank_that_dies_fails_the_job_with_a_warn_naming_it(agent: Path) -> None:
    hosts = ["gpu-a", "gpu-b", "gpu-c"]
    out = collective(agent, hosts, env={"NCCL_DEBUG": "WARN"}, FC_TEST_DIE="gpu-b")
    assert out.status == "failed" and out.rc != 0
    stdout, stderr = out.stdout.decode(), out.stderr.decode()
    log = parse_nccl_log(stdout)
    closed = [e for e in log.events if "Connection closed by remote peer gpu-b<" in e.text]
    assert [(e.kind, e.host) for e in closed] == [("warn", "gpu-c")]  # gpu-c receives from gpu-b
    assert "gpu-c: Test NCCL failure" in stdout
    assert any("Test NCCL failure" in e for e in parse_nccl_tests(stdout).errors)
    assert "mpirun detected that one or more processes exited with non-zero status" in stderr
    assert "Hostname:     gpu-b" in stderr


def test_a_rank_that_cannot_start_fails_the_job(agent: Path) -> None:
    out = collective(agent, ["gpu-a", "gpu-b", "gpu-c"], FC_TEST_DOWN="gpu-c")
    assert out.status == "failed" and out.rc != 0
    stderr = out.stderr.decode()
    assert "ssh: connect to host gpu-c port 22: Connection refused" in stderr
    assert "ORTE was unable to reliably start one or more daemons" in stderr and "(gpu-c)" in stderr


def test_mpirun_refuses_more_ranks_than_slots(agent: Path) -> None:
    done = subprocess.run([str(STANDINS / "mpirun"), "-np", "3", "-H", "a:1,b:1", "--mca", "plm_rsh_agent",
                           str(agent), "all_reduce_perf"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "not enough slots" in done.stderr


# ---- all_reduce_perf under srun (rendezvous directory)


@pytest.mark.parametrize("corrupt", [False, True])
def test_all_reduce_with_the_srun_wireup(tmp_path: Path, corrupt: bool) -> None:
    rdv = tmp_path / "rdv"
    procs = []
    for rank in range(3):
        env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "3", "FC_STANDIN_RDV": str(rdv),
               "SLURMD_NODENAME": f"node{rank}", "NCCL_DEBUG": "INFO"}
        for key in ("OMPI_COMM_WORLD_RANK", "FC_STANDIN_HOST", "SSH_CONNECTION", "FC_STANDIN_CORRUPT"):
            env.pop(key, None)
        if corrupt and rank == 2:
            env["FC_STANDIN_CORRUPT"] = "1"
        procs.append(subprocess.Popen([sys.executable, str(STANDINS / "all_reduce_perf"), *TEST_ARGV[1:]], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL))
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e.decode() for _, e in outputs]
    rank0 = outputs[0][0].decode()
    result = parse_nccl_tests(rank0)
    assert [(r.rank, r.host) for r in result.ranks] == [(0, "node0"), (1, "node1"), (2, "node2")]
    assert [row.size for row in result.rows] == SIZES and result.largest().busbw > 0
    assert result.wrong_total == (2 * sum(3 * math.ceil(s // 8 / 64) for s in SIZES) if corrupt else 0)
    assert "# Avg bus bandwidth" not in outputs[1][0].decode()  # only rank 0 prints the table
    log = parse_nccl_log("".join(o.decode() for o, _ in outputs))
    assert sorted((r, v.host) for r, v in log.ranks.items()) == [(0, "node0"), (1, "node1"), (2, "node2")]
    assert list(rdv.iterdir()) == []  # each rank took its address back


def test_a_stopped_mpirun_takes_its_ranks_down(agent: Path) -> None:
    """timeout(1) stops mpirun with SIGTERM: its ranks (in sessions of their own) must not outlive it."""
    tag = f"standin-stop-{os.getpid()}"
    env = {**os.environ, TAG_VAR: tag}
    proc = subprocess.Popen([str(STANDINS / "mpirun"), "-np", "3", "-H", "a:1,b:1,c:1", "--mca", "plm_rsh_agent",
                             str(agent), "-x", TAG_VAR, str(STANDINS / "all_reduce_perf"), "-b", "16M", "-e", "16M",
                             "-n", "50", "-w", "1", "-g", "1"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        for line in proc.stdout:  # the header: every rank is up and wired
            if line.startswith(b"# Using devices"):
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        left = subprocess.run(["sh", "-c", sweep_script(tag)], capture_output=True, text=True, timeout=30).stdout
    assert left.strip() == ""
