"""docs/findings.md documents every kind the GPU and kernel rules can emit, and docs/counters-nvidia.md
every normalized metric gpu_samples produces for the golden host."""

from __future__ import annotations

import re
from pathlib import Path

import fabricase.analysis.gpu as gpu_rules
import fabricase.analysis.kernel as kernel_rules

DOCS = Path(__file__).parents[2] / "docs"


def _emitted_kinds() -> set[str]:
    source = Path(gpu_rules.__file__).read_text() + Path(kernel_rules.__file__).read_text()
    return set(re.findall(r'Finding\(\s*"([a-z-]+)"', source)) | set(re.findall(r'"(nic-[a-z-]+)", Severity', source))


def test_every_kind_is_documented():
    kinds = _emitted_kinds()
    assert len(kinds) == 16, sorted(kinds)
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", (DOCS / "findings.md").read_text(), re.M))
    assert kinds <= documented


def test_every_metric_is_documented():
    text = (DOCS / "counters-nvidia.md").read_text()
    metrics = re.findall(r"\"((?:gpu|pcie|fabric|nvlink|nvswitch|fabric_manager|imex|dcgm)\.[a-z_.]+?)\"",
                         Path(gpu_rules.__file__).read_text())  # fmt: skip
    missing = {m for m in metrics if f"`{m}`" not in text and not m.endswith(".")}
    assert missing == set()
