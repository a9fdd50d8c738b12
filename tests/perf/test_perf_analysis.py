"""Perf rules and samples over real captured outputs, a few synthetic variants, and a capture directory."""

import math

import pytest

from fabricase.analysis.perf import (
    RULES,
    PerfRecord,
    detect_perf_format,
    nccl_busbw_collapse,
    nccl_busbw_low,
    nccl_wrong_results,
    perf_findings,
    perf_records,
    perf_samples,
    perf_test_failed,
    rdma_bw_low,
    rdma_bw_outliers,
    robust_z,
    samples,
    tcp_throughput_low,
)
from fabricase.models import Severity
from fabricase.parsers.iperf3 import parse_iperf3
from fabricase.parsers.nccl_tests import parse_nccl_tests
from fabricase.parsers.perftest import parse_perftest

from .helpers import SYNTHETIC_IPERF3, host_capture, real
from .test_perf_nccl_tests import NEW_FORMAT_WRONG

ALLREDUCE = real("superbenchmark-testdata/nccl_allreduce.log")
HPE = real("perftest-outputs/ib_write_bw_100G-RoCE_mlx5_server-and-client_hpe-shs.txt")
COLLAPSE = real("nccl-tests-outputs_issues/all_reduce_perf_poor_busbw-collapse_nccl-issue-1453_excerpt.txt")
ISSUE_232 = real(
    "nccl-tests-outputs_issues/all_reduce_perf_2nodes-1xH100-each_4NICs_tree_degraded_nccl-tests-issue-232.txt"
)


def record(result, host="gpu001", source="cmd:perf-test", rate=None):
    return PerfRecord(host, source, result, rate)


def test_healthy_8xa100_allreduce_meets_its_baseline():
    r = parse_nccl_tests(ALLREDUCE, collective="all_reduce")
    assert nccl_busbw_low(record(r)) == []  # 235.26 GB/s at 8 GiB >= 228
    assert perf_findings([record(r)]) == []


def test_same_run_below_a_given_expectation():
    (f,) = nccl_busbw_low(record(parse_nccl_tests(ALLREDUCE, collective="all_reduce")), expected_gbs=300.0)
    assert (f.kind, f.severity, f.host, f.component) == ("nccl-busbw-low", Severity.MAJOR, "gpu001", "host")
    assert f.summary == ("all_reduce busbw 235.26 GB/s at 8589934592 B, 78% of the expected 300 GB/s "
                         "(given 300 GB/s)")  # fmt: skip
    assert [(e.metric, e.value, e.baseline) for e in f.evidence] == [
        ("perf.nccl_busbw_gbs", 235.26, 300.0), ("perf.nccl_size_bytes", 8589934592, None),
        ("perf.nccl_avg_busbw_gbs", 68.4048, None)]  # fmt: skip


def test_h100_baseline_applies_to_eight_gpus_per_host():
    # The synthetic 4-rank H100 run has 2 GPUs per host: no automatic baseline; a degraded 8-GPU copy gets one.
    r = parse_nccl_tests(NEW_FORMAT_WRONG)
    assert nccl_busbw_low(record(r)) == []
    lines = NEW_FORMAT_WRONG.split("\n")
    ranks = [f"#  Rank {i:2d} Group  0 Pid  4000{i} on     gpu001 device  {i} [0000:18:00] NVIDIA H100 80GB HBM3"
             for i in range(8)]  # fmt: skip
    text = "\n".join([line for line in lines if "Rank " not in line] + ranks)
    (f,) = nccl_busbw_low(record(parse_nccl_tests(text)))
    assert f.evidence[0].baseline == 360.0 and "8xH100 SXM" in f.summary and "75%" in f.summary


def test_small_messages_are_not_compared():
    r = parse_nccl_tests(ISSUE_232)  # stops at 32 MiB
    assert nccl_busbw_low(record(r), expected_gbs=200.0) == []
    (f,) = nccl_busbw_low(record(r), expected_gbs=200.0, min_bytes=1 << 20)
    assert f.evidence[0].value == 41.52 and "21% of the expected 200 GB/s" in f.summary


def test_busbw_collapse_issue_1453():
    (f,) = nccl_busbw_collapse(record(parse_nccl_tests(COLLAPSE)))
    assert f.kind == "nccl-busbw-collapse" and f.severity == Severity.MAJOR
    assert f.summary.startswith("busbw collapses from 29.5 GB/s at 33554432 B to 5.33 GB/s at 536870912 B")
    assert nccl_busbw_collapse(record(parse_nccl_tests(ALLREDUCE))) == []


def test_wrong_results_are_critical():
    (f,) = nccl_wrong_results(record(parse_nccl_tests(NEW_FORMAT_WRONG)))
    assert (f.kind, f.severity) == ("nccl-wrong-results", Severity.CRITICAL)
    assert [(e.metric, e.value, e.baseline) for e in f.evidence] == [
        ("perf.nccl_wrong", 3.0, 0), ("perf.nccl_out_of_bounds", 3, 0)]  # fmt: skip
    assert nccl_wrong_results(record(parse_nccl_tests(ALLREDUCE))) == []  # "error" column, N/A everywhere


def test_tool_failures():
    (f,) = perf_test_failed(record(parse_nccl_tests(NEW_FORMAT_WRONG)))
    assert f.kind == "perf-test-failed" and "Test NCCL failure" in f.summary
    (g,) = perf_test_failed(record(parse_iperf3('{"error": "unable to connect to server: Connection refused"}')))
    assert g.summary.endswith("unable to connect to server: Connection refused")
    assert perf_test_failed(record(parse_nccl_tests(COLLAPSE))) == []  # a parse note is not a tool failure


def test_rdma_bw_against_link_rate():
    r = parse_perftest(HPE)
    assert rdma_bw_low(record(r, rate=100.0)) == []  # 98.03 of 100 Gb/s
    (f,) = rdma_bw_low(record(r, rate=200.0))
    assert (f.kind, f.component, f.severity) == ("rdma-bw-low", "rdma:mlx5_0/1", Severity.MAJOR)
    assert f.summary == "mlx5_0 RDMA_Write BW Test: 98.0 Gb/s at 65536 B, 49% of the 200 Gb/s link (pass: 90%)"
    assert (f.evidence[0].value, f.evidence[0].baseline) == (98.03, 200.0)
    small = parse_perftest(real("perftest-outputs/ib_write_bw_postlist_8B_RoCE_perftest-issue-273.txt"))
    assert rdma_bw_low(record(small, rate=100.0)) == []  # 8-byte messages: message-rate bound, not compared


def test_hdr_loopback_passes_200g():
    r = parse_perftest(real("superbenchmark-testdata/ib_loopback_8M_size.log"))
    assert rdma_bw_low(record(r), link_rate_gbps=200.0) == []


def test_tcp_throughput():
    r = parse_iperf3(SYNTHETIC_IPERF3.read_text())
    assert tcp_throughput_low(record(r)) == [] and tcp_throughput_low(record(r, rate=10.0)) == []
    (f,) = tcp_throughput_low(record(r, rate=100.0))
    assert f.severity == Severity.MAJOR and f.summary.startswith("iperf3 to 10.0.0.2: 9.41 Gb/s of a 100 Gb/s link")
    lossy = parse_iperf3(SYNTHETIC_IPERF3.read_text().replace('"retransmits": 1204', '"retransmits": 9000'))
    (g,) = tcp_throughput_low(record(lossy))
    assert g.severity == Severity.MINOR and "9000 retransmits (3.42% of segments)" in g.summary


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, 2.0, 3.0], [None, None, None]),
        ([10.0, 10.0, 10.0, 10.0], [0.0, 0.0, 0.0, 0.0]),
        ([1.0, None, 2.0, 3.0, 4.0, 100.0], [-1.349, None, -0.6745, 0.0, 0.6745, 65.43]),  # median 3, MAD 1
        ([98.0, 98.0, 98.0, 98.0, 60.0], [0.0, 0.0, 0.0, 0.0, -3.99]),  # MAD 0: mean-AD stand-in
    ],
)
def test_robust_z(values, expected):
    got = robust_z(values)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert (g is None and e is None) or g == pytest.approx(e, abs=1e-2)


def test_rdma_bw_outlier_across_hosts():
    text = HPE
    records = [record(parse_perftest(text.replace("98.03", v)), host=f"gpu00{i}")
               for i, v in enumerate(["98.03", "97.91", "98.12", "97.88", "61.20"], start=1)]  # fmt: skip
    (f,) = rdma_bw_outliers(records)
    assert (f.kind, f.host, f.component) == ("rdma-bw-outlier", "gpu005", "rdma:mlx5_0/1")
    assert f.evidence[0].value == 61.2 and f.evidence[0].baseline == 97.91 and f.evidence[1].value < -3.5
    assert rdma_bw_outliers(records[:3]) == []  # fewer than 4 runs: no fleet statistics


def test_samples_of_each_result():
    out = perf_samples([
        record(parse_perftest(HPE), source="cmd:perf-ib_write_bw-mlx5_0"),
        record(parse_nccl_tests(ALLREDUCE, collective="all_reduce"), source="cmd:perf-all_reduce_perf"),
        record(parse_iperf3(SYNTHETIC_IPERF3.read_text()), source="cmd:perf-iperf3"),
    ])  # fmt: skip
    got = {(s.component, s.metric): s.value for s in out}
    assert got[("rdma:mlx5_0/1", "perf.rdma_bw_gbps")] == 98.03
    assert got[("rdma:mlx5_0/1", "perf.rdma_msg_rate_mpps")] == 0.186974
    assert got[("host", "perf.nccl_busbw_gbs")] == 235.26 and got[("host", "perf.nccl_avg_busbw_gbs")] == 68.4048
    assert ("host", "perf.nccl_wrong") not in got  # N/A is not 0
    assert math.isclose(got[("host", "perf.tcp_received_gbps")], 9.407929447)
    assert got[("host", "perf.tcp_retransmits")] == 1204
    assert all(s.host == "gpu001" and s.source.startswith("cmd:perf-") for s in out)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (HPE, "perftest"),
        (ALLREDUCE, "nccl-tests"),
        (COLLAPSE, "nccl-tests"),
        ('  {"start": {}}', "iperf3"),
        ("hello", None),
        ("", None),
    ],
)
def test_detect_perf_format(text, kind):
    assert detect_perf_format(text) == kind


def test_capture_items_through_the_rule(tmp_path):
    hc = host_capture(tmp_path, "gpu001", {
        "cmd:perf-ib_write_bw-mlx5_0": HPE.replace("-i 1 ", ""),  # port not echoed: taken from sysfs
        "/sys/class/infiniband/mlx5_0/ports/1/rate": "200 Gb/sec (4X HDR)\n",
        "cmd:perf-all_reduce_perf": COLLAPSE,
        "cmd:perf-iperf3": SYNTHETIC_IPERF3.read_text(),
        "cmd:other": "ignored",
    })  # fmt: skip
    records = perf_records(hc)
    assert [r.source for r in records] == ["cmd:perf-all_reduce_perf", "cmd:perf-ib_write_bw-mlx5_0", "cmd:perf-iperf3"]
    assert records[0].result.collective == "all_reduce" and records[1].line_rate_gbps == 200.0
    assert records[1].result.port == 1 and records[1].component == "rdma:mlx5_0/1"
    findings = RULES[0](hc, samples(hc))
    assert [(f.kind, f.component) for f in findings] == [("nccl-busbw-collapse", "host"),
                                                         ("rdma-bw-low", "rdma:mlx5_0/1")]  # fmt: skip
    assert {s.metric for s in samples(hc)} >= {"perf.rdma_bw_gbps", "perf.nccl_busbw_gbs", "perf.tcp_received_gbps"}
