"""What the probe's tools say for themselves, beside the bandwidth judgement (analysis.probe): collectives that
returned wrong data (nccl-tests #wrong), and `dcgmi diag` results (--test gpu)."""

from __future__ import annotations

from fabricase.analysis.probe import ProbeMeasure, item_text, one_line
from fabricase.models import Capture, Evidence, Finding, Severity
from fabricase.probe.model import PAIR_KINDS, ProbeDoc, item_source

__all__ = ["dcgm_findings", "folded_hosts", "wrong_findings"]


def folded_hosts(hosts: tuple[str, ...]) -> str:
    """gpu[001-004]: the hosts as one nodeset (listed as they are when NodeSet cannot fold them)."""
    try:
        from ClusterShell.NodeSet import NodeSet

        return str(NodeSet.fromlist(list(hosts)))
    except Exception:
        return ",".join(hosts)


def wrong_findings(measures: list[ProbeMeasure]) -> list[Finding]:
    """Collectives that returned wrong data (nccl-tests #wrong > 0): one finding per narrowest such set (no set
    split from it was wrong too), on its hosts. Corrupt results are never a bandwidth question: major."""
    wrong = {m.test.id: m for m in measures if m.test.kind not in PAIR_KINDS and (m.wrong or 0) > 0}
    parents = {m.test.parent for m in wrong.values() if m.test.parent}
    out = []
    for m in sorted(wrong.values(), key=lambda m: m.test.id):
        if m.test.id in parents:
            continue
        hosts = folded_hosts(m.test.hosts)
        summary = (f"all_reduce_perf across {len(m.test.hosts)} hosts returned {m.wrong:g} wrong elements "
                   f"(#wrong, test {m.test.id}): {hosts}")[:300]
        evidence = [Evidence("perf.nccl_wrong", m.wrong, "elements", baseline=0, source=m.source, snapshot=0)]
        host = m.test.hosts[0] if len(m.test.hosts) == 1 else None
        out.append(Finding("nccl-wrong-results", Severity.MAJOR, host, f"collective:{hosts}"[:200],
                           summary, evidence, confidence=0.9))
    return out


_DCGM_SEVERITY = {"fail": Severity.MAJOR, "error": Severity.MAJOR, "warn": Severity.MINOR, "warning": Severity.MINOR}


def dcgm_findings(capture: Capture, doc: ProbeDoc) -> list[Finding]:
    """`dcgmi diag` (--test gpu): a test that failed, errored or warned, per GPU it names (else the host)."""
    from fabricase.parsers.dcgm import parse_dcgmi_diag

    out = []
    for result in doc.results:
        if result.test.kind != "dcgmi" or result.status != "ok":
            continue
        source = item_source(result.test.id)
        text, _why = item_text(capture, result.test.reporter, source)
        for r in parse_dcgmi_diag(text):
            severity = _DCGM_SEVERITY.get(r.result.strip().lower())
            if severity is None:
                continue
            for comp in [f"gpu:{g}" for g in r.gpus] or ["host"]:
                summary = one_line(f"{comp}: dcgmi diag {r.test}: {r.result}" + (f": {r.detail}" if r.detail else ""),
                                    300)
                evidence = [Evidence("dcgm.diag", r.result, "state", baseline="Pass", source=source, snapshot=0)]
                out.append(Finding("dcgm-health", severity, result.test.reporter, comp, summary, evidence, 0.85))
    return out
