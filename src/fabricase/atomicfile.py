"""One way to replace a file whole: write a temporary file beside it, then rename it over the target.

The temporary name is unique per call (random, created exclusively), so that two processes storing the same
file at once (four `open`s of one replay, two trackers refreshing one cache) each rename their own copy: the
last one wins and neither fails. A fixed name such as `.placements.json.tmp` let the first rename take the
second writer's file away from under it (ENOENT)."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

__all__ = ["copy_atomic", "replace_bytes", "replace_text"]


def _replace_with(path: Path, fill) -> None:
    # O_EXCL on a random name: never someone else's file; mode 0666 less the umask, as a plain open() gives.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_bytes(path: Path, data: bytes) -> None:
    """Store data as path, whole or not at all."""
    _replace_with(Path(path), lambda fh: fh.write(data))


def replace_text(path: Path, text: str) -> None:
    """Store text (UTF-8) as path, whole or not at all."""
    replace_bytes(path, text.encode("utf-8"))


def copy_atomic(source: Path, target: Path) -> None:
    """Copy source to target, whole or not at all."""
    with open(source, "rb") as src:
        _replace_with(Path(target), lambda fh: shutil.copyfileobj(src, fh))
