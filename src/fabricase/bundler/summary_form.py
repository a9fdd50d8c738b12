"""The summary form of a bundle: a capture of the suspects' hosts and sampled healthy peers, with a fleet summary.

A full bundle of a large fleet passes every desk's upload and part limits (AWS: 150 MiB). The summary form's
capture holds whole host folders of the selected hosts only (bundler.select) and a capture.json whose `hosts`
are those hosts, so that `analyze BUNDLE` reads exactly what is there and calls no left-out host unreachable,
while its `summary_bundle` record names every left-out host (a list, and a ClusterShell fold), says why they
are out and where the full bundle is (its sha256, size, and object when it was uploaded). `targets` is kept
whole: nothing pretends the other hosts were not targeted. The manifest repeats the record (`summary`) as the
redacted capture.json carries it, so `verify` says "summary bundle: N of M hosts" without unpacking anything.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricase.bundler.limits import DeskLimits, bundle_delivery
from fabricase.errors import BundleError, ConfigError
from fabricase.models import Bundle

__all__ = ["SUMMARY_KEY", "FittedBundle", "capture_summary", "fit_problem", "fold", "full_reference",
           "summary_capture", "summary_line", "summary_record"]

SUMMARY_KEY = "summary_bundle"  # in capture.json and (as `summary`) in MANIFEST.json
_NODESET_SHOWN = 60


@dataclass
class FittedBundle(Bundle):
    """A bundle with the form it took: `full`, or `summary` (then `record` is its summary_bundle record). full: the
    full bundle's reference (full_reference) when one was built beside it or uploaded; uploaded: the upload's
    result (with the presigned GET URL when asked: for the terminal and the provider, never for the bundle)."""

    form: str = "full"
    record: dict[str, Any] | None = None
    full: dict[str, Any] | None = None
    full_path: Path | None = None
    uploaded: Any = None
    note: str | None = None  # one line for the terminal: why the summary form, and what to do for the full one


def fold(hosts: Sequence[str]) -> str:
    """The hosts as one ClusterShell node set (`gpu[0001-0998,1000]`)."""
    from ClusterShell.NodeSet import NodeSet

    return str(NodeSet.fromlist(list(hosts))) if hosts else ""


def fit_problem(size: int, limits: DeskLimits, *, other_attachments: int = 1) -> str | None:
    """Why a bundle of `size` bytes cannot reach the desk by any of its paths (attach, large upload, parts), or
    None when it can."""
    try:
        bundle_delivery(size, limits, other_attachments=other_attachments)
    except ConfigError:
        parts = -(-size // limits.attachment_max_bytes) if limits.attachment_max_bytes else 0
        return (f"the full bundle ({size} bytes) needs {parts} parts, over the {limits.max_attachments} "
                f"attachments {limits.desk} takes")
    return None


def _in_order(included: Sequence[str], left_out: Sequence[str], order: Sequence[str] | None) -> list[str]:
    return list(order) if order is not None else sorted([*included, *left_out])


def summary_record(included: Sequence[str], left_out: Sequence[str], *, why: str,
                   full_bundle: dict[str, Any] | None, order: Sequence[str] | None = None) -> dict[str, Any]:
    """capture.json's `summary_bundle` record: `hosts` is every targeted host, in the capture's `order` (its
    `hosts` list holds only the bundled ones, so the loader reads only folders that are there). full_bundle: the
    full bundle's name, sha256, size and, when it was uploaded, `object` (its URL without the signature); None
    when it was not built (the capture stays local)."""
    return {
        "form": "summary",
        "hosts_targeted": len(included) + len(left_out),
        "hosts_included": len(included),
        "hosts": _in_order(included, left_out, order),
        "left_out": {"count": len(left_out), "nodeset": fold(left_out), "hosts": list(left_out)},
        "why": why,
        "fleet_summary": "fleet-summary.json",
        "full_bundle": full_bundle,
    }


def summary_line(record: dict[str, Any] | None) -> str | None:
    """`summary bundle: 12 of 1024 hosts; the rest left out (...)`, from a manifest's or capture.json's record;
    None for a full bundle."""
    if not isinstance(record, dict) or record.get("form") != "summary":
        return None
    out = record.get("left_out") if isinstance(record.get("left_out"), dict) else {}
    full = record.get("full_bundle") if isinstance(record.get("full_bundle"), dict) else None
    where = "the full capture stayed local"
    if full:
        where = f"full bundle sha256 {str(full.get('sha256'))[:16]}, {full.get('size')} bytes"
        if full.get("object"):
            where += f", at {full['object']}"
    nodeset = str(out.get("nodeset") or "-")
    if len(nodeset) > _NODESET_SHOWN:  # a fleet's fold can run to pages: the record keeps it whole
        nodeset = nodeset[:_NODESET_SHOWN - 3] + "..."
    return (f"summary bundle: {record.get('hosts_included')} of {record.get('hosts_targeted')} hosts; the rest "
            f"left out ({out.get('count')} hosts without a suspect, {nodeset}; fleet-summary.json has "
            f"their distributions; {where})")


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where the file system allows (the copy is only read, then deleted), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def summary_capture(capture_root: Path, dest: Path, included: Sequence[str], record: dict[str, Any]) -> Path:
    """Write the summary form's capture under `dest` (a new folder): every top-level file and folder of the
    capture, host folders of `included` only (whole), and capture.json with `hosts` = included and the record."""
    capture_root, dest = Path(capture_root), Path(dest)
    from fabricase.bundler.archive import capture_json

    meta_path = capture_root / "capture.json"
    meta = capture_json(capture_root)
    if meta is None:
        raise BundleError("capture.json is missing", where=str(meta_path))
    dest.mkdir(parents=True)
    keep = set(included)
    for entry in sorted(capture_root.iterdir()):
        if entry.name == "capture.json":
            continue
        if entry.name == "hosts" and entry.is_dir():
            (dest / "hosts").mkdir()
            for hdir in sorted(entry.iterdir()):
                if hdir.name in keep:
                    shutil.copytree(hdir, dest / "hosts" / hdir.name, symlinks=True, copy_function=_link_or_copy)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, dest / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(str(entry), str(dest / entry.name))
    meta["hosts"] = [h for h in meta.get("hosts", []) if h in keep]
    meta[SUMMARY_KEY] = record
    (dest / "capture.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return dest


def full_reference(path: Path, uploaded: Any = None) -> dict[str, Any]:
    """How a summary bundle and a ticket name the full bundle: file name, sha256 and size, and the object it was
    uploaded to (its URL without the signature) when it was."""
    import hashlib

    with Path(path).open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    ref: dict[str, Any] = {"name": Path(path).name, "sha256": digest, "size": Path(path).stat().st_size}
    if uploaded is not None:
        ref["object"] = uploaded.object
    return ref


def capture_summary(capture_root: Path) -> dict[str, Any] | None:
    """A loaded capture's summary-bundle record (capture.json `summary_bundle`), None for a full capture: what
    `analyze BUNDLE` and `draft BUNDLE` say was left out (summary_line)."""
    try:
        doc = json.loads((Path(capture_root) / "capture.json").read_bytes())
    except (OSError, ValueError):
        return None
    record = doc.get(SUMMARY_KEY) if isinstance(doc, dict) else None
    return record if isinstance(record, dict) else None
