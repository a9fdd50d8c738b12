"""fleet-summary.json: per class, the distribution of every counter analysis used, over every host.

A summary bundle leaves most hosts out; this is what lets the provider still judge "is this port's count odd
for this fleet?". It is computed from the samples analysis already read (pipeline.Analysis.samples), never by
reading the capture again. Per counter (metric and unit), per class (bundler.select.host_classes) and per
quantity (`delta`: the increase over the interval for counters, else `value`): the number of samples and of
hosts, how many hosts had a nonzero one, min, p50, p90, p99, max and sum. Pure and deterministic: the same
samples give the same bytes (keys sorted, numbers as numpy computes them in float64).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fabricase.models import MetricSample

__all__ = ["FLEET_SUMMARY_FORMAT", "FLEET_SUMMARY_NAME", "fleet_summary", "fleet_summary_bytes"]

FLEET_SUMMARY_NAME = "fleet-summary.json"
FLEET_SUMMARY_FORMAT = "fabricase-fleet-summary"
_PERCENTILES = (50, 90, 99)


def _quantity(s: MetricSample) -> tuple[str, float] | None:
    if s.delta is not None:
        return "delta", float(s.delta)
    if isinstance(s.value, int | float) and not isinstance(s.value, bool):
        return "value", float(s.value)
    return None  # not exposed: missing is not 0, so it is not counted


def _number(x: float) -> int | float:
    """Integers stay integers in the JSON (counters are), so the file reads as the counters do."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def _stats(values: np.ndarray, hosts: np.ndarray) -> dict[str, Any]:
    p = np.percentile(values, _PERCENTILES)
    return {
        "samples": int(values.size),
        "hosts": int(np.unique(hosts).size),
        "hosts_nonzero": int(np.unique(hosts[values != 0]).size),
        "min": _number(values.min()),
        **{f"p{q}": _number(v) for q, v in zip(_PERCENTILES, p, strict=True)},
        "max": _number(values.max()),
        "sum": _number(values.sum()),
    }


def fleet_summary(samples: Mapping[str, Sequence[MetricSample]], classes: Mapping[str, str]) -> dict[str, Any]:
    """The fleet-summary document: `classes` (label -> host count) and `counters` (metric -> class ->
    quantity -> stats). Hosts without a class (not in `classes`) are left out of the distributions."""
    grouped: dict[tuple[str, str, str, str], tuple[list[float], list[str]]] = {}
    for host in sorted(samples):
        label = classes.get(host)
        if label is None:
            continue
        for s in samples[host]:
            q = _quantity(s)
            if q is None:
                continue
            values, owners = grouped.setdefault((s.metric, s.unit or "", label, q[0]), ([], []))
            values.append(q[1])
            owners.append(host)
    counters: dict[str, dict[str, Any]] = {}
    for (metric, unit, label, quantity), (values, owners) in sorted(grouped.items()):
        entry = counters.setdefault(metric, {"unit": unit, "classes": {}})
        stats = _stats(np.asarray(values, dtype=np.float64), np.asarray(owners))
        entry["classes"].setdefault(label, {})[quantity] = stats
    sizes: dict[str, int] = {}
    for label in classes.values():
        sizes[label] = sizes.get(label, 0) + 1
    return {"format": FLEET_SUMMARY_FORMAT, "format_version": 1, "hosts": len(classes),
            "classes": dict(sorted(sizes.items())), "counters": counters}


def fleet_summary_bytes(samples: Mapping[str, Sequence[MetricSample]], classes: Mapping[str, str]) -> bytes:
    return (json.dumps(fleet_summary(samples, classes), indent=1, sort_keys=True) + "\n").encode("utf-8")
