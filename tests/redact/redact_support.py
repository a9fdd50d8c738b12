"""Shared by the redaction tests (imported by name: a bare `conftest` import is ambiguous across test folders)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from corpus import Corpus

from fabricase.analysis import analyze, findings_to_json
from fabricase.capturedir import load_capture, load_placements
from fabricase.models import Bundle
from fabricase.placements import topology_of
from fabricase.redact import Redactor

KEY = bytes(range(32))  # one escalation's key
OTHER_KEY = bytes(range(1, 33))
MTIME = 1796083200  # 2026-12-01T00:00:00Z


@dataclass
class Built:
    bundle: Bundle
    redactor: Redactor
    findings_json: str  # the original capture's findings
    extra: dict[str, bytes]


def findings_of(capture_dir: Path) -> str:
    """Findings as `fabricase analyze` gives them, with the placements stored in the capture."""
    return findings_to_json(analyze(load_capture(capture_dir), topology_of(load_placements(capture_dir) or [])))


def make_redactor(corpus: Corpus, pseudonymize: bool, key: bytes = KEY) -> Redactor:
    return Redactor(pseudonymize=pseudonymize, key=key if pseudonymize else None, hosts=corpus.hosts)
