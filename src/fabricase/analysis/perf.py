"""Perf-test results -> metric samples and findings: NCCL bus bandwidth against a per-GPU baseline, wrong
results, RDMA bandwidth against the link rate, TCP throughput and retransmits, and fleet outliers.

Bandwidth is compared only at large messages: small messages are latency- and message-rate-bound even on a
healthy fabric (8-byte ib_write_bw reaches 0.48 Gb/s at 7.5 Mpps; busbw "falls off a cliff" below ~1 GiB).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fabricase.models import Evidence, Finding, HostCapture, MetricSample, Severity
from fabricase.parsers.iperf3 import Iperf3Result, parse_iperf3
from fabricase.parsers.nccl_tests import NcclTestsResult, parse_nccl_tests
from fabricase.parsers.perftest import PerftestResult, parse_perftest

__all__ = [
    "ALLREDUCE_BUSBW_GBS", "NCCL_MIN_COMPARE_BYTES", "PROBE_ITEM_PREFIXES", "RDMA_BW_FRACTION",
    "RDMA_MIN_COMPARE_BYTES", "RULES",
    "PerfRecord", "detect_perf_format", "nccl_busbw_collapse", "nccl_busbw_low", "nccl_wrong_results",
    "perf_fleet_findings", "perf_findings", "perf_records", "perf_rule", "perf_samples", "perf_test_failed",
    "rdma_bw_low", "rdma_bw_outliers", "robust_z", "samples", "tcp_throughput_low",
]  # fmt: skip

Result = PerftestResult | NcclTestsResult | Iperf3Result
# Single-node 8-GPU all_reduce busbw floors, GB/s (telemetry.md d.2). The ring figure is the floor because NCCL
# picks NVLS (~460-480 GB/s on H100/H200) only where NVLink SHARP is enabled.
ALLREDUCE_BUSBW_GBS: dict[str, tuple[float, str]] = {
    "A100": (228.0, "8xA100 SXM: Azure NHC pass threshold 228 GB/s (healthy 235 GB/s at 8 GiB)"),
    "H100": (360.0, "8xH100 SXM: ring ~365 GB/s, NVLS ~476 GB/s; 8x400G NDR multi-node ~370-385 GB/s"),
    "H200": (360.0, "8xH200 SXM: ring 365.6-367.6 GB/s, NVLS 482 GB/s"),
}
NCCL_MIN_COMPARE_BYTES = 1 << 30
RDMA_MIN_COMPARE_BYTES = 64 * 1024
RDMA_BW_FRACTION = 0.9  # NVIDIA ngc_multinode_perf pass criterion: 90% of the port link speed
TCP_BW_FRACTION = 0.5  # heuristic: one host's TCP streams below half the link speed
TCP_RETRANSMIT_SHARE = 0.01  # heuristic: more than 1% of segments retransmitted
OUTLIER_Z = 3.5
PROBE_ITEM_PREFIXES = ("cmd:perf-probe-", "cmd:probe-server-")  # fabricase.probe.model.item_source and its server
_GPU = re.compile(r"(?<![A-Za-z0-9])(A100|H100|H200)(?![0-9])")


@dataclass(frozen=True)
class PerfRecord:
    """One parsed perf result. host: where it ran (the client, or the launcher's host for nccl-tests);
    source: the capture item (`cmd:perf-<name>`); line_rate_gbps: the port (perftest) or link (iperf3) rate."""

    host: str
    source: str
    result: Result
    line_rate_gbps: float | None = None

    @property
    def component(self) -> str:
        r = self.result
        if isinstance(r, PerftestResult) and r.device:
            return f"rdma:{r.device}/{r.port}" if r.port is not None else f"rdma:{r.device}"
        return "host"


def _finding(kind, severity, record, summary, evidence, confidence) -> Finding:
    return Finding(kind, severity, record.host, record.component, summary, evidence, confidence=confidence)


def _ev(metric, value, unit, baseline, record) -> Evidence:
    return Evidence(metric, value, unit, baseline=baseline, source=record.source, snapshot=0)


def _gpu_model(result: NcclTestsResult) -> str | None:
    models = {m.group(1) for g in result.gpu_models if "PCIE" not in g.upper() and (m := _GPU.search(g))}
    return models.pop() if len(models) == 1 else None


def _eight_per_host(result: NcclTestsResult) -> bool:
    per_host: dict[str, int] = {}
    for rank in result.ranks:
        per_host[rank.host] = per_host.get(rank.host, 0) + 1
    return bool(per_host) and set(per_host.values()) == {8}


def nccl_busbw_low(record: PerfRecord, expected_gbs: float | None = None,
                   min_bytes: int = NCCL_MIN_COMPARE_BYTES) -> list[Finding]:  # fmt: skip
    """busbw at the largest size below the expected value (given, or the all_reduce floor of 8 GPUs per host)."""
    r = record.result
    if not isinstance(r, NcclTestsResult) or (row := r.largest()) is None or row.busbw is None:
        return []
    basis = f"given {expected_gbs:g} GB/s" if expected_gbs is not None else None
    if expected_gbs is None and r.collective == "all_reduce" and _eight_per_host(r) and (model := _gpu_model(r)):
        expected_gbs, basis = ALLREDUCE_BUSBW_GBS.get(model, (None, None))
    if expected_gbs is None or row.size < min_bytes or row.busbw >= expected_gbs:
        return []
    summary = (f"{r.collective or 'nccl-tests'} busbw {row.busbw:g} GB/s at {row.size} B, "
               f"{row.busbw / expected_gbs:.0%} of the expected {expected_gbs:g} GB/s ({basis})")  # fmt: skip
    evidence = [_ev("perf.nccl_busbw_gbs", row.busbw, "GB/s", expected_gbs, record),
                _ev("perf.nccl_size_bytes", row.size, "bytes", None, record)]  # fmt: skip
    if r.avg_busbw is not None:
        evidence.append(_ev("perf.nccl_avg_busbw_gbs", r.avg_busbw, "GB/s", None, record))
    return [_finding("nccl-busbw-low", Severity.MAJOR, record, summary, evidence, 0.8)]


def nccl_busbw_collapse(record: PerfRecord) -> list[Finding]:
    """busbw at the largest size under half of the best busbw at a smaller size (>= 1 MiB): a transport fault."""
    r = record.result
    if not isinstance(r, NcclTestsResult) or (last := r.largest()) is None or last.busbw is None:
        return []
    earlier = [row for row in r.rows if (1 << 20) <= row.size < last.size and row.busbw is not None]
    best = max(earlier, key=lambda row: row.busbw, default=None)
    if best is None or last.busbw >= 0.5 * best.busbw:
        return []
    summary = (f"busbw collapses from {best.busbw:g} GB/s at {best.size} B to {last.busbw:g} GB/s at "
               f"{last.size} B: bandwidth should grow with message size")  # fmt: skip
    evidence = [_ev("perf.nccl_busbw_gbs", last.busbw, "GB/s", best.busbw, record),
                _ev("perf.nccl_size_bytes", last.size, "bytes", best.size, record)]  # fmt: skip
    return [_finding("nccl-busbw-collapse", Severity.MAJOR, record, summary, evidence, 0.7)]


def nccl_wrong_results(record: PerfRecord) -> list[Finding]:
    """#wrong > 0 in any row, or out-of-bounds values FAILED: a collective returned corrupt data."""
    r = record.result
    if not isinstance(r, NcclTestsResult):
        return []
    wrong = r.wrong_total if r.wrong_column != "error" else None
    if not (wrong or r.out_of_bounds_ok is False):
        return []
    evidence = []
    if wrong:
        evidence.append(_ev("perf.nccl_wrong", wrong, "elements", 0, record))
    if r.out_of_bounds is not None:
        evidence.append(_ev("perf.nccl_out_of_bounds", r.out_of_bounds, "values", 0, record))
    summary = f"nccl-tests returned wrong results: #wrong {wrong or 0:g}, out of bounds {r.out_of_bounds}"
    return [_finding("nccl-wrong-results", Severity.CRITICAL, record, summary, evidence, 0.95)]


def rdma_bw_low(record: PerfRecord, link_rate_gbps: float | None = None) -> list[Finding]:
    """perftest average bandwidth at the largest message (>= 64 KiB) below 90% of the link rate."""
    r, rate = record.result, link_rate_gbps or record.line_rate_gbps
    if not isinstance(r, PerftestResult) or not rate or (row := r.largest()) is None:
        return []
    if " -b" in f" {r.command or ''} " or "--bidirectional" in (r.command or ""):
        rate *= 2  # both directions summed
    if row.bytes < RDMA_MIN_COMPARE_BYTES or row.bw_avg_gbps >= RDMA_BW_FRACTION * rate:
        return []
    summary = (f"{r.device or 'RDMA'} {r.test or 'perftest'}: {row.bw_avg_gbps:.1f} Gb/s at {row.bytes} B, "
               f"{row.bw_avg_gbps / rate:.0%} of the {rate:g} Gb/s link (pass: {RDMA_BW_FRACTION:.0%})")  # fmt: skip
    evidence = [_ev("perf.rdma_bw_gbps", round(row.bw_avg_gbps, 3), "Gb/s", rate, record)]
    return [_finding("rdma-bw-low", Severity.MAJOR, record, summary, evidence, 0.8)]


def tcp_throughput_low(record: PerfRecord, link_speed_gbps: float | None = None) -> list[Finding]:
    """iperf3: received rate under half the link speed (major), or over 1% of segments retransmitted (minor)."""
    r, speed = record.result, link_speed_gbps or record.line_rate_gbps
    if not isinstance(r, Iperf3Result) or r.received_bps is None:
        return []
    gbps = r.received_bps / 1e9
    low = bool(speed) and gbps < TCP_BW_FRACTION * speed
    segments = r.sent_bytes / (r.tcp_mss or 1448) if r.sent_bytes else None
    share = r.retransmits / segments if r.retransmits is not None and segments else None
    lossy = share is not None and share > TCP_RETRANSMIT_SHARE
    if not (low or lossy):
        return []
    evidence = [_ev("perf.tcp_received_gbps", round(gbps, 3), "Gb/s", speed, record)]
    if r.retransmits is not None:
        evidence.append(_ev("perf.tcp_retransmits", r.retransmits, "segments", 0, record))
    share_text = f", {r.retransmits} retransmits ({share:.2%} of segments)" if share is not None else ""
    summary = f"iperf3 to {r.server or 'peer'}: {gbps:.2f} Gb/s" + (f" of a {speed:g} Gb/s link" if speed else "")
    severity = Severity.MAJOR if low else Severity.MINOR
    return [_finding("tcp-throughput-low", severity, record, summary + share_text, evidence, 0.7)]


def perf_test_failed(record: PerfRecord) -> list[Finding]:
    """The tool reported a failure (connection, QP, NCCL or CUDA error) or produced no result."""
    r = record.result
    failures = [e for e in getattr(r, "errors", []) if not e.startswith(("parse:", "out of bounds"))]
    if isinstance(r, Iperf3Result) and r.error:
        failures.insert(0, r.error)
    if not failures:
        return []
    summary = f"perf test {record.source} failed: {failures[0][:160]}"
    evidence = [_ev("perf.tool_errors", len(failures), "lines", 0, record)]
    return [_finding("perf-test-failed", Severity.MAJOR, record, summary, evidence, 0.9)]


def robust_z(values: Sequence[float | None]) -> list[float | None]:
    """Robust z-scores (fabricase.analysis.stats.robust_z); None for missing values, or all None under 4 values."""
    from fabricase.analysis.stats import robust_z as z_scores

    if sum(v is not None for v in values) < 4:
        return [None] * len(values)
    z = z_scores([float("nan") if v is None else v for v in values])
    return [None if v is None else float(x) for v, x in zip(values, z, strict=True)]


def rdma_bw_outliers(records: Iterable[PerfRecord]) -> list[Finding]:
    """perftest bandwidths (same test and message size, >= 4 of them) far below the fleet median."""
    groups: dict[tuple[str | None, int], list[tuple[PerfRecord, float]]] = {}
    for record in records:
        r = record.result
        if isinstance(r, PerftestResult) and (row := r.largest()) and row.bytes >= RDMA_MIN_COMPARE_BYTES:
            groups.setdefault((r.test, row.bytes), []).append((record, row.bw_avg_gbps))
    findings = []
    for (test, size), members in sorted(groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        values = [v for _, v in members]
        median = statistics.median(values)
        for (record, value), z in zip(members, robust_z(values), strict=True):
            if z is None or z > -OUTLIER_Z:
                continue
            summary = (f"{record.host} {record.component}: {value:.1f} Gb/s vs fleet median {median:.1f} Gb/s "
                       f"({test or 'perftest'}, {size} B, robust z {z:.1f}, {len(values)} runs)")  # fmt: skip
            evidence = [_ev("perf.rdma_bw_gbps", round(value, 3), "Gb/s", round(median, 3), record),
                        _ev("perf.rdma_bw_robust_z", round(z, 2), "z", 0, record)]  # fmt: skip
            findings.append(_finding("rdma-bw-outlier", Severity.MAJOR, record, summary, evidence, 0.7))
    return findings


_RULES_PER_RECORD = (perf_test_failed, nccl_wrong_results, nccl_busbw_low, nccl_busbw_collapse, rdma_bw_low,
                     tcp_throughput_low)  # fmt: skip


def perf_findings(records: Iterable[PerfRecord]) -> list[Finding]:
    """Every per-result rule over each record, in record order."""
    return [f for record in records for rule in _RULES_PER_RECORD for f in rule(record)]


def perf_fleet_findings(records: Iterable[PerfRecord]) -> list[Finding]:
    """Findings that need every host's results at once (run once per capture, not per host)."""
    return rdma_bw_outliers(records)


def perf_samples(records: Iterable[PerfRecord]) -> list[MetricSample]:
    """A sample per headline number of each result (perf.* metrics, docs/perf-and-nccl.md)."""
    out: list[MetricSample] = []
    for rec in records:
        r = rec.result

        def add(metric: str, value: float | None, unit: str, note: str | None = None, rec=rec) -> None:
            if value is not None:
                out.append(MetricSample(rec.host, rec.component, metric, value, unit, rec.source, note=note))

        if isinstance(r, PerftestResult):
            if row := r.largest():
                add("perf.rdma_bw_gbps", row.bw_avg_gbps, "Gb/s", f"{row.bytes} B messages")
                add("perf.rdma_msg_rate_mpps", row.msg_rate_mpps, "Mpps", f"{row.bytes} B messages")
            if lat := min(r.latency, key=lambda x: x.bytes, default=None):
                add("perf.rdma_lat_typical_us", lat.t_typical_us, "us", f"{lat.bytes} B messages")
                add("perf.rdma_lat_p99_us", lat.t_p99_us, "us", f"{lat.bytes} B messages")
        elif isinstance(r, NcclTestsResult):
            if (row := r.largest()) is not None:
                add("perf.nccl_busbw_gbs", row.busbw, "GB/s", f"{row.size} B, {r.collective or 'nccl-tests'}")
            add("perf.nccl_avg_busbw_gbs", r.avg_busbw, "GB/s")
            add("perf.nccl_wrong", r.wrong_total if r.wrong_column != "error" else None, "elements")
        elif isinstance(r, Iperf3Result):
            add("perf.tcp_received_gbps", None if r.received_bps is None else r.received_bps / 1e9, "Gb/s")
            add("perf.tcp_sent_gbps", None if r.sent_bps is None else r.sent_bps / 1e9, "Gb/s")
            add("perf.tcp_retransmits", r.retransmits, "segments")
    return out


_NCCL_ROW = re.compile(r"(?m)^\s*(?:\[\d+\])?\s*\d+\s+\d+\s+(?:float|half|bfloat16|double|u?int(?:8|32|64)|f8e\w+)\s")


def detect_perf_format(text: str, source: str = "") -> str | None:
    """The kind of perf output ("iperf3", "perftest", "nccl-tests") from its shape (or, failing that, the item's
    name: `cmd:perf-all_reduce_perf`); None if none of them."""
    head = text.lstrip()[:200_000]
    if head.startswith("{"):
        return "iperf3"
    if "#bytes" in head or re.search(r"(?m)^\s*\S.* (?:BW|Latency) Test\s*$", head):
        return "perftest"
    if "busbw" in head or "Avg bus bandwidth" in head or _NCCL_ROW.search(head) or ("_perf" in source and head):
        return "nccl-tests"
    return None


def _rate_gbps(hc: HostCapture, device: str | None, port: int | None) -> tuple[float | None, int | None]:
    if not device:
        return None, port
    items = hc.matching(f"/sys/class/infiniband/{device}/ports/*/rate")
    if port is None and len(items) == 1:
        port = int(items[0].source.split("/")[-2])
    text = hc.text(f"/sys/class/infiniband/{device}/ports/{port}/rate") if port is not None else None
    match = re.match(r"\s*([0-9]+(?:\.[0-9]+)?) Gb/sec", text or "")
    return (float(match.group(1)) if match else None), port


def perf_records(hc: HostCapture) -> list[PerfRecord]:
    """The host's `cmd:perf-*` items, parsed by their shape; perftest ports get their sysfs link rate.
    Memoized on the host while it is analyzed: both the samples and the rule read them."""
    if "perf_records" not in hc.cache:
        hc.cache["perf_records"] = _perf_records(hc)
    return hc.cache["perf_records"]


def _perf_records(hc: HostCapture) -> list[PerfRecord]:
    records = []
    for item in hc.matching("cmd:perf-*"):
        if item.source.startswith(PROBE_ITEM_PREFIXES):
            continue  # the probe's: judged against the pairs and peers (analysis.probe), which these rules lack
        text = hc.text(item.source)
        kind = detect_perf_format(text or "", item.source)
        if kind == "iperf3":
            records.append(PerfRecord(hc.host, item.source, parse_iperf3(text)))
        elif kind == "nccl-tests":
            named = re.search(r"([a-z]+(?:_[a-z]+)*)_perf", item.source)
            records.append(PerfRecord(hc.host, item.source, parse_nccl_tests(text, named and named.group(1))))
        elif kind == "perftest":
            result = parse_perftest(text)
            rate, result.port = _rate_gbps(hc, result.device, result.port)
            records.append(PerfRecord(hc.host, item.source, result, rate))
    return records


def samples(hc: HostCapture) -> list[MetricSample]:
    return perf_samples(perf_records(hc))


def perf_rule(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Rule entry point: the per-result perf findings of one host's captured perf outputs."""
    return perf_findings(perf_records(hc))


RULES = [perf_rule]
