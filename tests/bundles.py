"""Bundles for provider tests, built as the bundler builds them: real archives that verify and hold their
redaction report, so the redaction gate passes them as they are (docs/redaction.md, "The gate")."""

from __future__ import annotations

from pathlib import Path

from fabricase.bundler.archive import build_bundle
from fabricase.redact import REDACTION_NAME, Redactor, redaction_json

__all__ = ["redacted_bundle"]


def redacted_bundle(out: Path, *, payload: bytes = b"", mtime: int = 1_800_000_000) -> Path:
    """A bundle at `out` of one capture file (noise.bin, `payload`) and an empty redaction report. Random bytes
    hold no secret, but a bundle without its report is redacted as a file, and a chance match of the rules in
    those bytes would change them."""
    capture = out.parent / f"{out.name}-capture"
    capture.mkdir(parents=True)
    (capture / "noise.bin").write_bytes(payload)
    report = {REDACTION_NAME: redaction_json(Redactor().report())}
    return build_bundle(capture, out, extra=report, mtime=mtime).path
