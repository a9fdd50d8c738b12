"""Analysis: metric samples and rules over a capture directory, producing ranked findings.

Pure: the same capture gives the same findings, in the same order, on any machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from fabricase.analysis.netdev import netdev_samples
from fabricase.analysis.rules import RULES
from fabricase.errors import ParseError
from fabricase.models import Capture, Finding, HostCapture

__all__ = ["analyze", "analyze_host", "findings_from_json", "findings_to_json", "sort_findings"]


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then host, component, kind; the summary breaks remaining ties."""
    return sorted(findings, key=lambda f: (f.sort_key, f.summary))


def analyze_host(hc: HostCapture) -> list[Finding]:
    """Every rule's findings for one host, sorted."""
    samples = netdev_samples(hc)
    return sort_findings(finding for rule in RULES for finding in rule(hc, samples))


def analyze(capture: Capture) -> list[Finding]:
    """Findings for every host of a capture, sorted by Finding.sort_key; deterministic."""
    return sort_findings(f for hc in capture.hosts for f in analyze_host(hc))


def findings_to_json(findings: Iterable[Finding]) -> str:
    """A JSON array of findings (docs/findings.md), keys sorted, two-space indent, trailing newline."""
    return json.dumps([f.to_dict() for f in findings], sort_keys=True, indent=2, allow_nan=False) + "\n"


def findings_from_json(text: str) -> list[Finding]:
    """Findings from findings_to_json's output (also accepts {"findings": [...]})."""
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            data = data["findings"]
        if not isinstance(data, list):
            raise TypeError(f"expected a list of findings, got {type(data).__name__}")
        return [Finding.from_dict(d) for d in data]
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"not a findings document: {exc}", where="findings JSON") from exc
