"""Replay: a capture directory (from `collect`, or an unpacked bundle) stands in for the hosts.

Nothing is run; the hosts, their statuses and every item come back exactly as they were captured, so an
analysis of a replay equals the analysis of the live run it came from.
"""

from __future__ import annotations

from pathlib import Path

from fabricase.capturedir import load_capture
from fabricase.models import Capture

__all__ = ["load_replay"]


def load_replay(path: Path) -> Capture:
    """Load and verify every item of a capture directory; errors name the directory or item at fault."""
    return load_capture(path, verify=True)
