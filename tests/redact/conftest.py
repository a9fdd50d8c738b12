"""The corpus capture, built once per session, and its bundles (secrets only, and pseudonymized)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from corpus import Corpus, build_corpus

from fabricase.analysis import analyze, findings_to_json
from fabricase.bundler import build_bundle
from fabricase.capturedir import load_capture, load_placements
from fabricase.models import Bundle
from fabricase.pipeline import topology_of
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


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Corpus:
    return build_corpus(tmp_path_factory.mktemp("corpus") / "capture")


@pytest.fixture(scope="session")
def original_findings(corpus) -> str:
    return findings_of(corpus.root)


@pytest.fixture(scope="session", params=[False, True], ids=["secrets", "pseudonymized"])
def built(request, corpus, original_findings, tmp_path_factory) -> Built:
    redactor = make_redactor(corpus, request.param)  # a test may ask for one: parametrize("built", [True])
    extra = corpus.extra(original_findings)
    out = tmp_path_factory.mktemp("bundles") / "bundle.tar.gz"
    bundle = build_bundle(corpus.root, out, extra=extra, mtime=MTIME, redactor=redactor)
    return Built(bundle, redactor, original_findings, extra)
