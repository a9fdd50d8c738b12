"""Golden files: expected output kept next to the tests. `FABRICASE_UPDATE_GOLDEN=1 pytest tests/templates`
rewrites them from the current output; review the diff before committing it."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
UPDATE_ENV = "FABRICASE_UPDATE_GOLDEN"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV) == "1":
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with {UPDATE_ENV}=1 to create it"
    assert text == path.read_text(), f"{name} differs from its golden file ({UPDATE_ENV}=1 to accept)"
