"""STYLE.md's "split past ~500 lines", held: no module of the package, the tests or the benchmarks grows past
MAX_LINES unnoticed. A module that must be longer is split along its seam, its public names re-exported where
callers import them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parents[1]
MAX_LINES = 500
TREES = ("src/fabricase", "tests", "benchmarks")


def _long_modules(root: Path, limit: int) -> list[str]:
    long = []
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            with path.open("rb") as fh:
                lines = sum(1 for _ in fh)
            if lines > limit:
                long.append(f"{path.relative_to(root)}: {lines} lines")
    return long


def test_no_module_is_past_the_split_limit():
    assert _long_modules(ROOT, MAX_LINES) == []


def test_the_check_finds_a_long_module(tmp_path):
    package = tmp_path / "src" / "fabricase"
    package.mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * MAX_LINES)
    (package / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert _long_modules(tmp_path, MAX_LINES) == [f"src/fabricase/long.py: {MAX_LINES + 1} lines"]
