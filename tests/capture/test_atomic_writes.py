"""Two processes storing the same file at once must both succeed (the CI race: four `open`s of one replay all
store placements.json; with one fixed temporary name the first rename took the second writer's file away and
it failed with 'No such file or directory')."""

from __future__ import annotations

import multiprocessing
import os
import stat

import pytest

from fabricase import atomicfile
from fabricase.atomicfile import copy_atomic, replace_bytes
from fabricase.capturedir import load_placements, write_placements
from fabricase.models import Placement

WRITERS = 6
ROUNDS = 40


def _store(root: str, barrier, n: int, results) -> None:
    from pathlib import Path
    placements = [Placement(host=f"gpu-{i:03d}", provider="static", topology=[f"leaf-{i // 8}"]) for i in range(64)]
    failures = 0
    for _ in range(ROUNDS):
        barrier.wait()
        try:
            write_placements(Path(root), placements)
        except Exception:  # noqa: BLE001 - counted, reported by the parent
            failures += 1
        barrier.wait()
        if n == 0:
            (Path(root) / "placements.json").unlink(missing_ok=True)
    results.put(failures)


def test_concurrent_writers_of_one_placements_file_all_succeed(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WRITERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_store, args=(str(tmp_path), barrier, n, results)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    failures = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sum(failures) == 0, failures
    write_placements(tmp_path, [Placement(host="gpu-000", provider="static")])
    assert [p.host for p in load_placements(tmp_path)] == ["gpu-000"]
    assert [p.name for p in tmp_path.iterdir()] == ["placements.json"]  # no temporary file left behind


def test_replace_leaves_nothing_on_failure_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "f.json"
    target.write_bytes(b"old")

    class Boom(Exception):
        pass

    def fill_fails(*_):
        raise Boom

    with pytest.raises(Boom):
        atomicfile._replace_with(target, fill_fails)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_mode_follows_the_umask_like_a_plain_write(tmp_path):
    old = os.umask(0o027)
    try:
        replace_bytes(tmp_path / "a", b"x")
        copy_atomic(tmp_path / "a", tmp_path / "b")
    finally:
        os.umask(old)
    for name in ("a", "b"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640
    assert (tmp_path / "b").read_bytes() == b"x"
