"""The Ethernet side of RoCE: ethtool counters normalized across drivers (docs/counters-ethernet.md), link and
module gauges, and the rules phy-errors, pfc-storm, nic-discards and link-speed-downshift."""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from typing import NamedTuple

from fabricase.analysis._items import HostItems, by_family, per_samples
from fabricase.analysis.rates import counter_delta, increase_limit, physical_max_rate
from fabricase.models import Evidence, Finding, HostCapture, MetricSample, Severity
from fabricase.parsers.ethtool import (
    parse_ethtool_driver,
    parse_ethtool_fec,
    parse_ethtool_link,
    parse_ethtool_module,
    parse_ethtool_stats,
    split_sections,
)
from fabricase.parsers.sysfs import parse_sysfs_str

__all__ = ["ETHTOOL_MAP", "PAUSE_WRAP_LIMIT", "PFC_PAUSE_SHARE", "RULES", "link_speed_downshift", "nic_discards",
           "pfc_storm", "phy_errors", "samples"]

STATS, LINK, FEC, DRIVER, MODULE = (f"cmd:ethtool-{k}" for k in ("stats", "link", "fec", "driver", "module"))
_P = range(8)


def _per_prio(*templates: str) -> tuple[str, ...]:
    return tuple(t.format(p=p) for t in templates for p in _P)


# normalized metric -> alternatives, tried in order: the first with any counter present is used, its present counters
# summed. "{p}" makes one metric per priority, "<metric>.p<p>". Vendors: mlx5, bnxt_en, ice (".nic"), i40e ("port.").
_TEMPLATES: dict[str, tuple[tuple[str, ...], ...]] = {
    "link.down_events": (("link_down_events_phy",), ("link_down_events",)),
    "phy.symbol_errors_uncorrected": (("rx_pcs_symbol_err_phy",), ("rx_pcs_symbol_err",)),
    "phy.symbol_error_frames": (("rx_symbol_err_phy",),),
    "phy.fcs_errors": (("rx_crc_errors_phy",), ("rx_fcs_err_frames",), ("rx_crc_errors.nic",), ("port.rx_crc_errors",)),
    "phy.fec_corrected_bits": (("rx_corrected_bits_phy",), ("rx_corrected_bits",)),
    "phy.fec_corrected_blocks": (("rx_fec_corrected_blocks",),),
    "phy.fec_uncorrectable_blocks": (("rx_fec_uncorrectable_blocks",),),
    "phy.rx_bits": (("rx_bits_phy",), ("rx_bits",)),
    "rx.discards_nobuf_port": (("rx_discards_phy",), _per_prio("rx_discard_packets_cos{p}"), ("rx_dropped.nic",),
                               ("port.rx_dropped",)),
    "rx.discards_nobuf_host": (("rx_out_of_buffer", "dev_out_of_buffer", *_per_prio("rx_prio{p}_buf_discard")),
                               ("rx_total_ring_discards",)),
    "tx.discards": (("tx_discards_phy",), ("tx_stat_discard",)),
    "rx.buffer_overrun": (("rx_buffer_passed_thres_phy",), ("rx_buffer_passed_threshold",)),
    "pause.rx_frames": (("rx_pause_ctrl_phy",), ("rx_pause_frames",), ("link_xoff_rx.nic",), ("port.link_xoff_rx",)),
    "pause.tx_frames": (("tx_pause_ctrl_phy",), ("tx_pause_frames",), ("link_xoff_tx.nic",), ("port.link_xoff_tx",)),
    "pfc.pause_storm_events": (("tx_pause_storm_warning_events", "tx_pause_storm_error_events"),
                               ("continuous_pause_events", "continuous_roce_pause_events")),
    "ecn.rx_marked": (("np_ecn_marked_roce_packets",), ("rx_ecn_marked_pkts",), _per_prio("rx_prio{p}_marked")),
    "cnp.sent": (("np_cnp_sent",), ("tx_cnp_pkts",)),
    "cnp.handled": (("rp_cnp_handled",), ("rx_cnp_pkts",)),
    "pcie.nic_signal_integrity": (("rx_pci_signal_integrity", "tx_pci_signal_integrity"),),
    "pfc.rx_pause_frames.p{p}": (("rx_prio{p}_pause",), ("rx_pfc_ena_frames_pri{p}",), ("rx_priority_{p}_xoff.nic",),
                                 ("port.rx_priority_{p}_xoff",)),
    "pfc.tx_pause_frames.p{p}": (("tx_prio{p}_pause",), ("tx_pfc_ena_frames_pri{p}",), ("tx_priority_{p}_xoff.nic",),
                                 ("port.tx_priority_{p}_xoff",)),
    "pfc.rx_pause_us.p{p}": (("rx_prio{p}_pause_duration",), ("pfc_pri{p}_rx_duration_us",)),
    "pfc.tx_pause_us.p{p}": (("tx_prio{p}_pause_duration",), ("pfc_pri{p}_tx_duration_us",)),
    "pfc.rx_transitions.p{p}": (("rx_prio{p}_pause_transition",), ("pfc_pri{p}_rx_transitions",)),
    "pfc.tx_transitions.p{p}": (("pfc_pri{p}_tx_transitions",),),
    "ecn.rx_marked.p{p}": (("rx_prio{p}_marked",),),
}
ETHTOOL_MAP: dict[str, tuple[tuple[str, ...], ...]] = {
    metric.format(p=p): tuple(tuple(name.format(p=p) for name in alt) for alt in alternatives)
    for metric, alternatives in _TEMPLATES.items()
    for p in (_P if "{p}" in metric else (None,))
}

# Per-queue and per-ring counters (mlx5 rx3_packets, ch0_events; bnxt "[0]: ..."; i40e rx-0.rx_bytes; ena
# queue_0_tx_cnt): thousands on a many-channel NIC, kept in the capture but not turned into samples.
_PER_QUEUE = re.compile(r"(?:rx|tx|ch|xdp|ptp|qos_tx)\d+_|\[\d+\]|(?:rx|tx)-\d+\.|queue_\d+_|(?:rx|tx)_queue_\d+_")
PHY_ERROR_METRICS = ("phy.symbol_errors_uncorrected", "phy.fcs_errors", "phy.symbol_error_frames",
                     "phy.fec_uncorrectable_blocks")
DISCARD_METRICS = ("rx.discards_nobuf_port", "rx.discards_nobuf_host", "tx.discards")
STORM_METRIC = "pfc.pause_storm_events"
PAUSE_US_METRICS = {direction: tuple(f"pfc.{direction}_pause_us.p{p}" for p in _P) for direction in ("rx", "tx")}
# Every metric the rules read from _ports (the checked metrics, the BER, and the raw counters _named spells them
# with): a rule that reads another metric adds it here.
_RULE_READS = frozenset({
    *PHY_ERROR_METRICS, *DISCARD_METRICS, STORM_METRIC, "phy.ber_post_fec", *PAUSE_US_METRICS["rx"],
    *PAUSE_US_METRICS["tx"],
    *(f"raw:{raw}" for metric in (*PHY_ERROR_METRICS, *DISCARD_METRICS, STORM_METRIC)
      for alt in ETHTOOL_MAP[metric] for raw in alt),
})
# Heuristic (not in telemetry.md e.2): a priority paused for a tenth of the interval is a congestion spreading
# problem a fabric engineer wants to see; lossless RoCE fabrics that work show pause well below 1%.
PFC_PAUSE_SHARE = 0.10
# A pause time that "wrapped" to more than this multiple of the interval is a driver reload read as a 32-bit wrap:
# a priority cannot be paused longer than the time that passed (beyond the few ms ethtool runs after the mark).
PAUSE_WRAP_LIMIT = 1.5


def _unit(metric: str) -> str:
    if metric.startswith(("pfc.rx_pause_us", "pfc.tx_pause_us")):
        return "us"
    for word, unit in (("bits", "bits"), ("events", "events"), ("blocks", "blocks"), ("pause_frames", "frames"),
                       ("pause.", "frames"), ("transitions", "transitions"), ("symbol_errors", "symbols"),
                       ("frames", "frames"), ("fcs", "frames"), ("signal_integrity", "errors")):
        if word in metric:
            return unit
    return "packets"


def _sum(counters: dict[str, int] | None, names: tuple[str, ...]) -> int | None:
    if counters is None or not all(n in counters for n in names):
        return None
    return sum(counters[n] for n in names)


def normalize(c0: dict[str, int] | None, c1: dict[str, int] | None) -> dict[str, tuple[str, ...]]:
    """{normalized metric: the raw counters behind it} for one port, chosen from its latest snapshot."""
    latest = c1 if c1 else (c0 or {})
    return dict(_chosen(tuple(latest)))


@functools.lru_cache(maxsize=256)  # every port of a fleet has one of a few drivers' counter layouts
def _chosen(latest: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """normalize's choice for a port whose latest counters have these names, as (metric, raw counters) pairs."""
    present = frozenset(latest)
    chosen = {}
    for metric, alternatives in ETHTOOL_MAP.items():
        for alt in alternatives:
            found = tuple(n for n in alt if n in present)
            if found:
                chosen[metric] = found
                break
    return tuple(chosen.items())


def _sections(items: HostItems, source: str, snapshot: int = 0) -> dict[str, str]:
    return split_sections(items.text(source, snapshot))[0]


@functools.lru_cache(maxsize=1 << 14)  # every port of a fleet has the same driver counter names
def _per_queue_cached(name: str) -> bool:
    return _PER_QUEUE.match(name) is not None


def _per_queue(name: str) -> bool:
    """A per-queue counter (rx3_packets, ch5_events): the analysis skips them."""
    return _per_queue_cached(name) if len(name) <= 100 else _PER_QUEUE.match(name) is not None


@functools.lru_cache(maxsize=256)  # keyed by the two snapshots' counter names: a fleet has a few layouts
def _raw_metrics(names0: tuple[str, ...], names1: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(driver name, `raw:<name>`) of every port-level counter of either snapshot, in name order."""
    return tuple((name, f"raw:{name}") for name in sorted({*names0, *names1}) if not _per_queue(name))


class _PortLayout(NamedTuple):
    """What a port's samples are, for one pair of counter layouts: its normalized metrics as (metric, raw counters,
    unit), then its port-level raw counters and their `raw:<name>` metrics, in sample order."""

    normalized: tuple[tuple[str, tuple[str, ...], str], ...]
    units: tuple[str, ...]  # the normalized metrics' units, the key of their bounds (_unit_bounds)
    raw_names: tuple[str, ...]
    raw_metrics: tuple[str, ...]


@functools.lru_cache(maxsize=256)  # keyed by the two snapshots' counter names: a fleet has a few layouts
def _port_layout(names0: tuple[str, ...], names1: tuple[str, ...]) -> _PortLayout:
    """normalize's choice, _unit and _raw_metrics for a port with these counter names, worked out once per layout
    rather than once per port."""
    normalized = tuple((metric, raws, _unit(metric)) for metric, raws in _chosen(names1 if names1 else names0))
    raw = _raw_metrics(names0, names1)
    return _PortLayout(normalized, tuple(unit for _, _, unit in normalized), tuple(name for name, _ in raw),
                       tuple(metric for _, metric in raw))


def _reading(counters: dict[str, int], raws: tuple[str, ...]) -> int | None:
    """_sum of a normalized metric's raw counters: None unless every one of them was read."""
    return sum(counters[n] for n in raws) if all(n in counters for n in raws) else None


def _sample(host: str, component: str, metric: str, v0: int | None, v1: int | None, unit: str,
            interval: float | None, bounds: tuple[float | None, float | None]) -> MetricSample:
    """counter_delta's sample, with its common case inlined (both readings, no drop): a fleet has millions.
    bounds: (the largest possible increase, the counter's physical maximum rate) of the unit on this port."""
    limit, max_rate = bounds
    if v0 is not None and v1 is not None and v1 >= v0:
        delta = v1 - v0
        if limit is not None and delta > limit:
            return MetricSample(host, component, metric, v1, unit, STATS, None, None, "implausible")
        rate = delta / interval if interval is not None and math.isfinite(interval) and interval > 0 else None
        return MetricSample(host, component, metric, v1, unit, STATS, delta, rate, None)
    d = counter_delta(v0, v1, interval, max_rate=max_rate)
    return MetricSample(host, component, metric, v1 if v1 is not None else v0, unit, STATS, d.delta, d.rate, d.note)


def _bounds(unit: str, interval: float | None, line_gbps: float | None) -> tuple[float | None, float | None]:
    fastest = physical_max_rate(unit, line_gbps)
    return increase_limit(interval, fastest), fastest


@functools.lru_cache(maxsize=1024)  # a fleet has a few layouts, intervals and line rates
def _unit_bounds(units: tuple[str, ...], interval: float | None,
                 line_gbps: float | None) -> tuple[tuple[float | None, float | None], ...]:
    """_bounds of each unit, worked out once for every port with these units, interval and line rate."""
    return tuple(_bounds(unit, interval, line_gbps) for unit in units)


def _normalized_samples(host: str, component: str, layout: _PortLayout, r0: dict[str, int], r1: dict[str, int],
                        interval: float | None, line_gbps: float | None) -> list[MetricSample]:
    """The normalized metrics' samples, ~20 a port, with _sample's common case inlined."""
    rate_ok = interval is not None and math.isfinite(interval) and interval > 0
    out = []
    for (metric, raws, unit), bounds in zip(layout.normalized, _unit_bounds(layout.units, interval, line_gbps),
                                            strict=True):
        if len(raws) == 1:
            v0, v1 = r0.get(raws[0]), r1.get(raws[0])
        else:
            v0, v1 = _reading(r0, raws), _reading(r1, raws)
        if v0 is not None and v1 is not None and v1 >= v0 and (bounds[0] is None or v1 - v0 <= bounds[0]):
            delta = v1 - v0
            out.append(MetricSample(host, component, metric, v1, unit, STATS, delta,
                                    delta / interval if rate_ok else None, None))  # type: ignore[operator]
        else:
            out.append(_sample(host, component, metric, v0, v1, unit, interval, bounds))
    return out


def _raw_samples(host: str, component: str, layout: _PortLayout, r0: dict[str, int], r1: dict[str, int],
                 interval: float | None, line_gbps: float | None) -> list[MetricSample]:
    """The `raw:<name>` samples, ~150 a port: one comprehension over the layout's names. A "count" has no physical
    maximum rate (rates.physical_max_rate), so where the interval is valid the common case needs no limit check."""
    names, metrics, bounds = layout.raw_names, layout.raw_metrics, _bounds("count", interval, line_gbps)
    readings = zip(metrics, map(r0.get, names), map(r1.get, names), strict=True)
    if bounds[0] is not None or interval is None or not math.isfinite(interval) or interval <= 0:
        return [_sample(host, component, m, a, b, "count", interval, bounds) for m, a, b in readings]
    return [MetricSample(host, component, m, b, "count", STATS, d, d / interval, None)
            if a is not None and b is not None and (d := b - a) >= 0
            else _sample(host, component, m, a, b, "count", interval, bounds)
            for m, a, b in readings]


def _counter_samples(hc: HostCapture, port: str, c0: dict | None, c1: dict | None,
                     line_gbps: float | None = None) -> list[MetricSample]:
    component, interval, host = f"netdev:{port}", hc.interval_s, hc.host
    r0, r1 = c0 or {}, c1 or {}
    layout = _port_layout(tuple(r0), tuple(r1))
    out = _normalized_samples(host, component, layout, r0, r1, interval, line_gbps)
    by_metric = {s.metric: s for s in out}
    bits = by_metric.get("phy.rx_bits")
    out += _raw_samples(host, component, layout, r0, r1, interval, line_gbps)
    if bits is not None and bits.delta:
        for ber, errors in (("phy.ber_post_fec", "phy.symbol_errors_uncorrected"),
                            ("phy.ber_pre_fec", "phy.fec_corrected_bits")):
            numerator = by_metric.get(errors)
            if numerator is not None and numerator.delta is not None:
                out.append(MetricSample(hc.host, component, ber, numerator.delta / bits.delta, "ratio", STATS))
    return out


def _gauge_samples(hc: HostCapture, items: HostItems) -> list[MetricSample]:
    out = []
    for port, text in _sections(items, LINK).items():
        link, component = parse_ethtool_link(text), f"netdev:{port}"
        if link.speed_mbps is not None:
            out.append(MetricSample(hc.host, component, "link.speed_gbps", link.speed_mbps / 1000, "Gb/s", LINK))
        if link.lanes is not None:
            out.append(MetricSample(hc.host, component, "link.lanes", link.lanes, "lanes", LINK))
        if link.link_detected is not None:
            out.append(MetricSample(hc.host, component, "link.detected", int(link.link_detected), "flag", LINK))
    for port, text in _sections(items, FEC).items():
        active = parse_ethtool_fec(text).active
        if active is not None:  # a mode is a word, not a number: value None, the mode in note
            out.append(MetricSample(hc.host, f"netdev:{port}", "link.fec", None, "mode", FEC, note=active))
    for port, text in _sections(items, MODULE).items():
        module, component = parse_ethtool_module(text), f"netdev:{port}"
        for metric, value, unit in (("module.temperature_c", module.temperature_c, "C"),
                                    ("module.voltage_v", module.voltage_v, "V")):
            if value is not None:
                out.append(MetricSample(hc.host, component, metric, value, unit, MODULE))
        for direction, powers in (("rx", module.rx_power_mw), ("tx", module.tx_power_mw)):
            for lane, mw in sorted(powers.items()):
                metric = f"module.{direction}_power_mw.lane{lane}"
                out.append(MetricSample(hc.host, component, metric, mw, "mW", MODULE))
    return out


def samples(hc: HostCapture) -> list[MetricSample]:
    """Every ethtool metric of the host's physical ports, by port: normalized counters (value, delta, rate),
    `raw:<driver name>` for each port-level counter, derived BER, link and module gauges."""
    items = HostItems(hc)
    s0, s1 = _sections(items, STATS, 0), _sections(items, STATS, 1)
    speeds = {port: parse_ethtool_link(text).speed_mbps for port, text in _sections(items, LINK).items()}
    out: list[MetricSample] = []
    for port in sorted(set(s0) | set(s1)):
        c0 = parse_ethtool_stats(s0[port]) if port in s0 else None
        c1 = parse_ethtool_stats(s1[port]) if port in s1 else None
        mbps = speeds.get(port)  # the line rate bounds what a counter can count (rates.physical_max_rate)
        out += _counter_samples(hc, port, c0, c1, mbps / 1000 if mbps else None)
    return out + _gauge_samples(hc, items)


def _ports(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    """{port: {metric: sample}} of the ethtool samples, built once per host for every rule (shared: read only)."""
    return per_samples(hc, "ethernet_ports", samples, lambda: _group_ports(hc, samples))


def _group_ports(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    """Only the metrics the rules read (_RULE_READS): a port has ~170 ethtool samples and the rules look at ~40, so
    one cheap membership test per sample leaves the rest out of the per-port dicts."""
    reads, ports = _RULE_READS, defaultdict[str, dict[str, MetricSample]](dict)
    for s in [s for s in by_family(hc, samples).get("netdev:", ()) if s.metric in reads]:
        if s.component.startswith("netdev:") and s.source and s.source.startswith("cmd:ethtool-"):
            ports[s.component.removeprefix("netdev:")][s.metric] = s
    return {port: ports[port] for port in sorted(ports)}


def _grown(metrics: dict[str, MetricSample], name: str) -> MetricSample | None:
    s = metrics.get(name)
    return s if s is not None and s.delta is not None and s.delta > 0 else None


def _named(metrics: dict[str, MetricSample], sample: MetricSample) -> str:
    """The increase in the driver's own words: "rx_pcs_symbol_err_phy +120 (12/s)"."""
    raws = [r for alt in ETHTOOL_MAP.get(sample.metric, ()) for r in alt if _grown(metrics, f"raw:{r}")]
    parts = [metrics[f"raw:{r}"] for r in raws] or [sample]
    return ", ".join(f"{p.metric.removeprefix('raw:')} +{p.delta}" + (f" ({p.rate:.3g}/s)" if p.rate else "")
                     for p in parts)


def _within(hc: HostCapture) -> str:
    return f"in {hc.interval_s:g} s" if hc.interval_s else "between snapshots"


def _evidence(sample: MetricSample) -> Evidence:
    return Evidence(f"{sample.metric}.delta", sample.delta, sample.unit, 0, sample.source, 1)


def _counter_rule(hc: HostCapture, samples: list[MetricSample], metrics_checked: tuple[str, ...], kind: str,
                  severity: Severity, confidence: float, extra=None) -> list[Finding]:
    findings = []
    for port, metrics in _ports(hc, samples).items():
        grown = [s for name in metrics_checked if (s := _grown(metrics, name))]
        if not grown:
            continue
        summary = f"{port}: " + ", ".join(_named(metrics, s) for s in grown) + f" {_within(hc)}"
        evidence = [_evidence(s) for s in grown]
        if extra:
            summary, evidence = extra(metrics, summary, evidence)
        conf = 0.8 if any(s.note == "wrap" for s in grown) else confidence
        findings.append(Finding(kind, severity, hc.host, f"netdev:{port}", summary, evidence, conf))
    return findings


def _ber(metrics, summary, evidence):
    ber = metrics.get("phy.ber_post_fec")
    if ber is not None and ber.value:
        summary += f"; post-FEC BER {ber.value:.2g}"
        evidence.append(Evidence("phy.ber_post_fec", ber.value, "ratio", 1e-12, ber.source, 1))
    return summary, evidence


def phy_errors(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Uncorrected symbol errors, FCS errors or uncorrectable FEC blocks rose on a port: cable, transceiver, far end."""
    return _counter_rule(hc, samples, PHY_ERROR_METRICS, "phy-errors", Severity.MAJOR, 0.95, _ber)


def nic_discards(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """The NIC dropped packets for lack of port or host buffers, or discarded on transmit."""
    return _counter_rule(hc, samples, DISCARD_METRICS, "nic-discards", Severity.MINOR, 0.8)


def _impossible_wrap(paused: MetricSample, interval_s: float) -> bool:
    """A counter reset (v1 < v0) reads as a 32-bit wrap when v0 was in the counter's top quarter: for a pause time
    of 54-71 min since boot, a reload then looks like minutes of pause in a 5 s interval."""
    return paused.note == "wrap" and paused.delta > PAUSE_WRAP_LIMIT * interval_s * 1e6


def pfc_storm(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Pause-storm events, or a priority paused for more than PFC_PAUSE_SHARE of the interval."""
    findings, interval = [], hc.interval_s  # a property that works the interval out on each read
    for port, metrics in _ports(hc, samples).items():
        parts, evidence = [], []
        storm = _grown(metrics, STORM_METRIC)
        if storm:
            parts.append("pause storm: " + _named(metrics, storm))
            evidence.append(_evidence(storm))
        for direction, meaning in (("rx", "received: the network could not absorb this port's traffic"),
                                   ("tx", "sent: this host could not absorb the network's traffic")):
            for p, metric in zip(_P, PAUSE_US_METRICS[direction], strict=True):
                paused = _grown(metrics, metric)
                if paused is None or not interval or _impossible_wrap(paused, interval):
                    continue
                # ethtool runs a moment after the snapshot mark, so a short interval can hold more than itself
                share = min(paused.delta / (interval * 1e6), 1.0)
                if share > PFC_PAUSE_SHARE:
                    parts.append(f"priority {p} paused {share:.0%} of {interval:g} s by pause frames {meaning}")
                    evidence.append(_evidence(paused))
                    evidence.append(Evidence(f"pfc.{direction}_pause_share.p{p}", round(share, 4), "ratio",
                                             PFC_PAUSE_SHARE, STATS, 1))
        if parts:
            summary = f"{port}: " + "; ".join(parts)
            findings.append(Finding("pfc-storm", Severity.MAJOR, hc.host, f"netdev:{port}", summary, evidence, 0.9))
    return findings


def link_speed_downshift(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """A linked port slower than the fastest linked port of the same driver and PCI device id on the host."""
    items = HostItems(hc)
    links = {port: parse_ethtool_link(text) for port, text in _sections(items, LINK).items()}
    drivers = {port: parse_ethtool_driver(text).driver for port, text in _sections(items, DRIVER).items()}
    groups: dict[tuple, list[str]] = defaultdict(list)
    for port, link in links.items():
        if link.link_detected and link.speed_mbps:
            device = parse_sysfs_str(items.text(f"/sys/class/net/{port}/device/device"))
            groups[(drivers.get(port), device)].append(port)
    findings = []
    for (driver, _), ports in sorted(groups.items(), key=lambda kv: kv[1]):
        top = max(links[p].speed_mbps for p in ports)
        at_top = sum(links[p].speed_mbps == top for p in ports)
        for port in ports:
            link = links[port]
            if link.speed_mbps >= top:
                continue
            lanes = f", {link.lanes} lanes" if link.lanes else ""
            summary = (f"{port}: link at {link.speed_mbps / 1000:g} Gb/s{lanes}; {at_top} other "
                       f"{driver or 'same-driver'} port(s) on this host run at {top / 1000:g} Gb/s")
            evidence = [Evidence("link.speed_gbps", link.speed_mbps / 1000, "Gb/s", top / 1000, LINK, 0)]
            if link.lanes is not None:
                peer_lanes = {links[p].lanes for p in ports if links[p].speed_mbps == top} - {None}
                if len(peer_lanes) == 1:
                    evidence.append(Evidence("link.lanes", link.lanes, "lanes", peer_lanes.pop(), LINK, 0))
            confidence = 0.9 if at_top >= 2 else 0.6
            findings.append(Finding("link-speed-downshift", Severity.MAJOR, hc.host, f"netdev:{port}", summary,
                                    evidence, confidence))
    return findings


RULES = [phy_errors, pfc_storm, nic_discards, link_speed_downshift]
