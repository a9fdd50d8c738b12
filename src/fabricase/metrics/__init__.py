"""Prometheus metrics: a capture's counters, link states, perf results and findings, and the tracker's open
escalations, under stable names (names.py, docs/metrics.md), written as a node_exporter textfile or served."""

from fabricase.metrics.exposition import (
    FamiliesCollector,
    capture_families,
    escalation_series,
    exported_samples,
    families,
    registry_of,
)
from fabricase.metrics.names import METRICS, MetricDef, metric_names
from fabricase.metrics.textfile import TEXTFILE_NAME, render, write_textfile

__all__ = [
    "METRICS",
    "TEXTFILE_NAME",
    "FamiliesCollector",
    "MetricDef",
    "capture_families",
    "escalation_series",
    "exported_samples",
    "families",
    "metric_names",
    "registry_of",
    "render",
    "write_textfile",
]
