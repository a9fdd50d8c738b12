"""No AWS access key id is committed in the project's own code, tests or benchmarks: test credentials are made at
run time from random values (tests/loopback.random_aws_keys). The one literal allowed is AWS's
documented example id, which the redaction tests use as the form every AWS document shows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")
DOCUMENTED = {"AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLF"}  # AWS's example id, and it one letter off


def test_no_aws_access_key_id_literal_outside_the_documented_example():
    found = []
    for folder in ("src", "tests", "benchmarks", "deploy", "docs"):
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or "fixtures" in path.parts or path.suffix not in {".py", ".md", ".toml", ".yaml",
                                                                                     ".yml", ".json", ".sh", ".txt"}:
                continue
            for match in KEY_ID.finditer(path.read_text(errors="replace")):
                if match.group() not in DOCUMENTED:
                    found.append(f"{path.relative_to(ROOT)}: {match.group()}")
    assert not found, found
