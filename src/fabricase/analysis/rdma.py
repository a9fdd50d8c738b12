"""RDMA ports of one host: normalized metrics (docs/counters.md) from sysfs and `rdma statistic show`, as deltas
and rates between snapshots 0 and 1 (built in rdma_ports.py, re-exported here), and the rules over them
(docs/findings.md)."""

from __future__ import annotations

import itertools
import operator
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import NamedTuple

from fabricase.analysis._items import HostItems, by_family, per_samples
from fabricase.analysis.rdma_ports import IB_ROOT, STATISTIC, load_ports, rdma_samples
from fabricase.analysis.stats import RATE_LIMIT_ALPHA, exceeds_rate_limit
from fabricase.models import Evidence, Finding, HostCapture, MetricSample, Severity
from fabricase.parsers.rdma import parse_port_state

__all__ = [
    "IB_ROOT", "RATE_LIMITS", "RULES", "STATISTIC", "RateLimit", "load_ports", "rdma_counters_saturated",
    "rdma_link_flap", "rdma_port_down", "rdma_port_errors", "rdma_samples", "rdma_speed_downshift",
    "rdma_symbol_errors", "rdma_transport_errors", "samples",
]  # fmt: skip

Rule = Callable[[HostCapture, list[MetricSample]], list[Finding]]
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


samples = rdma_samples


# ----------------------------------------------------------------------------------------------------------- rules


def _ports(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    return per_samples(hc, "rdma_ports", samples, lambda: _group_ports(hc, samples))


def _group_ports(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    grouped: dict[str, dict[str, MetricSample]] = defaultdict(dict)
    # A port's samples come one after another: one step per run of a component, the metrics of a run in one
    # update (a later sample of a metric replaces an earlier one, as one by one).
    for comp, run in itertools.groupby(by_family(hc, samples).get("rdma:", ()), key=_COMPONENT):
        if comp.startswith("rdma:") and "/" in comp:
            port = list(run)
            grouped[comp].update(zip(map(_METRIC, port), port, strict=True))
    return {comp: grouped[comp] for comp in sorted(grouped)}


_COMPONENT, _METRIC = operator.attrgetter("component"), operator.attrgetter("metric")


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
_SATURATION_ORDER = tuple(sorted(_SATURATION_WATCH))  # the order findings list them in


def rdma_counters_saturated(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """An error PortCounter stuck at its maximum: new errors on that port can no longer be seen."""
    items, findings = HostItems(hc), []
    for comp, m in _ports(hc, samples).items():
        stuck = [m[n] for n in _SATURATION_ORDER if n in m and m[n].note == "saturated"]
        if not stuck:
            continue
        listed = ", ".join(f"{_raw_name(s)}={s.value:g}" for s in stuck)
        summary = f"{_label(items, comp)}: {listed} at the counter maximum; increases are no longer visible"
        evidence = [Evidence(s.metric, s.value, s.unit, None, s.source, _snap(hc, s)) for s in stuck]
        findings.append(Finding("rdma-counter-saturated", Severity.INFO, hc.host, comp, summary, evidence, 0.9))
    return findings


RULES: list[Rule] = [rdma_port_down, rdma_link_flap, rdma_symbol_errors, rdma_port_errors, rdma_transport_errors,
                     rdma_speed_downshift, rdma_counters_saturated]
