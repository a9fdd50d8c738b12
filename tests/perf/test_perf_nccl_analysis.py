"""NCCL-log findings: the synthetic 2x8 job log is attributed to gpu002 rdma:mlx5_3/1; thresholds and edge cases."""

from fabricase.analysis import sort_findings
from fabricase.analysis.nccl import CRITICAL_COMPLETION_ERRORS, nccl_findings, nccl_nic_findings, nccl_timeout_findings
from fabricase.models import Severity
from fabricase.parsers.nccl_log import parse_nccl_log

from .helpers import SYNTHETIC_NCCL_LOG

SOURCE = "inputs/nccl-log/000-job.log"
INIT = (
    "gpu01:100:100 [2] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [RO]; "
    "OOB ib0:10.1.0.1<0>\n"
    "gpu01:100:100 [2] NCCL INFO comm 0x7f00 rank 2 nranks 16 cudaDev 2 busId 3a000 - Init COMPLETE\n"
    "gpu01:100:120 [2] NCCL INFO Channel 00/0 : 2[3a000] -> 10[3a000] [send] via NET/IB/2\n"
)
NO_HCA = "gpu01:100:130 [2] NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129\n"


def test_synthetic_log_points_at_gpu002_mlx5_3():
    findings = nccl_findings([parse_nccl_log(SYNTHETIC_NCCL_LOG.read_text(), source=SOURCE)])
    first = findings[0]
    assert (first.kind, first.severity, first.host, first.component) == (
        "nccl-nic-errors", Severity.CRITICAL, "gpu002", "rdma:mlx5_3/1")  # fmt: skip
    assert first.summary == ("gpu002 mlx5_3 port 1: 12 NCCL completion errors (status 12 x10, status 5 x2; "
                             "vendor err 129 x10, vendor err 249 x2), 1 port error; ranks 11")  # fmt: skip
    assert [(e.metric, e.value) for e in first.evidence] == [
        ("nccl.completion_errors", 12), ("nccl.completion_status_5", 2), ("nccl.completion_status_12", 10),
        ("nccl.vendor_err_129", 10), ("nccl.vendor_err_249", 2), ("nccl.port_errors", 1), ("nccl.ranks", "11"),
        ("nccl.peers", "gpu001 x12"), ("nccl.first_line", 181)]  # fmt: skip
    assert {e.source for e in first.evidence} == {SOURCE} and first.confidence == 0.9
    rest = [(f.kind, f.severity, f.host, f.component) for f in findings[1:]]
    assert rest == [
        ("nccl-timeout", Severity.MAJOR, "gpu001", "host"),
        ("nccl-timeout", Severity.MAJOR, "gpu002", "host"),
        ("nccl-nic-errors", Severity.MINOR, "gpu001", "rdma:mlx5_3/1"),  # the far end of gpu002's NIC
    ]
    far = findings[-1]
    assert "every error names gpu002" in far.summary and far.confidence == 0.5
    assert ("nccl.far_end_of", "gpu002") in [(e.metric, e.value) for e in far.evidence]
    assert findings == sort_findings(findings)


def test_timeouts_per_host():
    (f,) = [f for f in nccl_timeout_findings([parse_nccl_log(SYNTHETIC_NCCL_LOG.read_text(), SOURCE)])
            if f.host == "gpu002"]  # fmt: skip
    assert f.summary == "gpu002: 1 NCCL collective timeout (ranks 11)" and f.confidence == 0.6
    assert [(e.metric, e.value) for e in f.evidence] == [("nccl.timeouts", 1), ("nccl.ranks", "11"),
                                                         ("nccl.first_line", 199)]  # fmt: skip


def test_critical_threshold():
    below = parse_nccl_log(INIT + NO_HCA * (CRITICAL_COMPLETION_ERRORS - 1))
    at = parse_nccl_log(INIT + NO_HCA * CRITICAL_COMPLETION_ERRORS)
    (f,) = nccl_nic_findings([below])
    (g,) = nccl_nic_findings([at])
    assert (f.severity, g.severity) == (Severity.MAJOR, Severity.CRITICAL)
    # No line named the NIC: it is the one NIC rank 2's channels use, so the confidence is lower.
    assert f.component == "rdma:mlx5_2/1" and f.confidence == 0.7 and f.host == "gpu01"


def test_fatal_event_is_critical_and_unknown_port_is_left_out():
    log = parse_nccl_log("gpu09:1:2 [0] NCCL WARN NET/IB : bnxt_re0:1 Got async event : local catastrophic error\n"
                         "gpu09:1:2 [0] NCCL WARN Call to ibv_reg_mr failed on dev irdma1\n")  # fmt: skip
    findings = nccl_nic_findings([log])
    assert [(f.component, f.severity) for f in findings] == [("rdma:bnxt_re0/1", Severity.CRITICAL),
                                                             ("rdma:irdma1", Severity.MAJOR)]  # fmt: skip
    assert findings[1].summary == "gpu09 irdma1: 1 failed verbs call"


def test_several_logs_and_unattributable_events():
    one = parse_nccl_log("gpuA:1:1 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error\n", "a.log")
    two = parse_nccl_log("gpuA:2:2 [1] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error\n"
                         "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129\n",
                         "b.log")  # fmt: skip
    (f,) = nccl_findings([one, two])  # the line with no host prefix cannot be attributed
    assert f.summary == "gpuA mlx5_0 port 1: 2 port errors" and f.evidence[0].source == "a.log"
    assert nccl_findings([]) == [] and nccl_findings([parse_nccl_log("nothing here")]) == []
