"""The corpus capture, built once per session, and its bundles (secrets only, and pseudonymized)."""

from __future__ import annotations

import pytest
from corpus import Corpus, build_corpus
from redact_support import MTIME, Built, findings_of, make_redactor

from fabricase.bundler import build_bundle


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
