"""The self-contained HTML report of a capture, in ONE file with inline CSS and SVG only. It opens with the
symptom, the escalation and bundle ids, the verdict line and one card per suspect of the diagnosis (each with a
mini-plot of its key metric against the fleet); then the hosts x components heat map, the background lines, each
flagged component beside the fleet, topology paths, collection gaps, and last the raw findings, folded.

Nothing in it loads from anywhere (a Content-Security-Policy of `default-src 'none'` says so to the browser
too), so it opens from a bundle on an air-gapped laptop or as a ticket attachment. Deterministic: the same
inputs give the same bytes. Host names and summaries are untrusted text: the template autoescapes everything.
Layout and colour scale: docs/report.md.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence

import jinja2

from fabricase.analysis import host_samples, sort_findings
from fabricase.analysis.fleet import fleet_inputs
from fabricase.analysis.probe_text import probe_text
from fabricase.diagnosis import Diagnosis, diagnose
from fabricase.models import Capture, Finding, HostStatus, MetricSample, Placement, Severity
from fabricase.report.cards import cards as suspect_cards  # the name `cards` stays the module's
from fabricase.report.gaps import collection_gaps
from fabricase.report.heatmap import heat_map
from fabricase.report.plots import suspects
from fabricase.report.rates import LEVEL_BOUNDS, fleet_rates
from fabricase.report.topology import topology
from fabricase.templates import format_evidence, format_number, hostlist

__all__ = ["BUNDLE_PENDING", "NOT_FILED", "REPORT_TEMPLATE", "environment", "html_report"]

REPORT_TEMPLATE = "report.html.j2"
NOT_FILED = "(not yet filed)"
BUNDLE_PENDING = "(computed after bundling)"  # the report is inside the bundle, so it cannot hold its hash


@functools.cache
def environment() -> jinja2.Environment:
    """The report's Jinja2 environment: autoescape always on (the template's name does not end in .html)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fabricase", "report/templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=format_number, evidence=format_evidence, hostlist=hostlist, certainty=certainty)
    return env


def certainty(f: Finding) -> str:
    """`q = 4e-04; confidence 0.9996`, or what of the two the finding has."""
    parts = []
    if f.q_value is not None:
        parts.append(f"q = {f.q_value:.2g}")
    if f.confidence is not None:
        parts.append(f"confidence {f.confidence:.4g}")
    return "; ".join(parts) or "-"


def _samples(capture: Capture) -> dict[str, list[MetricSample]]:
    out = {}
    for hc in capture.hosts:
        try:
            out[hc.host] = host_samples(hc)
        finally:
            hc.release()  # a fleet's items must not all stay in memory at once
    return out


def _targets(targets: Mapping) -> list[tuple[str, str]]:
    return [(k, v if isinstance(v, str) else json.dumps(v, sort_keys=True)) for k, v in sorted(targets.items())]


def _counts(values: Iterable[str], order: Sequence[str]) -> list[tuple[str, int]]:
    counted: dict[str, int] = {}
    for v in values:
        counted[v] = counted.get(v, 0) + 1
    return [(k, counted[k]) for k in order if k in counted] + sorted(
        (k, n) for k, n in counted.items() if k not in order)


def html_report(capture: Capture, findings: Sequence[Finding], placements: Sequence[Placement],
                samples_by_host: Mapping[str, Iterable[MetricSample]] | None = None, *,
                diagnosis: Diagnosis | None = None, symptom: str = "", escalation_id: str | None = None,
                bundle_id: str | None = None) -> bytes:
    """The report as UTF-8 bytes. `samples_by_host` (host -> fabricase.analysis.host_samples, or analyze's
    samples_out) is computed from the capture when not given. `diagnosis`: the capture's (pipeline.
    diagnose_capture), made from these findings; without it one is made here, without hardware aliases."""
    if samples_by_host is None:
        samples_by_host = _samples(capture)
    samples_by_host = {h: list(s) for h, s in samples_by_host.items()}  # read twice: rates, then the diagnosis
    known = {hc.host for hc in capture.hosts}
    captured = {h: s for h, s in samples_by_host.items() if h in known}
    rates, fleet = fleet_rates(captured)
    ordered = sort_findings(findings)  # analyze's own order, which the diagnosis's finding ids count in
    if diagnosis is None:
        diagnosis = diagnose(ordered, hosts=capture.hosts, placements=placements,
                             samples={h: fleet_inputs(s) for h, s in samples_by_host.items()})
    found, omitted = suspects(ordered, rates, fleet)
    shown, cards_omitted = suspect_cards(diagnosis, ordered, captured, rates, fleet)
    context = {
        "capture": capture,
        "symptom": symptom,
        "escalation_id": escalation_id or NOT_FILED,
        "bundle_id": bundle_id or BUNDLE_PENDING,
        "diagnosis": diagnosis,
        "cards": shown,
        "cards_omitted": cards_omitted,
        "targets": _targets(capture.targets),
        "host_counts": _counts((str(hc.status) for hc in capture.hosts), [str(s) for s in HostStatus]),
        "severity_counts": _counts((str(f.severity) for f in ordered), [str(s) for s in Severity]),
        "findings": ordered,
        "heat": heat_map(capture.hosts, rates, ordered, placements),
        "bounds": LEVEL_BOUNDS,
        "suspects": found,
        "suspects_omitted": omitted,
        "topology": topology([hc.host for hc in capture.hosts], placements, ordered),
        "gaps": collection_gaps(capture),
        "probe_lines": probe_text(capture, width=100),
    }
    return environment().get_template(REPORT_TEMPLATE).render(**context).encode("utf-8")
