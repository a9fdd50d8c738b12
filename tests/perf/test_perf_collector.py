"""--perf end to end: the opt-in collector runs recorded nccl-tests and ib_write_bw outputs through the real
script, and analysis reads them back as perf records and findings."""

from __future__ import annotations

from pathlib import Path

from fabricase.analysis import analyze
from fabricase.analysis.perf import perf_records
from fabricase.collectors import select_collectors
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from hosttrees import record_command, write_file

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "perf"


def test_perf_is_opt_in():
    assert "perf" not in [c.name for c in select_collectors()]
    assert "perf" in [c.name for c in select_collectors(extra=("perf",))]


def test_perf_collector_end_to_end(tmp_path):
    root = tmp_path / "host"
    nccl = (REAL / "ml-engineering-excerpts" / "nccl-tests_all_reduce_perf_8xA100_single-node.txt").read_text()
    record_command(root, "nvidia-smi", ["-L"], "".join(f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-{i})\n"
                                                      for i in range(8)))
    record_command(root, "all_reduce_perf", ["-b", "8", "-e", "8G", "-f", "2", "-g", "8"], nccl)
    write_file(root, "/sys/class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n")
    out = tmp_path / "cap"
    capture = collect(Targets(hosts=("localhost",)),
                      CollectOptions(interval_s=0, root=str(root), collectors=("rdma",), perf=True), out)
    hc = capture.hosts[0]
    nccl_item = hc.item("cmd:perf-all_reduce_perf", 0)
    assert nccl_item.rc == 0 and nccl_item.bytes == len(nccl.encode())
    records = perf_records(hc)
    assert len(records) == 1 and records[0].result.rows
    # ib_write_bw is not installed under this tree: the loopback items are empty, not errors.
    assert hc.item("cmd:perf-ib_write_bw-0", 0).rc == 0 and hc.item("cmd:perf-ib_write_bw-0", 0).bytes == 0
    kinds = {f.kind for f in analyze(capture)}
    assert "perf-test-failed" not in kinds
