"""Performance tests on one host, run only when asked (--perf): they load the GPUs and NICs they measure.

Each output is one item named `cmd:perf-<test>`; analysis recognizes the format by its shape. A missing
binary gives rc 0 and no output ("not installed"). Tests between hosts (perftest pairs, multi-node
nccl-tests, iperf3) need a transport that reaches the peers; fabricase.perf.runners builds their command lines.
"""

from fabricase.collectors.base import Collector, CommandSpec

MAX_RDMA_DEVICES = 16

_NCCL = (
    'command -v all_reduce_perf >/dev/null 2>&1 || exit 0; '
    'n=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU"); [ "${n:-0}" -gt 0 ] || exit 0; '
    'all_reduce_perf -b 8 -e 8G -f 2 -g "$n"'
)


def _loopback(index: int) -> str:
    # The n-th RDMA device talks to itself: a server in the background, the client to localhost.
    return (
        'command -v ib_write_bw >/dev/null 2>&1 || exit 0; '
        f'd=$(ls "${{FC_ROOT:-}}/sys/class/infiniband" 2>/dev/null | sed -n {index + 1}p); [ -n "$d" ] || exit 0; '
        'ib_write_bw -d "$d" -F --report_gbits -D 5 >/dev/null 2>&1 & s=$!; sleep 1; '
        'ib_write_bw -d "$d" -F --report_gbits -D 5 localhost; rc=$?; wait "$s"; exit $rc'
    )


class PerfCollector(Collector):
    name = "perf"
    version = 1
    description = "opt-in perf tests: nccl-tests all_reduce_perf on the local GPUs, ib_write_bw loopback per port"
    opt_in = True
    commands = (
        CommandSpec("perf-all_reduce_perf", _NCCL, timeout_s=600, cap=1024 * 1024),
        *(CommandSpec(f"perf-ib_write_bw-{i}", _loopback(i), timeout_s=30, cap=256 * 1024)
          for i in range(MAX_RDMA_DEVICES)),
    )
