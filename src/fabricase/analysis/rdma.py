"""RDMA ports of one host: normalized metrics (docs/counters.md) from sysfs and `rdma statistic show`, as deltas
and rates between snapshots 0 and 1, and the rules over them (docs/findings.md)."""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import NamedTuple

from fabricase.analysis._items import HostItems, per_samples
from fabricase.analysis.rates import Delta, counter_delta, physical_max_rate
from fabricase.analysis.stats import RATE_LIMIT_ALPHA, exceeds_rate_limit
from fabricase.errors import CaptureError
from fabricase.models import Evidence, Finding, HostCapture, MetricSample, Severity
from fabricase.parsers.ibtools import parse_rdma_statistic
from fabricase.parsers.rdma import (
    NORMALIZED,
    PMA_WIDTHS,
    RdmaPort,
    detect_vendor,
    normalize,
    parse_port_state,
    parse_rdma_port,
    pick_raw,
    saturated,
)  # fmt: skip

__all__ = [
    "IB_ROOT", "RATE_LIMITS", "RULES", "STATISTIC", "RateLimit", "load_ports", "rdma_counters_saturated",
    "rdma_link_flap", "rdma_port_down", "rdma_port_errors", "rdma_samples", "rdma_speed_downshift",
    "rdma_symbol_errors", "rdma_transport_errors", "samples",
]  # fmt: skip

Rule = Callable[[HostCapture, list[MetricSample]], list[Finding]]
IB_ROOT = "/sys/class/infiniband/"
STATISTIC = "cmd:rdma-statistic"
# Read in snapshot 0 only; carried into snapshot 1 so both records describe the same port.
_ONCE = ("link_layer", "gid_attrs/", "gids/")
SYMBOL_ERRORS_PER_HOUR = 120  # IBTA-derived ceiling quoted by NVSentinel (telemetry.md e.1)


class RateLimit(NamedTuple):
    """A fixed ceiling on a counter's rate, `per_unit` events per `unit` ("h", "min" or "s")."""

    per_unit: float
    unit: str

    @property
    def per_s(self) -> float:
        return self.per_unit / _SECONDS[self.unit]


_SECONDS = {"h": 3600.0, "min": 60.0, "s": 1.0}
# The rate limits the rules quote (telemetry.md e.1, e.2: NVSentinel's non-fatal alerts), by normalized metric.
# Each is decided by an exact Poisson test at RATE_LIMIT_ALPHA (exceeds_rate_limit), never by the point estimate:
# one symbol error in 17 s reads 212/h, yet a port at exactly 120/h shows that much 43% of the time.
RATE_LIMITS: dict[str, RateLimit] = {
    "phy.symbol_errors_uncorrected": RateLimit(SYMBOL_ERRORS_PER_HOUR, "h"),
    "link.error_recovery": RateLimit(5, "min"),  # each retrain stalls traffic 50 ms-2 s
    "rx.errors": RateLimit(10, "s"),  # port_rcv_errors
    "tx.discards": RateLimit(100, "s"),  # port_xmit_discards
    "rdma.ack_timeout": RateLimit(1, "s"),  # local_ack_timeout_err: may be a crashed remote rank
    "rdma.slow_restart": RateLimit(10, "s"),  # roce_slow_restart
}


def _split(source: str) -> tuple[str, int | None, str] | None:
    """/sys/class/infiniband/<dev>/ports/<p>/<rel> -> (dev, p, rel); device attributes -> (dev, None, rel)."""
    dev, _, tail = source[len(IB_ROOT) :].partition("/")
    if not dev or not tail:
        return None
    if not tail.startswith("ports/"):
        return dev, None, tail
    number, _, rel = tail[len("ports/") :].partition("/")
    return (dev, int(number), rel) if number.isdigit() and rel else None


def _merge_statistic(rec: RdmaPort, counters: dict[str, int] | None) -> None:
    """Counters sysfs could not give (EIO, or no hw_counters folder) taken from `rdma statistic show`."""
    if not counters:
        return  # parse_rdma_port already normalized the port and named its vendor
    for name, value in counters.items():
        if name not in rec.raw:
            rec.raw[name], rec.raw_sources[name] = value, STATISTIC
    rec.normalized = normalize(rec.raw)
    rec.vendor = rec.vendor or detect_vendor(rec.device, rec.raw)


def _ib_texts(hc: HostCapture) -> dict[tuple[str, int], str]:
    """Every /sys/class/infiniband item's text by (source, snapshot), in one pass over the items."""
    out: dict[tuple[str, int], str] = {}
    for it in hc.items:
        if it.kind != "file" or not it.source.startswith(IB_ROOT) or (it.source, it.snapshot) in out:
            continue
        try:
            data = hc.read(it)
        except (OSError, ValueError) as exc:
            raise CaptureError(f"cannot read captured item {it.source}: {exc}", where=f"{hc.host}:{it.path}") from exc
        out[(it.source, it.snapshot)] = data.decode("utf-8", errors="replace")
    return out


def load_ports(hc: HostCapture) -> list[tuple[RdmaPort, RdmaPort | None]]:
    """Every RDMA port as (snapshot-0 record, snapshot-1 record or None), by device then port."""
    items = HostItems(hc)
    files: dict[int, dict[tuple[str, int], dict[str, str]]] = {0: defaultdict(dict), 1: defaultdict(dict)}
    drivers: dict[str, str] = {}
    for (source, snap), text in _ib_texts(hc).items():
        parts = _split(source)
        if parts is None or snap not in (0, 1):
            continue
        dev, number, rel = parts
        if number is not None:
            files[snap][(dev, number)][rel] = text
        elif rel == "device/uevent" and (driver := re.search(r"^DRIVER=(\S+)", text, re.M)):
            drivers[dev] = driver.group(1)
    stats = [parse_rdma_statistic(items.text(STATISTIC, snap) or "").links for snap in (0, 1)]
    out = []
    for dev, number in sorted(files[0].keys() | files[1].keys()):
        f0, f1 = files[0].get((dev, number), {}), files[1].get((dev, number))
        if f1 is not None:
            f1 = {**{k: v for k, v in f0.items() if k.startswith(_ONCE)}, **f1}
        r0 = parse_rdma_port(dev, number, f0, drivers.get(dev))
        _merge_statistic(r0, stats[0].get((dev, number)))
        r1 = None
        if f1 is not None:
            r1 = parse_rdma_port(dev, number, f1, drivers.get(dev))
            _merge_statistic(r1, stats[1].get((dev, number)))
        out.append((r0, r1))
    return out


def _delta(name: str, rel: str, v0: int | None, v1: int | None, interval: float | None,
           max_rate: float | None = None) -> Delta:
    if rel.startswith("counters/") and name in PMA_WIDTHS and v0 is not None and v1 is not None and v1 < v0:
        return Delta(None, None, "reset")  # PortCounters saturate and are cleared, never wrap
    return counter_delta(v0, v1, interval, max_rate=max_rate)


def _source(rec: RdmaPort, name: str) -> str:
    rel = rec.raw_sources.get(name, "")
    return rel if rel.startswith("cmd:") else f"{IB_ROOT}{rec.device}/ports/{rec.port}/{rel}"


def _counter(hc: HostCapture, interval: float | None, comp: str, metric: str, unit: str, name: str, scale: int,
             r0: RdmaPort, r1: RdmaPort | None) -> MetricSample:
    latest = r1 if r1 is not None and name in r1.raw else r0
    v0, v1 = r0.raw.get(name), r1.raw.get(name) if r1 is not None else None
    rel = latest.raw_sources.get(name, "")
    fastest = physical_max_rate(unit, latest.rate_gbps)  # in the sample's unit; the raw counter counts 1/scale
    d = _delta(name, rel, v0, v1, interval, fastest / scale if fastest is not None else None)
    delta, rate, note = d.delta, d.rate, d.note
    value = latest.raw.get(name)
    if rel.startswith("counters/") and saturated(name, value):
        note = "saturated"  # increments past the maximum are lost: a zero delta proves nothing
        if v0 == v1:
            delta = rate = None
    return MetricSample(
        hc.host, comp, metric, value * scale if value is not None else None, unit, _source(latest, name),
        delta * scale if delta is not None else None, rate * scale if rate is not None else None, note,
    )


def _gauges(hc: HostCapture, comp: str, rec: RdmaPort, base: str, present: set[str]) -> list[MetricSample]:
    out = []
    if "state" in present:
        out.append(MetricSample(hc.host, comp, "link.state", rec.state_code, "state", base + "state",
                                note=rec.state))
    if "phys_state" in present:
        out.append(MetricSample(hc.host, comp, "link.phys_state", rec.phys_state_code, "state",
                                base + "phys_state", note=rec.phys_state))
    if "rate" in present:
        out.append(MetricSample(hc.host, comp, "link.speed_gbps", rec.rate_gbps, "Gb/s", base + "rate"))
        out.append(MetricSample(hc.host, comp, "link.width", rec.width, "lanes", base + "rate"))
    if rec.link_layer:
        out.append(MetricSample(hc.host, comp, "link.layer", None, "layer", base + "link_layer", note=rec.link_layer))
    if rec.vendor:  # from the PCI driver, the device name or the counter names: no single item says it
        out.append(MetricSample(hc.host, comp, "port.vendor", None, "vendor", None, note=rec.vendor))
    return out


def rdma_samples(hc: HostCapture) -> list[MetricSample]:
    """Per port (`rdma:<dev>/<port>`): gauges link.state / link.phys_state (code, name in note), link.speed_gbps,
    link.width; every normalized counter present; every raw counter as `raw:<name>`. Counters carry the latest
    value, delta, rate and note ("missing", "wrap", "reset", or "saturated" for a PortCounters field at its max).
    """
    samples: list[MetricSample] = []
    interval = hc.interval_s
    for r0, r1 in load_ports(hc):
        comp = f"rdma:{r0.device}/{r0.port}"
        base = f"{IB_ROOT}{r0.device}/ports/{r0.port}/"
        latest = r1 if r1 is not None else r0
        samples.extend(_gauges(hc, comp, latest, base, latest.present))
        for metric, unit, name, scale in _picks(tuple(latest.raw), tuple(r0.raw)):
            samples.append(_counter(hc, interval, comp, metric, unit, name, scale, r0, r1))
    return samples


@functools.lru_cache(maxsize=256)
def _picks(latest: tuple[str, ...], first: tuple[str, ...]) -> tuple[tuple[str, str, str, int], ...]:
    """(metric, unit, raw name, scale) for every sample of a port whose raw counters are named so: the normalized
    metrics present, then every raw counter as `raw:<name>`. Every port of a fleet has one of a few layouts."""
    latest_raw, first_raw = dict.fromkeys(latest, 0), dict.fromkeys(first, 0)
    out = []
    for metric, spec in NORMALIZED.items():
        picked = pick_raw(metric, latest_raw) or pick_raw(metric, first_raw)
        if picked:
            out.append((metric, spec.unit, picked[0], picked[1]))
    out += [(f"raw:{name}", "count", name, 1) for name in sorted({*latest, *first})]
    return tuple(out)


samples = rdma_samples


# ----------------------------------------------------------------------------------------------------------- rules


def _ports(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    return per_samples(hc, "rdma_ports", samples, lambda: _group_ports(samples))


def _group_ports(samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    grouped: dict[str, dict[str, MetricSample]] = defaultdict(dict)
    for s in samples:
        if s.component.startswith("rdma:") and "/" in s.component:
            grouped[s.component][s.metric] = s
    return {comp: grouped[comp] for comp in sorted(grouped)}


def _base(comp: str) -> str:
    dev, _, port = comp.removeprefix("rdma:").rpartition("/")
    return f"{IB_ROOT}{dev}/ports/{port}/"


def _label(items: HostItems, comp: str) -> str:
    base = _base(comp)
    ndevs = ((items.text(f"{base}gid_attrs/ndevs/{i}") or "").strip() for i in range(4))
    netdev = next((n for n in ndevs if n and " " not in n), None)
    return comp.removeprefix("rdma:") + (f" ({netdev})" if netdev else "")


def _raw_name(s: MetricSample) -> str:
    return s.source.rsplit("/", 1)[-1] if s.source and s.source.startswith(IB_ROOT) else s.metric


def _grown(metrics: dict[str, MetricSample], names: tuple[str, ...]) -> list[MetricSample]:
    return [metrics[n] for n in names if n in metrics and (metrics[n].delta or 0) > 0]


def _interval(hc: HostCapture) -> str:
    return f"in {hc.interval_s:g} s" if hc.interval_s else "between snapshots"


def _increase(s: MetricSample, per: str = "s", factor: float = 1.0) -> str:
    rate = f" ({s.rate * factor:.3g}/{per})" if s.rate is not None else ""
    return f"{_raw_name(s)} +{s.delta:g}{rate}"


def _evidence(s: MetricSample) -> Evidence:
    return Evidence(f"{s.metric}.delta", s.delta, s.unit, baseline=0, source=s.source, snapshot=1)


def _p_text(p: float) -> str:
    if p >= 0.001 or p == 0:
        return f"{p:.2g}"
    mantissa, _, exponent = f"{p:.1e}".partition("e")
    return f"{mantissa}e{int(exponent)}"


class _Tested(NamedTuple):
    """A counter that rose, set against its rate limit: above it (p <= RATE_LIMIT_ALPHA) or not, and how said."""

    sample: MetricSample
    above: bool
    text: str
    p: float | None  # None: no limit for this metric, or no interval to test a rate over


_SHOWN_PER = {"link.down_events": "min"}  # a rate without a limit, in the unit a fabric engineer reads it in


def _tested(s: MetricSample, interval_s: float | None) -> _Tested:
    limit = RATE_LIMITS.get(s.metric)
    if limit is None:
        per = _SHOWN_PER.get(s.metric, "s")
        return _Tested(s, False, _increase(s, per, _SECONDS[per]), None)
    quoted = f"the {limit.per_unit:g}/{limit.unit} limit"
    if s.rate is None or not interval_s or interval_s <= 0 or s.delta is None:
        return _Tested(s, False, f"{_increase(s)} (no interval: not tested against {quoted})", None)
    above, p = exceeds_rate_limit(s.delta, interval_s, limit.per_s)
    verdict = "above" if above else "not above"
    rate = s.rate * _SECONDS[limit.unit]
    return _Tested(s, above, f"{_raw_name(s)} +{s.delta:g} ({rate:.3g}/{limit.unit}; {verdict} {quoted}, "
                             f"p = {_p_text(p)})", p)


def _limit_evidence(tested: list[_Tested]) -> list[Evidence]:
    """The test's p-value beside each tested counter's delta; its baseline is the level it was held against."""
    return [Evidence(f"{t.sample.metric}.p_limit", float(f"{t.p:.4g}"), "p-value", RATE_LIMIT_ALPHA, t.sample.source, 1)
            for t in tested if t.p is not None]


def _snap(hc: HostCapture, s: MetricSample) -> int:
    return 1 if s.source and hc.item(s.source, 1) is not None else 0


_PHYS_HINT = {"POLLING": "no signal from the link partner (cable, transceiver or switch port)",
              "DISABLED": "port disabled (administratively, or by the switch or subnet manager)"}
_STATE_HINT = {"INIT": "link up but not configured by the subnet manager", "ARMED": "waiting for the SM to activate",
               "DOWN": "no logical link"}


def rdma_port_down(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """A port (with a link_layer) not ACTIVE, or physically POLLING/DISABLED; critical when it was ACTIVE in
    snapshot 0 and is not in snapshot 1."""
    items, findings = HostItems(hc), []
    for comp, m in _ports(hc, samples).items():
        state, phys = m.get("link.state"), m.get("link.phys_state")
        if state is None or items.text(_base(comp) + "link_layer") is None:
            continue
        phys_name = phys.note if phys is not None else None
        if (state.note in (None, "ACTIVE")) and phys_name not in ("POLLING", "DISABLED"):
            continue
        before = parse_port_state(items.text(state.source or "", 0))[1]
        went_down = _snap(hc, state) == 1 and before == "ACTIVE" and state.note != "ACTIVE"
        evidence = [Evidence("link.state", state.note, "state", "ACTIVE", state.source, _snap(hc, state))]
        if phys is not None:
            evidence.append(Evidence("link.phys_state", phys_name, "state", "LINK_UP", phys.source, _snap(hc, phys)))
        hint = _PHYS_HINT.get(phys_name or "") or _STATE_HINT.get(state.note or "", "")
        summary = f"{_label(items, comp)}: port {state.note or '?'}, physical state {phys_name or '?'}"
        if went_down:
            evidence.append(Evidence("link.state", before, "state", "ACTIVE", state.source, 0))
            summary += f" (was ACTIVE {hc.interval_s:g} s earlier)" if hc.interval_s else " (was ACTIVE)"
        summary += f": {hint}" if hint else ""
        severity = Severity.CRITICAL if went_down else Severity.MAJOR
        confidence = 0.95 if went_down else 0.8
        findings.append(Finding("rdma-port-down", severity, hc.host, comp, summary, evidence, confidence))
    return findings


def _counter_rule(hc: HostCapture, samples: list[MetricSample], kind: str, names: tuple[str, ...],
                  classify: Callable[[list[_Tested]], tuple[Severity, float]]) -> list[Finding]:
    """One finding per port where any of `names` rose; each counter with a rate limit is tested against it
    (RATE_LIMITS), and `classify` decides severity and confidence from the tested counters."""
    items, findings = HostItems(hc), []
    for comp, m in _ports(hc, samples).items():
        grown = _grown(m, names)
        if grown:
            tested = [_tested(s, hc.interval_s) for s in grown]
            severity, confidence = classify(tested)
            summary = f"{_label(items, comp)}: {', '.join(t.text for t in tested)} {_interval(hc)}"
            evidence = [_evidence(s) for s in grown] + _limit_evidence(tested)
            findings.append(Finding(kind, severity, hc.host, comp, summary, evidence, confidence))
    return findings


def _serious(tested: list[_Tested], fatal: frozenset[str]) -> bool:
    return any(t.sample.metric in fatal or t.above for t in tested)


_FATAL_FLAP = frozenset({"link.down_events"})  # NVSentinel: any link_downed at runtime is fatal for RC QPs


def rdma_link_flap(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """link_downed increased (major: the link went down), or link_error_recovery did (the link retrained): major
    above 5/min, minor when the retrains are consistent with that limit."""
    def classify(tested: list[_Tested]) -> tuple[Severity, float]:
        return (Severity.MAJOR if _serious(tested, _FATAL_FLAP) else Severity.MINOR), 0.95

    return _counter_rule(hc, samples, "rdma-link-flap", ("link.down_events", "link.error_recovery"), classify)


def rdma_symbol_errors(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """symbol_error increased: major when the count shows a rate above the IBTA-derived 120/h (exact Poisson
    test at RATE_LIMIT_ALPHA), minor when it is consistent with that limit."""
    def classify(tested: list[_Tested]) -> tuple[Severity, float]:
        confidence = 0.8 if tested[0].sample.note in ("wrap", "saturated") else 0.95
        return (Severity.MAJOR if _serious(tested, frozenset()) else Severity.MINOR), confidence

    return _counter_rule(hc, samples, "rdma-symbol-errors", ("phy.symbol_errors_uncorrected",), classify)


PORT_ERRORS = ("rx.errors", "rx.remote_physical_errors", "link.integrity_errors", "rx.buffer_overrun",
               "tx.discards", "rx.discards_nobuf_port", "rdma.icrc_errors")
# NVSentinel (telemetry.md e.2): fatal on any increase, or a non-fatal alert above a rate (RATE_LIMITS).
_FATAL_PORT = frozenset({"link.integrity_errors", "rx.buffer_overrun"})


def rdma_port_errors(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Receive errors, integrity/overrun errors and discards that increased during the interval: major on a fatal
    counter, or port_rcv_errors / port_xmit_discards above their limits (exact Poisson test); else minor."""
    def classify(tested: list[_Tested]) -> tuple[Severity, float]:
        return (Severity.MAJOR if _serious(tested, _FATAL_PORT) else Severity.MINOR), 0.9

    return _counter_rule(hc, samples, "rdma-port-errors", PORT_ERRORS, classify)


TRANSPORT_ERRORS = ("rdma.out_of_sequence", "rdma.seq_err_nak", "rdma.implied_nak_seq_err", "rdma.ack_timeout",
                    "rdma.rnr_retry_exceeded", "rdma.rnr_naks_received", "rdma.transport_retries_exceeded",
                    "rdma.remote_unreachable", "rdma.remote_impaired", "rdma.slow_restart")
_FATAL_TRANSPORT = frozenset({"rdma.rnr_retry_exceeded", "rdma.transport_retries_exceeded"})


def rdma_transport_errors(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """RDMA transport counters that increased: minor; major when a QP hit its retry limit, or ACK timeouts or
    slow restarts show a rate above their e.2 limits (exact Poisson test)."""
    def classify(tested: list[_Tested]) -> tuple[Severity, float]:
        major = _serious(tested, _FATAL_TRANSPORT)
        # Often caused by the far end (a crashed rank, a congested path), hence the lower confidence.
        return (Severity.MAJOR if major else Severity.MINOR), (0.8 if major else 0.6)

    return _counter_rule(hc, samples, "rdma-transport-errors", TRANSPORT_ERRORS, classify)


def _peer_group(items: HostItems, comp: str) -> tuple[str, str]:
    dev = comp.removeprefix("rdma:").rpartition("/")[0]
    model = next((t.strip() for a in ("hca_type", "board_id") if (t := items.text(f"{IB_ROOT}{dev}/{a}"))
                  and t.strip()), re.sub(r"[0-9]+$", "", dev))
    return model, (items.text(_base(comp) + "link_layer") or "").strip()


def rdma_speed_downshift(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """An ACTIVE port slower than the most common rate of the same model and link layer on this host (3+ ports)."""
    items = HostItems(hc)
    groups: dict[tuple[str, str], list[tuple[str, dict[str, MetricSample]]]] = defaultdict(list)
    for comp, m in _ports(hc, samples).items():
        speed, state = m.get("link.speed_gbps"), m.get("link.state")
        if speed is not None and speed.value is not None and state is not None and state.note == "ACTIVE":
            groups[_peer_group(items, comp)].append((comp, m))
    findings = []
    for (model, layer), members in sorted(groups.items()):
        if len(members) < 3:
            continue
        counts = Counter(m["link.speed_gbps"].value for _, m in members)
        expected, peers = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        widths = Counter(m["link.width"].value for _, m in members if m["link.speed_gbps"].value == expected)
        for comp, m in members:
            speed, width = m["link.speed_gbps"], m.get("link.width")
            if speed.value is None or speed.value >= expected:
                continue
            usual_width = widths.most_common(1)[0][0]
            rate_text = (items.text(speed.source or "", _snap(hc, speed)) or "").strip()
            summary = (f"{_label(items, comp)}: {rate_text or f'{speed.value:g} Gb/s'} while {peers} of "
                       f"{len(members)} {model} {layer} ports run {expected:g} Gb/s")
            evidence = [Evidence("link.speed_gbps", speed.value, "Gb/s", expected, speed.source, _snap(hc, speed))]
            if width is not None and width.value is not None and usual_width is not None:
                evidence.append(Evidence("link.width", width.value, "lanes", usual_width, width.source,
                                         _snap(hc, width)))
            confidence = 0.9 if peers / len(members) >= 0.75 else 0.6
            findings.append(Finding("rdma-speed-downshift", Severity.MAJOR, hc.host, comp, summary, evidence,
                                    confidence))
    return findings


# Error counters whose saturation hides new errors; port_xmit_wait and 32-bit data counters saturate routinely.
_SATURATION_WATCH = frozenset({"phy.symbol_errors_uncorrected", "link.down_events", "link.error_recovery",
                               "rx.errors", "link.integrity_errors", "rx.buffer_overrun", "tx.discards",
                               "rx.remote_physical_errors"})


def rdma_counters_saturated(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """An error PortCounter stuck at its maximum: new errors on that port can no longer be seen."""
    items, findings = HostItems(hc), []
    for comp, m in _ports(hc, samples).items():
        stuck = [m[n] for n in sorted(_SATURATION_WATCH) if n in m and m[n].note == "saturated"]
        if not stuck:
            continue
        listed = ", ".join(f"{_raw_name(s)}={s.value:g}" for s in stuck)
        summary = f"{_label(items, comp)}: {listed} at the counter maximum; increases are no longer visible"
        evidence = [Evidence(s.metric, s.value, s.unit, None, s.source, _snap(hc, s)) for s in stuck]
        findings.append(Finding("rdma-counter-saturated", Severity.INFO, hc.host, comp, summary, evidence, 0.9))
    return findings


RULES: list[Rule] = [rdma_port_down, rdma_link_flap, rdma_symbol_errors, rdma_port_errors, rdma_transport_errors,
                     rdma_speed_downshift, rdma_counters_saturated]
