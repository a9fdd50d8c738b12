"""A generated fleet capture (benchmarks/fleetgen.py: one host with a downshifted port) and its analysis, for the
summary-bundle tests; the desk's limits are made small through desk_limits overrides instead of a huge capture."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fleetgen  # noqa: E402

from fabricase.capturedir import load_capture  # noqa: E402
from fabricase.escalate import make_draft, severity_of  # noqa: E402
from fabricase.models import Capture, TicketDraft  # noqa: E402
from fabricase.pipeline import Analysis, diagnose_capture  # noqa: E402

HOSTS = 40


@dataclass
class Fleet:
    capture: Capture
    analysis: Analysis
    draft: TicketDraft


def make_fleet(root: Path, hosts: int = HOSTS, kind: str = "speed-downshift") -> Fleet:
    names = [f"gpu{i:04d}" for i in range(1, hosts + 1)]
    fleetgen.build(fleetgen.Scenario("summary", kind, names), root, seed=7, ib_only=True)
    capture = load_capture(root)
    analysis = diagnose_capture(capture)
    draft = make_draft(capture, analysis.findings, provider="aws", symptom="busbw fell",
                       severity=severity_of(analysis.diagnosis), placements=[], bundle_id=None,
                       escalation_id=None, diagnosis=analysis.diagnosis)
    return Fleet(capture, analysis, draft)
