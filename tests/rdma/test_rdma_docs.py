"""docs/counters.md documents every normalized metric; docs/findings.md every finding kind."""

import inspect
import re
from pathlib import Path

from fabricase.analysis import rdma
from fabricase.parsers.rdma import NORMALIZED

DOCS = Path(__file__).parents[2] / "docs"


def test_every_normalized_metric_and_its_raw_names_are_documented():
    text = (DOCS / "counters.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z0-9_.]+)` \|.*$", text, re.M)}
    assert set(rows) == set(NORMALIZED)
    for metric, spec in NORMALIZED.items():
        assert f"| {spec.unit} |" in rows[metric], metric
        for raw, _ in spec.sources:
            assert raw in rows[metric] or raw in text, (metric, raw)


def test_every_finding_kind_is_documented():
    kinds = set(re.findall(r'"(rdma-[a-z-]+)"', inspect.getsource(rdma)))
    assert kinds == {"rdma-port-down", "rdma-link-flap", "rdma-symbol-errors", "rdma-port-errors",
                     "rdma-transport-errors", "rdma-speed-downshift", "rdma-counter-saturated"}
    text = (DOCS / "findings.md").read_text()
    for kind in kinds:
        assert f"| `{kind}` |" in text, kind


def test_counters_page_links_the_other_families():
    text = (DOCS / "counters.md").read_text()
    assert "\n## Ethernet / PFC / PCIe\n" in text and "(counters-ethernet.md)" in text
    assert "\n## NVIDIA GPU fabric\n" in text and "(counters-nvidia.md)" in text
