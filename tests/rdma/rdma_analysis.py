"""Shared by the rdma tests: run the rdma analysis over one captured host."""

from __future__ import annotations

from fabricase.analysis.rdma import RULES, rdma_samples
from fabricase.models import HostCapture


def analyze(hc: HostCapture):
    """(samples by (component, metric), findings sorted like fabricase.analysis.sort_findings)."""
    samples = rdma_samples(hc)
    findings = sorted((f for rule in RULES for f in rule(hc, samples)), key=lambda f: (f.sort_key, f.summary))
    return {(s.component, s.metric): s for s in samples}, findings
