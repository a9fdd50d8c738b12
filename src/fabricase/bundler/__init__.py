"""Deterministic evidence bundles: build, verify, extract."""

from fabricase.bundler.archive import build_bundle, capture_mtime
from fabricase.bundler.verify import VerifyReport, extract_bundle, read_manifest, verify_bundle

__all__ = ["VerifyReport", "build_bundle", "capture_mtime", "extract_bundle", "read_manifest", "verify_bundle"]
