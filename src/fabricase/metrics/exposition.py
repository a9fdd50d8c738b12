"""A capture, its findings, samples and placements (and the tracker's open escalations) as Prometheus metric
families, under the stable names of metrics/names.py.

Pure, except `exported_samples`, which reads each host's items once more. The mapping from normalized samples
(docs/counters.md) to metric names is an explicit table: a sample not in it is not exported, so a new counter
in the analysis never renames or floods the exported set.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from fabricase.metrics.names import METRICS, MetricDef, metric_def
from fabricase.models import Capture, Finding, HostStatus, MetricSample, Placement, Severity

if TYPE_CHECKING:
    from fabricase.diagnosis import Diagnosis

__all__ = [
    "COUNTERS",
    "GAUGES",
    "FamiliesCollector",
    "Series",
    "capture_families",
    "capture_series",
    "component_labels",
    "escalation_series",
    "exported_samples",
    "families",
    "finding_series",
    "is_exported",
    "registry_of",
    "sample_series",
    "suspect_series",
]

PRIORITIES = range(8)


@dataclass(frozen=True)
class CounterSpec:
    """A normalized counter sample exported as `<base>_per_second` (its rate) and `<base>_total` (its value)."""

    base: str
    scale: float = 1.0
    labels: tuple[tuple[str, str], ...] = ()  # fixed labels, e.g. direction and priority


@dataclass(frozen=True)
class GaugeSpec:
    """A gauge sample exported as `name`, its value passed through `convert` (None: not exported)."""

    name: str
    convert: Callable[[MetricSample], float | None] = lambda s: s.value
    labels: tuple[tuple[str, str], ...] = ()


def _scaled(factor: float) -> Callable[[MetricSample], float | None]:
    return lambda s: None if s.value is None else s.value * factor


_RDMA_ACTIVE = 4  # /sys/class/infiniband/.../state "4: ACTIVE"
# Prometheus base units are bytes: a Gb/s (link rates, perftest, iperf3) is 1e9 / 8 bytes per second.
_GBIT = 1e9 / 8

# (component family, sample metric) -> how it is exported
COUNTERS: dict[tuple[str, str], CounterSpec] = {
    **{("rdma", metric): CounterSpec(f"fabricase_rdma_{base}") for metric, base in (
        ("phy.symbol_errors_uncorrected", "symbol_errors"), ("link.down_events", "link_down_events"),
        ("link.error_recovery", "link_error_recoveries"), ("link.integrity_errors", "link_integrity_errors"),
        ("rx.errors", "receive_errors"), ("rx.remote_physical_errors", "receive_remote_physical_errors"),
        ("rx.buffer_overrun", "receive_buffer_overruns"), ("tx.discards", "transmit_discards"),
        ("rdma.ack_timeout", "ack_timeouts"), ("rdma.out_of_sequence", "out_of_sequence_packets"),
        ("rdma.seq_err_nak", "sequence_error_naks"), ("rdma.retransmits", "retransmitted_packets"),
        ("rdma.transport_retries_exceeded", "transport_retries_exceeded"),
        ("rdma.rnr_retry_exceeded", "rnr_retries_exceeded"), ("rx.bytes", "receive_bytes"),
        ("tx.bytes", "transmit_bytes"),
    )},
    **{("netdev", metric): CounterSpec(f"fabricase_netdev_{base}") for metric, base in (
        ("rx_errors", "receive_errors"), ("tx_errors", "transmit_errors"), ("rx_crc_errors", "receive_crc_errors"),
        ("rx_dropped", "receive_dropped"), ("tx_dropped", "transmit_dropped"), ("carrier_changes", "carrier_changes"),
        ("rx_bytes", "receive_bytes"), ("tx_bytes", "transmit_bytes"),
        ("phy.symbol_errors_uncorrected", "symbol_errors"), ("phy.fcs_errors", "fcs_errors"),
        ("link.down_events", "link_down_events"), ("phy.fec_uncorrectable_blocks", "fec_uncorrectable_blocks"),
        ("phy.fec_corrected_bits", "fec_corrections"), ("rx.discards_nobuf_port", "receive_port_discards"),
        ("rx.discards_nobuf_host", "receive_host_discards"), ("tx.discards", "transmit_discards"),
        ("pfc.pause_storm_events", "pause_storm_events"), ("ecn.rx_marked", "ecn_marked_packets"),
    )},
    **{("netdev", f"pause.{d}_frames"): CounterSpec("fabricase_netdev_pause_frames", labels=(("direction", d),))
       for d in ("rx", "tx")},
    **{("netdev", f"pfc.{d}_pause_us.p{p}"): CounterSpec("fabricase_pfc_pause_seconds", 1e-6,
                                                          (("direction", d), ("priority", str(p))))
       for d in ("rx", "tx") for p in PRIORITIES},
    **{("netdev", f"pfc.{d}_pause_frames.p{p}"): CounterSpec("fabricase_pfc_pause_frames",
                                                              labels=(("direction", d), ("priority", str(p))))
       for d in ("rx", "tx") for p in PRIORITIES},
    **{("nvlink", f"nvlink.{base}"): CounterSpec(f"fabricase_nvlink_{base}")
       for base in ("replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors", "ecc_data_errors")},
}  # fmt: skip

GAUGES: dict[tuple[str, str], GaugeSpec] = {
    ("rdma", "link.state"): GaugeSpec("fabricase_link_up",
                                      lambda s: None if s.value is None else float(s.value == _RDMA_ACTIVE)),
    ("rdma", "link.speed_gbps"): GaugeSpec("fabricase_link_speed_bytes_per_second", _scaled(_GBIT)),
    ("rdma", "link.width"): GaugeSpec("fabricase_link_width_lanes"),
    ("netdev", "carrier"): GaugeSpec("fabricase_link_up"),
    ("netdev", "link.detected"): GaugeSpec("fabricase_link_up"),
    ("netdev", "speed"): GaugeSpec("fabricase_link_speed_bytes_per_second", _scaled(_GBIT / 1000)),
    ("netdev", "link.speed_gbps"): GaugeSpec("fabricase_link_speed_bytes_per_second", _scaled(_GBIT)),
    ("netdev", "link.lanes"): GaugeSpec("fabricase_link_width_lanes"),
    ("netdev", "mtu"): GaugeSpec("fabricase_netdev_mtu_bytes"),
    ("netdev", "phy.ber_pre_fec"): GaugeSpec("fabricase_netdev_bit_error_ratio", labels=(("stage", "pre_fec"),)),
    ("netdev", "phy.ber_post_fec"): GaugeSpec("fabricase_netdev_bit_error_ratio", labels=(("stage", "post_fec"),)),
    ("netdev", "module.temperature_c"): GaugeSpec("fabricase_module_temperature_celsius"),
    ("nvlink", "nvlink.link_state"): GaugeSpec("fabricase_nvlink_up"),
    ("nvlink", "nvlink.link_speed_gbps"): GaugeSpec("fabricase_nvlink_speed_bytes_per_second", _scaled(1e9)),
    ("gpu", "nvlink.links_active"): GaugeSpec("fabricase_gpu_nvlinks_active"),
}  # fmt: skip

# Perf results: the component is rdma:<dev>/<port> (perftest) or host; any family.
PERF: dict[str, GaugeSpec] = {
    "perf.rdma_bw_gbps": GaugeSpec("fabricase_perf_rdma_bandwidth_bytes_per_second", _scaled(_GBIT)),
    "perf.rdma_msg_rate_mpps": GaugeSpec("fabricase_perf_rdma_messages_per_second", _scaled(1e6)),
    "perf.rdma_lat_typical_us": GaugeSpec("fabricase_perf_rdma_latency_seconds", _scaled(1e-6),
                                          (("stat", "typical"),)),
    "perf.rdma_lat_p99_us": GaugeSpec("fabricase_perf_rdma_latency_seconds", _scaled(1e-6), (("stat", "p99"),)),
    "perf.nccl_busbw_gbs": GaugeSpec("fabricase_perf_nccl_bus_bandwidth_bytes_per_second", _scaled(1e9)),
    "perf.nccl_avg_busbw_gbs": GaugeSpec("fabricase_perf_nccl_average_bus_bandwidth_bytes_per_second",
                                         _scaled(1e9)),
    "perf.nccl_wrong": GaugeSpec("fabricase_perf_nccl_wrong_elements"),
    "perf.tcp_received_gbps": GaugeSpec("fabricase_perf_tcp_throughput_bytes_per_second", _scaled(_GBIT),
                                        (("direction", "received"),)),
    "perf.tcp_sent_gbps": GaugeSpec("fabricase_perf_tcp_throughput_bytes_per_second", _scaled(_GBIT),
                                    (("direction", "sent"),)),
    "perf.tcp_retransmits": GaugeSpec("fabricase_perf_tcp_retransmitted_segments"),
}  # fmt: skip


class Series:
    """Values by metric name and label set, checked against the metric's declared labels."""

    def __init__(self) -> None:
        self.values: dict[str, dict[tuple[str, ...], float]] = {}

    def _key(self, name: str, labels: dict[str, str]) -> tuple[str, ...]:
        wanted = metric_def(name).labels
        unknown = set(labels) - set(wanted)
        if unknown:
            raise ValueError(f"{name} has no label {sorted(unknown)[0]!r}")
        return tuple(str(labels.get(k) or "") for k in wanted)

    def set(self, name: str, value: float, **labels: str) -> None:
        """The value of one series; a second value for the same series keeps the larger (the worse one)."""
        by_labels = self.values.setdefault(name, {})
        key = self._key(name, labels)
        by_labels[key] = max(value, by_labels.get(key, value))

    def add(self, name: str, value: float, **labels: str) -> None:
        by_labels = self.values.setdefault(name, {})
        key = self._key(name, labels)
        by_labels[key] = by_labels.get(key, 0.0) + value

    def update(self, other: Series) -> Series:
        for name, by_labels in other.values.items():
            self.values.setdefault(name, {}).update(by_labels)
        return self


def component_labels(component: str) -> dict[str, str]:
    """Labels of a component name (docs/findings.md): rdma:mlx5_3/1 -> device, port; netdev:eth2 -> device;
    nvlink:<gpu>/<link> -> gpu, link; gpu:<index> -> gpu; pcie:<address> and nvswitch:<id> -> device."""
    family, _, rest = component.partition(":")
    if family == "rdma":
        device, _, port = rest.partition("/")
        return {"device": device, "port": port}
    if family in ("netdev", "pcie", "nvswitch"):
        return {"device": rest}
    if family == "nvlink":
        gpu, _, link = rest.partition("/")
        return {"gpu": gpu, "link": link}
    if family == "gpu":
        return {"gpu": rest}
    return {}


def _labels_for(name: str, host: str, component: str, fixed: tuple[tuple[str, str], ...]) -> dict[str, str]:
    wanted = metric_def(name).labels
    labels = {"host": host, **component_labels(component), **dict(fixed)}
    return {k: v for k, v in labels.items() if k in wanted}


def is_exported(sample: MetricSample) -> bool:
    """Whether a sample is in the export tables (to keep only these in memory)."""
    key = (sample.component.split(":", 1)[0], sample.metric)
    return key in COUNTERS or key in GAUGES or sample.metric in PERF


def sample_series(samples: Iterable[MetricSample]) -> Series:
    """Rates, totals and gauges of the samples in the export tables; a missing value is no series (never 0)."""
    out = Series()
    for s in samples:
        key = (s.component.split(":", 1)[0], s.metric)
        if (counter := COUNTERS.get(key)) is not None:
            if s.rate is not None:
                name = f"{counter.base}_per_second"
                out.set(name, s.rate * counter.scale, **_labels_for(name, s.host, s.component, counter.labels))
            if s.value is not None:
                name = f"{counter.base}_total"
                out.set(name, s.value * counter.scale, **_labels_for(name, s.host, s.component, counter.labels))
            continue
        gauge = GAUGES.get(key)
        fixed: tuple[tuple[str, str], ...] = ()
        if gauge is None and (gauge := PERF.get(s.metric)) is not None:
            fixed = (("test", (s.source or "").removeprefix("cmd:").removeprefix("perf-")),)
        if gauge is not None and (value := gauge.convert(s)) is not None:
            out.set(gauge.name, value, **_labels_for(gauge.name, s.host, s.component, (*gauge.labels, *fixed)))
    return out


def _epoch(created_at: str) -> float | None:
    try:
        moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def capture_series(capture: Capture, placements: Iterable[Placement] = ()) -> Series:
    """When the capture was taken, each host's capture status and where each placed host sits."""
    out = Series()
    if (stamp := _epoch(capture.created_at)) is not None:
        out.set("fabricase_capture_timestamp_seconds", stamp)
    if capture.interval_s:
        out.set("fabricase_capture_interval_seconds", capture.interval_s)
    for status in HostStatus:
        out.set("fabricase_capture_hosts", sum(h.status == status for h in capture.hosts), status=str(status))
    for h in capture.hosts:
        out.set("fabricase_host_capture_status", 1, host=h.host, status=str(h.status))
    captured = {h.host for h in capture.hosts}
    for p in placements:
        if p.host in captured:
            out.set("fabricase_host_info", 1, host=p.host, provider=p.provider, instance_id=p.instance_id or "",
                    instance_type=p.instance_type or "", zone=p.zone or "")
    return out


_EVENT_CODE = re.compile(r"s?xid_(\d+)$")


def _kernel_event_series(out: Series, f: Finding) -> None:
    """Xid / SXid counts from the kernel-log findings' evidence, by code and catalog class."""
    from fabricase.parsers.xid import sxid_info, xid_info

    xid = f.kind == "nvidia-xid"
    info = xid_info if xid else sxid_info
    where = f.component.partition(":")[2]
    for ev in f.evidence:
        if (m := _EVENT_CODE.match(ev.metric)) is None or not isinstance(ev.value, int | float):
            continue
        code = int(m.group(1))
        entry = info(code)
        labels = {"host": f.host or "", "code": str(code), "class": entry.component,
                  "catalog_severity": entry.severity}
        if xid:
            out.set("fabricase_xid_events", float(ev.value), gpu=where, **labels)
        else:
            out.set("fabricase_nvswitch_sxid_events", float(ev.value), device=where, **labels)


def finding_series(findings: Iterable[Finding]) -> Series:
    """One series per finding (kind, severity, host, component), its confidence, counts per severity, and the
    Xid/SXid events the kernel-log findings counted."""
    out = Series()
    for severity in Severity:
        out.add("fabricase_findings", 0, severity=str(severity))
    for f in findings:
        labels = {"kind": f.kind, "severity": str(f.severity), "host": f.host or "", "component": f.component}
        out.add("fabricase_findings", 1, severity=str(f.severity))
        out.set("fabricase_finding", 1, **labels)
        if f.confidence is not None:
            out.set("fabricase_finding_confidence", f.confidence, **labels)
        if f.kind in ("nvidia-xid", "nvswitch-sxid"):
            _kernel_event_series(out, f)
    return out


def suspect_series(diagnosis: Diagnosis) -> Series:
    """One series per suspect (docs/diagnosis.md): host (empty for a shared component), its primary component,
    verdict, owner and severity. What an alert on "something to repair" reads, instead of raw findings."""
    out = Series()
    for s in diagnosis.suspects:
        out.set("fabricase_suspect", 1, host=s.host or "", component=s.components[0] if s.components else s.unit,
                verdict=s.verdict, owner=s.owner, severity=str(s.severity))
    return out


def escalation_series(tracked: Iterable, now: datetime) -> Series:
    """Open escalations (the tracker's overview(state="open"), tracker.records.Tracked) per provider and state,
    the age of each provider's oldest, and how many are stale."""
    from fabricase.tracker.records import parse_iso

    out = Series()
    oldest: dict[str, float] = {}
    for t in tracked:
        esc = t.escalation
        if not esc.state.is_open:
            continue
        out.add("fabricase_escalations_open", 1, provider=esc.provider, state=str(esc.state))
        out.add("fabricase_escalation_stale", 1 if t.stale else 0, provider=esc.provider)
        created = parse_iso(esc.created_at)
        if created is not None:
            age = max((now - created).total_seconds(), 0.0)
            oldest[esc.provider] = max(age, oldest.get(esc.provider, 0.0))
    for provider, age in oldest.items():
        out.set("fabricase_escalation_oldest_age_seconds", age, provider=provider)
    return out


def families(series: Series) -> list[Metric]:
    """Metric families for the series, in the documented order, series sorted by labels (same input, same text)."""
    out: list[Metric] = []
    for m in METRICS:
        by_labels = series.values.get(m.name)
        if not by_labels:
            continue
        family = _family(m)
        for labels in sorted(by_labels):
            family.add_metric(list(labels), by_labels[labels])
        out.append(family)
    return out


def _family(m: MetricDef) -> Metric:
    cls = CounterMetricFamily if m.type == "counter" else GaugeMetricFamily
    return cls(m.family, m.help, labels=list(m.labels))


def exported_samples(capture: Capture) -> Iterator[MetricSample]:
    """Every host's samples in the export tables, host by host, each host's reads released after it."""
    from fabricase.analysis import host_samples

    for hc in capture.hosts:
        try:
            yield from [s for s in host_samples(hc) if is_exported(s)]
        finally:
            hc.release()


def capture_families(capture: Capture, findings: Iterable[Finding], samples: Iterable[MetricSample],
                     placements: Iterable[Placement] = (), escalations: Series | None = None,
                     diagnosis: Diagnosis | None = None) -> list[Metric]:
    """Everything `fabricase export` writes for one capture (its suspects when given the diagnosis)."""
    series = capture_series(capture, placements).update(sample_series(samples)).update(finding_series(findings))
    if diagnosis is not None:
        series.update(suspect_series(diagnosis))
    if escalations is not None:
        series.update(escalations)
    return families(series)


class FamiliesCollector(Collector):
    """A collector that serves the families it was last given (watch swaps them each round)."""

    def __init__(self, current: list[Metric] | None = None) -> None:
        self.current = list(current or [])

    def collect(self) -> Iterator[Metric]:
        yield from self.current

    def describe(self) -> list[Metric]:
        return []  # families change between rounds: no registration-time check of names


def registry_of(collector: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
