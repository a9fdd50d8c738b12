"""The probe's results (probe.json and its items) -> measures, suspects and findings.

Every figure is parsed again from the reporting host's item, and slowness is decided by probe.judge, the rule the
runner used to steer the bisection, so the report and the bisection always agree. Pairs name a host when every
test it took part in, with two or more partners, is slow; a slow test between two hosts that are fine with their
other partners names the path between them. The bisection names the candidate of a slow final set (a candidate
paired with a known-good helper). A capture may come from anywhere: nothing here raises on what it holds.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from fabricase.caps import MIB
from fabricase.models import Capture, Evidence, Finding, Severity
from fabricase.parsers.iperf3 import parse_iperf3
from fabricase.parsers.nccl_log import NcclLog, parse_nccl_log
from fabricase.parsers.nccl_tests import parse_nccl_tests
from fabricase.parsers.perftest import parse_perftest
from fabricase.probe import judge
from fabricase.probe.model import PAIR_KINDS, PROBE_NAME, ProbeDoc, ProbeTest, item_source

__all__ = [
    "BisectSet",
    "HostSuspect",
    "MAX_PROBE_BYTES",
    "ProbeAnalysis",
    "ProbeMeasure",
    "analyze_measures",
    "figure_of",
    "item_text",
    "load_probe",
    "one_line",
    "probe_analysis",
    "probe_findings",
    "probe_measures",
]

MAX_PROBE_BYTES = 16 * MIB  # probe.json is a plan and outcomes; a bigger one is not ours
MAX_PROBE_ITEM_BYTES = 16 * MIB  # a probe tool's output is a few KiB; the rest would only cost memory
PAIR_METRIC, SET_METRIC = "probe.pair_gbps", "probe.busbw_gbs"
# bisect-control: two known-good hosts run beside the finishing pairs as the round's reference (judged with the
# round, never a candidate or the top set)
COLLECTIVE_STAGES = ("collective", "bisect", "bisect-pair", "bisect-confirm", "bisect-control")
_EVIDENCE_CAP = 8  # a finding lists the tests that make the case, not all of a large fleet's
# A tool that could not start or reach its peer says nothing about the fabric's speed: reported as
# perf-test-failed and left out of the judging (a hang or a crash mid-run is judged slow instead).
_COULD_NOT_RUN = re.compile(
    r"(?i)command not found|no such file|not installed|couldn'?t connect|could not connect|unable to connect|"
    r"connection refused|unable to open file|no route to host|name or service not known|permission denied|"
    r"unable to init the socket|failed to create qp|couldn'?t get device|ib device .* not found|no ib devices"
)


@dataclass(frozen=True)
class ProbeMeasure:
    """One test's figure, parsed again from its item. value: Gb/s (pairs) or busbw GB/s (sets), None with
    `reason` when there is none; judged: it counts in the slow rule (a failure mid-run or a timeout counts, as
    slow); could_not_run: the tool never got to measure (perf-test-failed, not judged)."""

    test: ProbeTest
    status: str
    metric: str
    unit: str
    value: float | None
    source: str
    reason: str | None = None
    judged: bool = True
    could_not_run: bool = False
    size: int | None = None  # message size (bytes) of the figure
    wrong: float | None = None  # nccl-tests #wrong over every row


@dataclass(frozen=True)
class BisectSet:
    """One set of the bisection as reconstructed: slow None when it was not judged (interrupted, could not run);
    candidate: the host a final 2-host set tests (its other host is a known-good helper)."""

    measure: ProbeMeasure
    slow: bool | None
    depth: int  # 1 for the whole set
    candidate: str | None = None
    final: bool = False


@dataclass
class HostSuspect:
    """A host (or one NIC of it) the probe names, with why: pairs, the bisection, or both."""

    host: str
    component: str = "host"
    pair_reason: str | None = None
    bisect_reason: str | None = None
    confidence: float = 0.0
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class ProbeAnalysis:
    """Everything the findings and the summary are made of, computed once."""

    measures: list[ProbeMeasure]
    pair_slow: dict[str, bool]  # test id -> slow
    pair_baseline: dict[str, float]  # test id -> what it was held against
    sets: list[BisectSet]
    suspects: list[HostSuspect]
    paths: list[tuple[str, str, list[ProbeMeasure]]]  # (component, reason, slow tests)
    below_expected: str | None = None  # the reason, when every pair was slow and none stood out
    collective_slow: str | None = None
    findings: list[Finding] = field(default_factory=list)


def load_probe(root: Path) -> tuple[ProbeDoc | None, str | None]:
    """probe.json of a capture: (doc, None); (None, None) when the capture has none; (None, "probe.json: why")
    when it cannot be used. Read like the capture's own records: inside the directory, within a size cap."""
    from fabricase.capture_records import read_member
    from fabricase.errors import CaptureError

    path = Path(root) / PROBE_NAME
    if not path.exists() and not path.is_symlink():
        return None, None
    try:
        data = read_member(Path(root).resolve(), path, PROBE_NAME, MAX_PROBE_BYTES)
        return ProbeDoc.from_dict(json.loads(data.decode("utf-8"), parse_constant=_no_constant)), None
    except CaptureError as exc:
        return None, f"{PROBE_NAME}: {exc.args[0] if exc.args else exc}"[:300]
    except UnicodeDecodeError as exc:
        return None, f"{PROBE_NAME}: not UTF-8 at byte {exc.start}"
    except RecursionError:
        return None, f"{PROBE_NAME}: nested too deep"
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        why = " ".join(str(exc).split())[:200] or type(exc).__name__
        return None, f"{PROBE_NAME}: {why if not isinstance(exc, KeyError) else f'missing field {why}'}"


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number probe.json allows")


def item_text(capture: Capture, host: str, source: str) -> tuple[str | None, str | None]:
    """An item's text, or (None, why): the host or item is missing, too big, or unreadable."""
    hc = capture.host(host)
    if hc is None:
        return None, f"host {host} is not in the capture"
    item = hc.item(source)
    if item is None:
        return None, f"no item {source} on {host}"
    if item.bytes > MAX_PROBE_ITEM_BYTES:
        return None, f"{source} on {host}: {item.bytes:,} bytes, over the {MAX_PROBE_ITEM_BYTES // MIB} MiB cap"
    try:
        return hc.text(source) or "", None
    except Exception as exc:  # a capture error, an OS error: the measure says why, the analysis goes on
        return None, f"{source} on {host}: unreadable ({' '.join(str(exc).split())[:160]})"


def figure_of(test: ProbeTest, text: str) -> tuple[float | None, int | None, float | None, list[str]]:
    """(value, size, #wrong, tool errors) of one output, by the test's tool (the probe's run reads its pairs'
    figures with it too, to pick the pairs it runs again)."""
    if test.kind == "iperf3":
        r = parse_iperf3(text)
        value = None if r.received_bps is None else r.received_bps / 1e9
        return value, None, None, [r.error] if r.error else []
    if test.kind in PAIR_KINDS:
        p = parse_perftest(text)
        row = p.largest()
        return (None if row is None else row.bw_avg_gbps), (None if row is None else row.bytes), None, [
            e for e in p.errors if not e.startswith("parse:")]
    n = parse_nccl_tests(text, test.kind.removesuffix("_perf") or None)
    row = n.largest()
    wrong = n.wrong_total if n.wrong_column != "error" else None
    errors = [e for e in n.errors if not e.startswith(("parse:", "out of bounds"))]
    return (None if row is None else row.busbw), (None if row is None else row.size), wrong, errors


def one_line(text: str | None, limit: int = 200) -> str:
    return "".join(c if c.isprintable() else " " for c in " ".join((text or "").split()))[:limit]


def _measure(capture: Capture, result) -> tuple[ProbeMeasure, NcclLog | None]:
    test = result.test
    pair = test.kind in PAIR_KINDS
    metric, unit = (PAIR_METRIC, "Gb/s") if pair else (SET_METRIC, "GB/s")
    source = item_source(test.id)
    base = dict(test=test, status=result.status, metric=metric, unit=unit, source=source)
    if result.status in ("interrupted", "skipped"):
        return ProbeMeasure(**base, value=None, reason=one_line(f"{result.status}: {result.error or ''}"),
                            judged=False), None
    text, why = item_text(capture, test.reporter, source)
    value = size = wrong = None
    errors: list[str] = []
    log = None
    if text is not None:
        try:
            value, size, wrong, errors = figure_of(test, text)
        except Exception as exc:  # the parsers return a record on any input; this is the belt to their braces
            why = f"{source}: unparseable ({type(exc).__name__})"
        if not pair and "NCCL" in text:
            log = parse_nccl_log(text, source=f"{test.reporter}:{source}")
    if value is not None and not math.isfinite(value):
        value, why = None, f"{source}: not a finite figure"
    elif value is not None:
        value = round(float(value), 3)
    said = " ".join(filter(None, [result.error, *errors[:3]]))
    if _COULD_NOT_RUN.search(said) or (result.status == "failed" and text is None):
        return ProbeMeasure(**base, value=None, reason=one_line(said or why or "failed"), judged=False,
                            could_not_run=True), log
    if result.status == "timed-out":
        return ProbeMeasure(**base, value=None, reason=one_line(f"timed out: {result.error or ''}")), log
    if result.status == "failed":
        return ProbeMeasure(**base, value=None, reason=one_line(f"failed: {said}"), size=size, wrong=wrong), log
    if value is None:  # ok, but no figure in its item: the capture lacks the evidence, not the fabric the speed
        return ProbeMeasure(**base, value=None, reason=one_line(why or f"no result in {source}"), judged=False,
                            wrong=wrong), log
    return ProbeMeasure(**base, value=value, size=size, wrong=wrong), log


def _measures_and_logs(capture: Capture, doc: ProbeDoc) -> tuple[list[ProbeMeasure], list[NcclLog]]:
    measures, logs = [], []
    for result in doc.results:
        m, log = _measure(capture, result)
        measures.append(m)
        if log is not None and (log.events or log.ranks):
            logs.append(log)
    for host in {m.test.reporter for m in measures}:
        if (hc := capture.host(host)) is not None:
            hc.release()  # the reads were for this step only; a fleet's items must not all stay in memory
    return measures, logs


def probe_measures(capture: Capture, doc: ProbeDoc) -> list[ProbeMeasure]:
    """Each result's figure, parsed again from the reporter's item, in the order of probe.json."""
    return _measures_and_logs(capture, doc)[0]


def _expected(doc: ProbeDoc, key: str) -> float | None:
    value = doc.expected.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _ev(m: ProbeMeasure, baseline: float | None) -> Evidence:
    return Evidence(m.metric, m.value, m.unit, baseline=None if baseline is None else round(baseline, 3),
                    source=m.source, snapshot=0)


def _fmt(value: float | None, unit: str) -> str:
    return "no figure" if value is None else f"{value:.4g} {unit}"


def _pair_flags(measures: list[ProbeMeasure], doc: ProbeDoc) -> tuple[dict, dict, dict, str | None]:
    """Slow flags and baselines of the judged pair tests, by (tool, rail); and the below-expected reason when
    every test is slow against the expected rate and none stands out from the others (then the suspects come
    from the relative rule, so a host far below even a slow fabric is still named)."""
    groups: dict[tuple[str, int], list[ProbeMeasure]] = defaultdict(list)
    for m in measures:
        if m.judged and m.test.kind in PAIR_KINDS and len(set(m.test.hosts)) == len(m.test.hosts) == 2:
            groups[(m.test.kind, -1 if m.test.rail is None else m.test.rail)].append(m)
    slow: dict[str, bool] = {}
    baseline: dict[str, float] = {}
    expected_all_slow, any_expected = True, False
    for (kind, _), ms in groups.items():
        expected = _expected(doc, "tcp_gbps" if kind == "iperf3" else "pair_gbps")
        flags = judge.slow_pairs([m.value for m in ms], expected)
        any_expected |= expected is not None
        expected_all_slow &= expected is None or all(flags)
        known = [m.value for m in ms if m.value is not None]
        for m, flag in zip(ms, flags, strict=True):
            slow[m.test.id] = flag
            if expected is not None or known:
                baseline[m.test.id] = expected if expected is not None else statistics.median(known)
    # Two hosts are one pair: "the fabric" and "that pair" are the same claim, so the hosts are named instead.
    spread = len({h for ms in groups.values() for m in ms for h in m.test.hosts}) >= 3
    if not (any_expected and expected_all_slow and slow and spread):
        return groups, _slow_every_time(groups, slow), baseline, None
    outliers = 0
    for ms in groups.values():
        known = [m.value for m in ms if m.value is not None]
        for m, flag in zip(ms, judge.slow_pairs([m.value for m in ms]), strict=True):
            slow[m.test.id] = flag
            outliers += flag
            if known:
                baseline[m.test.id] = statistics.median(known)
    values = [m.value for ms in groups.values() for m in ms if m.value is not None]
    reason = (f"every pair test ({len(slow)}) was below {judge.PAIR_FRACTION:.0%} of the expected rate "
              f"({one_line(str(doc.expected.get('pair_basis') or doc.expected.get('pair_gbps')), 120)}); median "
              f"{_fmt(statistics.median(values) if values else None, 'Gb/s')}")  # fmt: skip
    return groups, _slow_every_time(groups, slow), baseline, reason + ("" if not outliers else
                                                                         f"; {outliers} stood out even so")


def _slow_every_time(groups: dict, slow: dict[str, bool]) -> dict[str, bool]:
    """A pair run again because its figure was slow (its test's parent is the first run) is slow only when both
    runs were: one slow run is noise a healthy pair shows now and then. The first run takes the second's word."""
    out = dict(slow)
    for ms in groups.values():
        for m in ms:
            first = m.test.parent
            if first in out and not slow[m.test.id]:
                out[first] = False
    return out


def _partners_text(n_slow: int, n: int, tests: int, only: str | None) -> str:
    if only is not None:
        return (f"slow with its only partner {only} ({tests} tests): with one partner the host cannot be told "
                f"from the partner or the path between them")  # fmt: skip
    who = "both partners" if n == 2 else f"all {n} partners"
    return f"slow with {who} ({n_slow}/{n} pairs, {tests} tests)"


def _pair_suspects(groups, slow, baseline) -> tuple[list[HostSuspect], list[tuple[str, str, list]]]:
    per_host: dict[str, dict] = defaultdict(dict)  # host -> group key -> [(measure, slow)]
    for key, ms in groups.items():
        for m in ms:
            for h in m.test.hosts:
                per_host[h].setdefault(key, []).append(m)
    named: dict[str, dict] = defaultdict(dict)  # host -> key -> its tests (all slow)
    for h, by_key in per_host.items():
        for key, ms in by_key.items():
            if all(slow[m.test.id] for m in ms):
                named[h][key] = ms
    suspects: list[HostSuspect] = []
    for h in sorted(named):
        rails = {k for k in per_host[h] if k[0] != "iperf3"}
        bad = {k for k in named[h] if k[0] != "iperf3"}
        nic_only = len({k[1] for k in rails}) > 1 and bad and bad != rails and len(named[h]) == len(bad)
        parts = [(k, named[h][k]) for k in sorted(named[h])]
        chunks = [[p] for p in parts] if nic_only else [parts]
        for chunk in chunks:
            ms = [m for _, tests in chunk for m in tests]
            partners = sorted({x for m in ms for x in m.test.hosts if x != h})
            only = partners[0] if len(partners) == 1 else None
            both_ways = {m.test.hosts.index(h) for m in ms} == {0, 1}
            text = _partners_text(len(partners), len(partners), len(ms), only)
            component = "host"
            if nic_only:
                m0 = ms[0]
                device = m0.test.devices[m0.test.hosts.index(h)] if len(m0.test.devices) == 2 else None
                component = f"rdma:{device}" if device else f"rdma:rail{m0.test.rail}"
                text = f"rail {m0.test.rail} ({component[5:]}) {text}; its other rails are fine"
            confidence = 0.4 if only else (0.9 if both_ways else 0.75)
            evidence = [_ev(m, baseline.get(m.test.id)) for m in sorted(ms, key=lambda m: m.test.id)]
            suspects.append(HostSuspect(h, component, pair_reason=text, confidence=confidence,
                                        evidence=evidence[:_EVIDENCE_CAP]))
    paths: dict[frozenset, list[ProbeMeasure]] = defaultdict(list)
    for key, ms in groups.items():
        for m in ms:
            if slow[m.test.id] and not any(key in named.get(h, {}) for h in m.test.hosts):
                paths[frozenset(m.test.hosts)].append(m)
    out = []
    for ms in paths.values():
        ms.sort(key=lambda m: m.test.id)
        first = ms[0].test
        ways = "both directions" if len({m.test.hosts for m in ms}) > 1 else "one direction"
        figures = ", ".join(_fmt(m.value, m.unit) for m in ms[:4])
        reason = (f"{first.hosts[0]} and {first.hosts[1]} slow with each other ({ways}: {figures}) but fine with "
                  f"their other partners: a link, switch or route between them")  # fmt: skip
        out.append((f"path:{first.hosts[0]}-{first.hosts[1]}", reason, ms))
    return suspects, sorted(out, key=lambda p: p[0])


def _bisection(measures: list[ProbeMeasure], doc: ProbeDoc) -> list[BisectSet]:
    """The bisection's sets, judged round by round, with each set's depth and candidate."""
    sets = [m for m in measures if m.test.kind not in PAIR_KINDS and m.test.stage in COLLECTIVE_STAGES]
    expected = _expected(doc, "busbw_gbs")
    slow: dict[str, bool | None] = {}
    by_round: dict[int, list[ProbeMeasure]] = defaultdict(list)
    for m in sets:
        if m.judged:
            by_round[m.test.round].append(m)
    for ms in by_round.values():
        for m, flag in zip(ms, judge.slow_sets([m.value for m in ms], expected), strict=True):
            slow[m.test.id] = flag
    by_id = {m.test.id: m for m in sets}
    parents = {m.test.parent for m in sets if m.test.parent}
    out = []
    for m in sorted(sets, key=lambda m: (m.test.round, m.test.id)):
        depth, seen, at = 1, {m.test.id}, m.test
        while at.parent in by_id and at.parent not in seen:
            seen.add(at.parent)
            at, depth = by_id[at.parent].test, depth + 1
        candidate = None
        parent = by_id.get(m.test.parent or "")
        if m.test.stage == "bisect-control":
            depth = m.test.round  # a reference, under no set
        elif m.test.stage in ("bisect-pair", "bisect-confirm"):
            candidate = m.test.hosts[0]  # the plan puts the suspect first, its known-good partner second
        elif m.test.parent and len(m.test.hosts) == 1:
            candidate = m.test.hosts[0]
        elif parent is not None and len(m.test.hosts) == 2:
            inside = [h for h in m.test.hosts if h in parent.test.hosts]
            candidate = inside[0] if len(inside) == 1 else None
        out.append(BisectSet(m, slow.get(m.test.id), depth, candidate, final=m.test.id not in parents))
    return out


def _bisect_suspects(sets: list[BisectSet], doc: ProbeDoc) -> tuple[dict[str, BisectSet], str | None]:
    named = {s.candidate: s for s in sets if s.final and s.slow and s.candidate}
    roots = [s for s in sets if s.depth == 1 and s.slow and s.measure.test.stage == "collective"]
    if not roots or any(s.slow for s in sets if s.depth > 1 and s.measure.test.stage != "bisect-control"):
        return named, None
    root = roots[0].measure
    subsets = sum(s.depth > 1 for s in sets)
    against = one_line(str(doc.expected.get("busbw_basis") or _fmt(_expected(doc, "busbw_gbs"), "GB/s")), 120)
    reason = (f"the whole set of {len(root.test.hosts)} hosts was slow ({_fmt(root.value, 'GB/s')} against "
              f"{against}) and " + (f"none of its {subsets} subsets was" if subsets else "no subset ran") +
              ": a scale or spine effect, no single host")  # fmt: skip
    return named, reason


def _failed_findings(measures: list[ProbeMeasure]) -> list[Finding]:
    by_host: dict[str, list[ProbeMeasure]] = defaultdict(list)
    for m in measures:
        if m.could_not_run:
            # The error may name the side that failed ("probe-h2: ib_write_bw: command not found").
            named = [h for h in m.test.hosts if (m.reason or "").startswith(h)]
            by_host[named[0] if named else m.test.reporter].append(m)
    out = []
    for host, ms in sorted(by_host.items()):
        kinds = ", ".join(sorted({m.test.kind for m in ms}))
        more = f" ({len(ms) - 1} more tests alike)" if len(ms) > 1 else ""
        summary = f"probe {kinds} could not run: test {ms[0].test.id}: {ms[0].reason}{more}"
        evidence = [Evidence("perf.tool_errors", len(ms), "tests", baseline=0, source=ms[0].source, snapshot=0)]
        out.append(Finding("perf-test-failed", Severity.MAJOR, host, "host", summary, evidence, confidence=0.9))
    return out


def analyze_measures(measures: list[ProbeMeasure], logs: list[NcclLog], doc: ProbeDoc) -> ProbeAnalysis:
    """The probe's judgement over parsed measures (probe_analysis without the capture)."""
    from fabricase.analysis.nccl import nccl_findings
    from fabricase.analysis.probe_tools import wrong_findings

    groups, slow, baseline, below = _pair_flags(measures, doc)
    suspects, paths = _pair_suspects(groups, slow, baseline)
    sets = _bisection(measures, doc)
    named, collective = _bisect_suspects(sets, doc)
    for host, s in sorted(named.items()):
        text = f"named by the bisection in {s.depth} rounds"
        ev = Evidence(SET_METRIC, s.measure.value, "GB/s", baseline=_expected(doc, "busbw_gbs"),
                      source=s.measure.source, snapshot=0)
        both = next((x for x in suspects if x.host == host), None)
        if both is not None:
            both.bisect_reason, both.confidence = text, max(0.97, both.confidence)
            both.evidence.append(ev)
        else:
            suspects.append(HostSuspect(host, "host", bisect_reason=text, confidence=0.8, evidence=[ev]))
    findings = []
    for s in suspects:
        kind = "probe-slow-nic" if s.component.startswith("rdma:") else "probe-slow-host"
        summary = f"{s.host}: " + " and ".join(filter(None, [s.pair_reason, s.bisect_reason]))
        findings.append(Finding(kind, Severity.MAJOR, s.host, s.component, summary, s.evidence, s.confidence))
    for component, reason, ms in paths:
        confidence = 0.7 if "both directions" in reason else 0.55
        findings.append(Finding("probe-slow-path", Severity.MAJOR, None, component, reason,
                                [_ev(m, baseline.get(m.test.id)) for m in ms[:_EVIDENCE_CAP]], confidence))
    if below:
        ms = [m for m in measures if m.test.id in slow][:_EVIDENCE_CAP]
        evidence = [_ev(m, _expected(doc, "pair_gbps")) for m in ms]
        findings.append(Finding("probe-below-expected", Severity.MINOR, None, "fabric", below, evidence, 0.8))
    if collective:
        root = next(s.measure for s in sets if s.depth == 1 and s.slow and s.measure.test.stage == "collective")
        evidence = [Evidence(SET_METRIC, root.value, "GB/s", baseline=_expected(doc, "busbw_gbs"),
                             source=root.source, snapshot=0)]
        findings.append(Finding("probe-collective-slow", Severity.MINOR, None, "collective", collective, evidence,
                                0.6))
    findings += _failed_findings(measures) + wrong_findings(measures) + (nccl_findings(logs) if logs else [])
    findings.sort(key=lambda f: (f.sort_key, f.summary))
    return ProbeAnalysis(measures, slow, baseline, sets, suspects, paths, below, collective, findings)


def probe_analysis(capture: Capture, doc: ProbeDoc) -> ProbeAnalysis:
    """Measures, slow pairs, the bisection, the suspects and the findings of one probe."""
    from fabricase.analysis.probe_tools import dcgm_findings

    measures, logs = _measures_and_logs(capture, doc)
    analysis = analyze_measures(measures, logs, doc)
    if dcgm := dcgm_findings(capture, doc):
        analysis.findings = sorted([*analysis.findings, *dcgm], key=lambda f: (f.sort_key, f.summary))
    return analysis


def probe_findings(capture: Capture, doc: ProbeDoc) -> list[Finding]:
    """The probe's findings, sorted like the rest (most severe, most certain first)."""
    return probe_analysis(capture, doc).findings
