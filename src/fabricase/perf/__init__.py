"""Performance tests: command lines for perftest, nccl-tests and iperf3, and a small local runner.

The builders are pure (argv lists; nothing is run). Outputs are stored as capture items `cmd:perf-<name>` and
read back by `fabricase.parsers.{perftest,nccl_tests,iperf3}` and `fabricase.analysis.perf`.
"""

from fabricase.perf.runners import (
    PerfRun,
    ib_write_bw_command,
    iperf3_command,
    nccl_tests_command,
    perftest_pairs,
    run_local,
    run_server_client,
)

__all__ = [
    "PerfRun",
    "ib_write_bw_command",
    "iperf3_command",
    "nccl_tests_command",
    "perftest_pairs",
    "run_local",
    "run_server_client",
]
