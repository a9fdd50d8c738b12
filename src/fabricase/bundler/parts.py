"""A bundle too large for a desk, as parts that each verify on their own (a small bundle holding one slice of the
whole, and the list of every slice's sha256) and join back to the same bytes (`verify.join_parts`).
Format: docs/bundles.md."""

from __future__ import annotations

import hashlib
import json
import math
import shlex
import tempfile
from pathlib import Path
from typing import Any

from fabricase.bundler.archive import build_bundle
from fabricase.bundler.verify import (
    PART_DATA,
    PART_FORMAT,
    PART_FORMAT_VERSION,
    PART_INFO,
    bundle_id_of,
    verify_bundle,
)
from fabricase.errors import BundleError, VerifyError

__all__ = ["MIN_PART_BYTES", "part_names", "split_bundle"]

MIN_PART_BYTES = 64 * 1024
_CHUNK = 1 << 20


def part_names(bundle_name: str, count: int) -> list[str]:
    """`<name>.part001-of-003`, ...: zero-padded, so that a shell glob lists them in order."""
    width = max(3, len(str(count)))
    return [f"{bundle_name}.part{k:0{width}d}-of-{count:0{width}d}" for k in range(1, count + 1)]


def _gzip_mtime(path: Path) -> int:
    """The bundle's pinned time (its gzip header's MTIME): the parts carry the same."""
    with path.open("rb") as fh:
        head = fh.read(10)
    if len(head) < 10 or head[:2] != b"\x1f\x8b":
        raise BundleError("not a gzip file", where=str(path))
    return int.from_bytes(head[4:8], "little")


def _slices(path: Path, size: int, slice_bytes: int) -> list[dict[str, Any]]:
    out = []
    with path.open("rb") as fh:
        for k, offset in enumerate(range(0, size, slice_bytes), start=1):
            data = fh.read(slice_bytes)
            out.append({"index": k, "offset": offset, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return out


def _whole_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _part_info(parent: dict[str, Any], slices: list[dict[str, Any]], index: int) -> bytes:
    names = part_names(parent["name"], len(slices))
    doc = {
        "format": PART_FORMAT,
        "format_version": PART_FORMAT_VERSION,
        "parent": parent,
        "index": index,
        "count": len(slices),
        "parts": [{**s, "name": n} for s, n in zip(slices, names, strict=True)],
        # joined without fabricase: the slices in order (the zero-padded names sort so), then compare sha256
        "join": f"for p in {shlex.quote(parent['name'])}.part*-of-{names[0].rsplit('-of-', 1)[1]}; "
                f"do tar -xzOf \"$p\" {PART_DATA}; done > {shlex.quote(parent['name'])}",
    }
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def split_bundle(bundle_path: Path, part_bytes: int, *, out_dir: Path | None = None) -> list[Path]:
    """The bundle as parts of at most `part_bytes` each, written to `out_dir` (default: beside it); the
    bundle itself, alone, when it already fits. Each part is a bundle of its own that `verify_bundle` checks
    (PART.json and one slice, part.bin); `verify.join_parts` puts the slices back together. The bundle is
    verified first: a damaged bundle is not split. Deterministic: the same bundle gives the same parts."""
    bundle_path = Path(bundle_path)
    try:
        size = bundle_path.stat().st_size
    except OSError as exc:
        raise BundleError(f"cannot read: {exc.strerror or exc}", where=str(bundle_path)) from exc
    if isinstance(part_bytes, bool) or not isinstance(part_bytes, int) or part_bytes < MIN_PART_BYTES:
        raise BundleError(f"a part must be allowed at least {MIN_PART_BYTES} bytes, not {part_bytes!r}")
    if size <= part_bytes:
        return [bundle_path]
    report = verify_bundle(bundle_path)
    if not report.ok:
        raise VerifyError(f"not split: the bundle fails verification ({report.problems[0]})",
                          where=str(bundle_path), problems=report.problems)
    out_dir = Path(out_dir) if out_dir is not None else bundle_path.parent
    parent = {"name": bundle_path.name, "size": size, "sha256": _whole_sha256(bundle_path),
              "bundle_id": bundle_id_of(bundle_path)}
    mtime = _gzip_mtime(bundle_path)
    # a part holds its slice plus its own manifest, PART.json (one line per part) and tar/gzip framing
    overhead = 4096 + part_bytes // 512
    for _ in range(8):
        count = math.ceil(size / (part_bytes - overhead))
        slice_bytes = part_bytes - overhead - 128 * count
        if slice_bytes < part_bytes // 2:
            raise BundleError(f"{count} parts of {part_bytes} bytes would be mostly overhead; allow larger parts",
                              where=str(bundle_path))
        slices = _slices(bundle_path, size, slice_bytes)
        paths = _write_parts(bundle_path, parent, slices, mtime, out_dir)
        excess = max(p.stat().st_size for p in paths) - part_bytes
        if excess <= 0:
            return paths
        for p in paths:
            p.unlink()
        overhead += excess + 4096
    raise BundleError("could not fit the parts to the size given", where=str(bundle_path))


def _write_parts(bundle_path: Path, parent: dict[str, Any], slices: list[dict[str, Any]], mtime: int,
                 out_dir: Path) -> list[Path]:
    paths = []
    with tempfile.TemporaryDirectory(prefix="fabricase-part-") as empty, bundle_path.open("rb") as fh:
        for s, name in zip(slices, part_names(parent["name"], len(slices)), strict=True):
            fh.seek(s["offset"])
            data = fh.read(s["size"])
            extra = {PART_INFO: _part_info(parent, slices, s["index"]), PART_DATA: data}
            paths.append(build_bundle(Path(empty), out_dir / name, extra=extra, mtime=mtime).path)
    return paths
