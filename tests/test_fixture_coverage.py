"""Every real capture copied into tests/fixtures/real is read by some test: no fixture sits there unparsed.

A file counts as read when a test or host-tree module names it, or names the folder it sits in (tests that
glob a whole folder). Each folder keeps the SOURCE.txt saying where its files came from.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent
REAL = TESTS / "fixtures" / "real"


def _test_sources() -> str:
    return "\n".join(p.read_text(errors="replace") for p in TESTS.rglob("*.py"))


def test_every_real_fixture_is_read_by_a_test():
    sources = _test_sources()
    orphans = []
    for path in sorted(REAL.rglob("*")):
        if not path.is_file() or path.name == "SOURCE.txt":
            continue
        named = {path.name, path.stem, *path.relative_to(REAL).parts[:-1]}
        if not any(f'"{name}' in sources or f"/{name}" in sources or f"{name}/" in sources for name in named):
            orphans.append(str(path.relative_to(REAL)))
    assert not orphans, orphans


def test_every_fixture_folder_says_where_it_came_from():
    def documented(folder: Path) -> bool:
        # A SOURCE.txt in the folder itself or in any folder above it, up to tests/fixtures/real.
        chain = [folder, *folder.parents]
        return any((p / "SOURCE.txt").is_file() for p in chain[: chain.index(REAL)])

    folders = {p.parent for p in REAL.rglob("*") if p.is_file() and p.name != "SOURCE.txt"}
    missing = [str(f.relative_to(REAL)) for f in sorted(folders) if not documented(f)]
    assert not missing, missing
