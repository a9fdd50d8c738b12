"""Perf command builders (table-tested) and the local runner (real processes)."""

import pytest

from fabricase.perf.runners import (
    PerfRun,
    ib_write_bw_command,
    iperf3_command,
    nccl_tests_command,
    perftest_pairs,
    run_local,
    run_server_client,
)


@pytest.mark.parametrize(
    ("hosts", "pairs"),
    [
        ([], []),
        (["a"], []),
        (["a", "b"], [("a", "b")]),
        (["a", "b", "c"], [("a", "b"), ("c", "a")]),
        (["a", "b", "c", "d"], [("a", "b"), ("c", "d")]),
        (["a", "b", "c", "d", "e"], [("a", "b"), ("c", "d"), ("e", "a")]),
        (["a", "b", "a", "", "c"], [("a", "b"), ("c", "a")]),  # duplicates and blanks dropped
    ],
)
def test_perftest_pairs(hosts, pairs):
    assert perftest_pairs(hosts) == pairs


def test_every_host_is_tested():
    hosts = [f"gpu{i:03d}" for i in range(1, 12)]
    assert {h for pair in perftest_pairs(hosts) for h in pair} == set(hosts)


@pytest.mark.parametrize(
    ("kwargs", "argv"),
    [
        ({"device": "mlx5_0", "port": 1},
         ["ib_write_bw", "-d", "mlx5_0", "-i", "1", "-s", "8388608", "-D", "10", "-F", "--report_gbits"]),
        ({"device": "mlx5_3", "port": 1, "server": "gpu002", "size": 65536, "duration": 5, "qps": 4, "gid_index": 3,
          "tcp_port": 18515, "extra": ["--use_cuda=3"]},
         ["ib_write_bw", "-d", "mlx5_3", "-i", "1", "-s", "65536", "-D", "5", "-F", "-q", "4", "-x", "3", "-p",
          "18515", "--report_gbits", "--use_cuda=3", "gpu002"]),
        ({"device": "rdmap0s6", "port": 1, "server": "10.0.0.2", "report_gbits": False, "binary": "ib_read_bw"},
         ["ib_read_bw", "-d", "rdmap0s6", "-i", "1", "-s", "8388608", "-D", "10", "-F", "10.0.0.2"]),
    ],
)  # fmt: skip
def test_ib_write_bw_command(kwargs, argv):
    assert ib_write_bw_command(**kwargs) == argv


@pytest.mark.parametrize(
    "kwargs",
    [{"device": "mlx5_0; rm -rf /", "port": 1}, {"device": "mlx5_0", "port": 0}, {"device": "mlx5_0", "port": True},
     {"device": "mlx5_0", "port": 1, "server": "a b"}, {"device": "mlx5_0", "port": 1, "binary": "sh"},
     {"device": "mlx5_0", "port": 1, "size": -1}, {"device": "mlx5_0", "port": 1, "gid_index": -1}],
)  # fmt: skip
def test_ib_write_bw_command_rejects_bad_input(kwargs):
    with pytest.raises(ValueError):
        ib_write_bw_command(**kwargs)


TEST_ARGS = ["-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-n", "20", "-w", "5", "-c", "1"]


@pytest.mark.parametrize(
    ("kwargs", "argv"),
    [
        ({"hosts": ["gpu001", "gpu002"], "gpus_per_host": 8},
         ["srun", "--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8", "--nodelist=gpu001,gpu002",
          "all_reduce_perf", *TEST_ARGS]),
        ({"hosts": ["gpu001", "gpu002"], "gpus_per_host": 8, "env": {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5"}},
         ["srun", "--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8", "--nodelist=gpu001,gpu002",
          "--export=ALL,NCCL_DEBUG=INFO,NCCL_IB_HCA=mlx5", "all_reduce_perf", *TEST_ARGS]),
        ({"hosts": ["gpu001", "gpu002"], "gpus_per_host": 4, "launcher": "mpirun", "binary": "all_gather_perf",
          "min_bytes": "1M", "max_bytes": "16G", "env": {"NCCL_DEBUG": "INFO"}},
         ["mpirun", "-np", "8", "-H", "gpu001:4,gpu002:4", "--bind-to", "none", "-x", "PATH", "-x",
          "LD_LIBRARY_PATH", "-x", "NCCL_DEBUG=INFO", "all_gather_perf", "-b", "1M", "-e", "16G", "-f", "2", "-g", "1",
          "-n", "20", "-w", "5", "-c", "1"]),
        ({"hosts": ["gpu001"], "gpus_per_host": 8, "binary": "/opt/nccl-tests/build/all_reduce_perf", "iters": 50,
          "extra": ["-G", "1"]},
         ["srun", "--nodes=1", "--ntasks-per-node=8", "--gpus-per-node=8", "--nodelist=gpu001",
          "/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-n", "50", "-w", "5",
          "-c", "1", "-G", "1"]),
    ],
)  # fmt: skip
def test_nccl_tests_command(kwargs, argv):
    assert nccl_tests_command(**kwargs) == argv


@pytest.mark.parametrize(
    "kwargs",
    [{"hosts": [], "gpus_per_host": 8}, {"hosts": ["a"], "gpus_per_host": 0},
     {"hosts": ["a"], "gpus_per_host": 8, "launcher": "pdsh"}, {"hosts": ["a"], "gpus_per_host": 8, "max_bytes": "8X"},
     {"hosts": ["a;b"], "gpus_per_host": 8}, {"hosts": ["a"], "gpus_per_host": 8, "binary": "rm"},
     {"hosts": ["a"], "gpus_per_host": 8, "env": {"BAD KEY": "1"}}],
)  # fmt: skip
def test_nccl_tests_command_rejects_bad_input(kwargs):
    with pytest.raises(ValueError) as exc:
        nccl_tests_command(**kwargs)
    if kwargs.get("launcher") == "pdsh":
        assert "srun, mpirun" in str(exc.value)


@pytest.mark.parametrize(
    ("args", "kwargs", "argv"),
    [
        ((None,), {}, ["iperf3", "-s", "-1", "-J"]),
        ((None,), {"port": 5299, "json": False}, ["iperf3", "-s", "-1", "-p", "5299"]),
        (("gpu002",), {}, ["iperf3", "-c", "gpu002", "-t", "10", "-P", "1", "-J"]),
        (("10.0.0.2", 30), {"parallel": 8, "reverse": True, "bind": "10.0.0.1", "port": 5201},
         ["iperf3", "-c", "10.0.0.2", "-t", "30", "-P", "8", "-R", "-B", "10.0.0.1", "-p", "5201", "-J"]),
    ],
)  # fmt: skip
def test_iperf3_command(args, kwargs, argv):
    assert iperf3_command(*args, **kwargs) == argv


def test_run_local_missing_binary_does_not_raise():
    run = run_local(["fabricase-no-such-perf-binary", "-d", "mlx5_0"], timeout_s=5)
    assert run == PerfRun(("fabricase-no-such-perf-binary", "-d", "mlx5_0"), None, "", "", 0.0,
                          "fabricase-no-such-perf-binary: not installed (not found on PATH)")  # fmt: skip
    assert not run.ok
    assert run_local([], timeout_s=5).error == "empty command"


def test_run_local_echo():
    run = run_local(["sh", "-c", "echo hi; echo oops >&2; exit 3"], timeout_s=10)
    assert (run.rc, run.stdout, run.stderr, run.error, run.ok) == (3, "hi\n", "oops\n", None, False)
    assert run.duration_s >= 0
    ok = run_local(["sh", "-c", "echo hi"], timeout_s=10)
    assert ok.ok and ok.stdout == "hi\n" and ok.argv == ("sh", "-c", "echo hi")


def test_run_local_timeout_keeps_partial_output():
    run = run_local(["sh", "-c", "echo started; exec sleep 5"], timeout_s=0.5)
    assert run.rc is None and run.error == "sh: timed out after 0.5 s" and run.stdout == "started\n"


def test_run_server_client_with_a_missing_side():
    server, client = run_server_client(["sh", "-c", "sleep 1"], ["fabricase-no-such-client"], timeout_s=5)
    assert client.error == "fabricase-no-such-client: not installed (not found on PATH)"
    assert server.error == "not run: the other side of the test is missing" and server.rc is None


def test_run_server_client_stops_a_lingering_server():
    server, client = run_server_client(["sh", "-c", "echo up; exec sleep 30"], ["sh", "-c", "echo done"],
                                       timeout_s=1, start_delay_s=0.2)  # fmt: skip
    assert client.ok and client.stdout == "done\n"
    assert server.rc is None and server.stdout == "up\n" and "still running" in server.error
