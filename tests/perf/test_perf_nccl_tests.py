"""nccl-tests parser: every real capture (runs and pasted excerpts), Markdown busbw tables, synthetic edge cases."""

import pytest

from fabricase.parsers.nccl_tests import (
    NcclTestsRank,
    NcclTestsRow,
    NcclTiming,
    parse_busbw_table,
    parse_nccl_tests,
    parse_size,
)

from .helpers import DATA, real

ISSUES = "nccl-tests-outputs_issues/"
ML = "ml-engineering-excerpts/"

NEW_FORMAT_WRONG = (DATA / "all_reduce_perf_2x2_wrong-results.synthetic.txt").read_text()


def test_superbench_allreduce_8xa100():
    r = parse_nccl_tests(real("superbenchmark-testdata/nccl_allreduce.log"), collective="all_reduce")
    assert r.ranks[0] == NcclTestsRank(0, 112424, "localhost", 0, "0x00", "A100-SXM4-40GB")
    assert [k.device for k in r.ranks] == list(range(8)) and r.hosts == ["localhost"] and r.nranks == 8
    assert (r.nthreads, r.ngpus, r.min_bytes, r.max_bytes, r.warmup_iters, r.iters) == (1, 8, 1, 8589934592, 5, 20)
    assert r.collective == "all_reduce" and r.wrong_column == "error"
    assert len(r.rows) == 34 and r.rows[2].size == 4 and r.rows[-1].size == 8589934592
    last = r.largest()
    assert last == NcclTestsRow(
        8589934592,
        2147483648,
        "float",
        "sum",
        None,
        NcclTiming(63896.0, 134.44, 235.26, None),
        NcclTiming(63959.0, 134.30, 235.03, None),
    )
    assert last.busbw == 235.26 and r.max_busbw == 235.26
    assert (r.avg_busbw, r.out_of_bounds, r.out_of_bounds_ok, r.wrong_total) == (68.4048, 0, True, None)
    assert r.errors == [] and r.warnings == []


def test_superbench_allgather_has_no_redop():
    r = parse_nccl_tests(real("superbenchmark-testdata/nccl_allgather.log"))
    assert len(r.rows) == 34 and {row.redop for row in r.rows} == {None} and r.collective is None
    assert r.largest().out_of_place == NcclTiming(33646.0, 255.31, 223.39, None)
    assert r.largest().in_place.busbw == 230.07 and r.avg_busbw == 58.2651 and r.gpu_models == ["A100-SXM4-40GB"]


def test_issue_232_two_h100_nodes_degraded():
    r = parse_nccl_tests(
        real(ISSUES + "all_reduce_perf_2nodes-1xH100-each_4NICs_tree_degraded_nccl-tests-issue-232.txt")
    )
    assert r.collective == "all_reduce" and "NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_4,mlx5_5" in r.command
    assert [row.size for row in r.rows] == [2097152 << i for i in range(5)]
    assert r.wrong_column == "#wrong" and r.wrong_total == 0
    assert r.largest().out_of_place == NcclTiming(812.3, 41.31, 41.31, 0.0) and r.max_busbw == 41.52
    assert r.avg_busbw is None and r.errors == []  # the excerpt stops at 32 MiB, before the footer


def test_nccl_debug_info_lines_between_the_rows_are_not_rows():
    """With NCCL_DEBUG=INFO (as the probe runs it), NCCL's init line sits among the rows and has numbers too."""
    text = real(ISSUES + "all_reduce_perf_2nodes-1xH100-each_4NICs_tree_degraded_nccl-tests-issue-232.txt")
    info = ("gpu-a:4021:4021 [0] NCCL INFO comm 0x55d3c0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 "
            "commId 0x1f - Init COMPLETE\n")
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("2097152"))
    r = parse_nccl_tests("".join(lines[:at] + [info] + lines[at:]))
    assert r.errors == [] and [row.size for row in r.rows] == [2097152 << i for i in range(5)]


def test_issue_182_two_independent_runs():
    r = parse_nccl_tests(real(ISSUES + "all_reduce_perf_A100-HDR-VM_low_nccl-tests-issue-182_excerpt.txt"))
    assert [row.size for row in r.rows] == [134217728, 134217728, 268435456, 268435456]
    assert r.rows[0].root == -1 and r.rows[0].redop == "sum" and r.max_busbw == 4.86
    assert r.avg_busbw == 1.80135 and r.avg_busbw_values == [1.80135, 1.65866]
    assert r.out_of_bounds == 0 and r.out_of_bounds_ok is True
    assert "2 result footers" in r.warnings[0]


def test_issue_1453_rank_tags_and_collapse():
    r = parse_nccl_tests(real(ISSUES + "all_reduce_perf_poor_busbw-collapse_nccl-issue-1453_excerpt.txt"))
    assert [row.size for row in r.rows] == [1048576 << i for i in range(10)]
    by_size = {row.size: row for row in r.rows}
    assert by_size[33554432].out_of_place == NcclTiming(2180.1, 15.39, 29.50, 0.0)
    assert by_size[67108864].busbw == 5.27 and r.largest().busbw == 5.33 and r.max_busbw == 29.5
    # The excerpt starts mid-row (no size): recorded, not guessed.
    assert r.errors == ["parse: unrecognised row: 366.5    1.43    2.74      0      340.8    1.54    2.95      0"]


def test_ml_engineering_abridged_table_with_underscores():
    r = parse_nccl_tests(real(ML + "nccl-tests_all_reduce_perf_8xA100_single-node.txt"))
    assert r.collective == "all_reduce" and r.command == "./build/all_reduce_perf -b 32k -e 16G -f 2 -g 8 -n 50"
    assert len(r.rows) == 20 and r.rows[0] == NcclTestsRow(32768, None, None, None, None,
                                                          NcclTiming(43.83, 0.75, 1.31), None)  # fmt: skip
    assert r.rows[5].size == 1048576  # printed "1048_576"
    assert r.largest().size == 17179869184 and r.largest().busbw == 234.89 and r.errors == []


@pytest.mark.parametrize(
    "path",
    [ML + "all_reduce_bench_8xH200_single-node_busbw.txt", ML + "all_reduce_bench_B200_1node-vs-4node_efa_busbw.txt",
     ML + "nccl-tests_8xH200_nvls-vs-ring_table.txt"],
)  # fmt: skip
def test_markdown_tables_are_not_nccl_tests_output(path):
    r = parse_nccl_tests(real(path))
    assert r.rows == [] and r.errors == ["parse: no nccl-tests result rows found"]


def test_busbw_table_8xh200():
    t = parse_busbw_table(real(ML + "all_reduce_bench_8xH200_single-node_busbw.txt"))
    assert t.columns == ["payload", "busbw", "algbw"] and len(t.rows) == 20 and t.errors == []
    assert (t.rows[0].label, t.rows[0].size_bytes, t.rows[0].values) == ("32KiB", 32768, {"busbw": 1.44, "algbw": 0.82})
    assert t.rows[-1].size_bytes == 16 << 30 and t.column("busbw")["16GiB"] == 482.26


def test_busbw_table_b200_efa():
    t = parse_busbw_table(real(ML + "all_reduce_bench_B200_1node-vs-4node_efa_busbw.txt"))
    assert t.columns == ["payload", "1 node", "4 nodes", "slowdown"]
    assert t.rows[-1].values == {"1 node": 845.67, "4 nodes": 381.80, "slowdown": 2.2}
    assert t.column("4 nodes")["16MiB"] == 64.43


def test_busbw_table_nvls_vs_ring():
    t = parse_busbw_table(real(ML + "nccl-tests_8xH200_nvls-vs-ring_table.txt"))
    row = t.rows[-1]
    assert (row.label, row.size_bytes) == ("8", None)
    assert row.values == {"algo NCCL picks": None, "busbw": 473.1, "busbw, NVLS off": 365.6, "gain from SHARP": 1.29}


def test_new_format_with_wrong_results_and_failure():
    r = parse_nccl_tests(NEW_FORMAT_WRONG)
    assert (r.version, r.collective, r.ngpus, r.iters, r.warmup_iters) == ("2.13.9", "all_reduce", 1, 20, 5)
    assert r.ranks[2] == NcclTestsRank(2, 41000, "gpu002", 0, "0000:18:00", "NVIDIA H100 80GB HBM3")
    assert r.hosts == ["gpu001", "gpu002"] and r.gpu_models == ["NVIDIA H100 80GB HBM3"]
    assert r.rows[1].out_of_place.wrong == 3 and r.wrong_total == 3 and r.largest().busbw == 268.81
    assert (r.out_of_bounds, r.out_of_bounds_ok, r.avg_busbw) == (3, False, 268.5625)
    assert r.errors == ["gpu002: Test NCCL failure common.cu:1279 'remote process exited or there was a network "
                        "error / '", "out of bounds values: 3 FAILED"]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "size"),
    [("8", 8), ("8G", 8 << 30), ("16GiB", 16 << 30), ("32KiB", 32768), ("2M", 2 << 20), ("32k", 32768),
     ("1.5K", 1536), ("x", None), ("", None), ("8 GB/s", None)],
)  # fmt: skip
def test_parse_size(text, size):
    assert parse_size(text) == size
