"""docs/diagnosis.md stays true: its verdict table and its kind -> verdict table are VERDICTS and KIND_VERDICTS,
every finding kind docs/findings.md documents has a verdict, and its JSON example has a suspect's every field."""

from __future__ import annotations

import json
import re
from pathlib import Path

from suspect_builders import delta, finding, nic_port_hardware, outcomes

from fabricase.diagnosis import KIND_VERDICTS, VERDICTS, diagnose
from fabricase.diagnosis.verdicts import COMPUTED_KINDS

DOCS = Path(__file__).parents[2] / "docs"
DOC = DOCS / "diagnosis.md"


def verdict_table() -> str:
    rows = ["| verdict | in words | owner | ticket title | action |", "|---|---|---|---|---|"]
    rows += [f"| `{v.name}` | {v.text} | {v.owner} | {v.title} | {v.action} |" for v in VERDICTS.values()]
    return "\n".join(rows)


def kind_table() -> str:
    rows = ["| finding kind | verdict |", "|---|---|"]
    rows += [f"| `{kind}` | `{verdict}` |" for kind, verdict in sorted(KIND_VERDICTS.items())]
    return "\n".join(rows)


def _section(name: str) -> str:
    m = re.search(rf"<!-- {name} -->\n(.*?)\n<!-- /{name} -->", DOC.read_text(), re.S)
    assert m, f"docs/diagnosis.md has no <!-- {name} --> block"
    return m.group(1)


def test_the_verdict_table_is_verdicts():
    assert _section("verdicts") == verdict_table(), "regenerate with tests/diagnosis/test_diagnosis_doc.py"


def test_the_kind_table_is_kind_verdicts():
    assert _section("kinds") == kind_table(), "regenerate with tests/diagnosis/test_diagnosis_doc.py"


def test_every_documented_finding_kind_has_a_verdict():
    text = (DOCS / "findings.md").read_text()
    # Kind tables have a kind in the first column and a severity in the second; the field tables do not.
    kinds = set(re.findall(r"^\| `([a-z0-9]+(?:-[a-z0-9]+)+)` \| (?:major|minor|critical|info|the )", text, re.M))
    assert kinds, "no kinds found in docs/findings.md"
    # limits, not faults: they go to the diagnosis's `limits`
    missing = kinds - set(KIND_VERDICTS) - set(COMPUTED_KINDS) - {"fleet-too-small", "switch-power-limit"}
    assert not missing
    for kind in COMPUTED_KINDS:
        assert f"`{kind}`" in DOC.read_text()


def test_the_json_example_has_every_field_of_a_suspect():
    example = json.loads(re.search(r"```json\n(.*?)```", DOC.read_text(), re.S).group(1))
    d = diagnose([finding("rdma-symbol-errors", "rdma:mlx5_3/1", evidence=[delta("phy.symbol_errors_uncorrected",
                                                                                40)])],
                 hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()})
    real = d.to_dict()
    assert set(example) == set(real)
    assert set(example["suspects"][0]) == set(real["suspects"][0])
    assert set(example["background"][0]) == {"metric", "family", "rose_on", "compared", "median_rate", "unit",
                                             "findings", "text"}


if __name__ == "__main__":  # print the tables to paste into docs/diagnosis.md
    print(verdict_table(), kind_table(), sep="\n\n")
