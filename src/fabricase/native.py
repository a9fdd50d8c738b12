"""The optional C extension, fabricase._native, and whether it is in use.

Four hot loops have a C version (src/fabricase/_native.c): the plain `ethtool -S` table (parsers.ethtool), the
clean item frames of a capture stream (collectors.framing), the recording of those items into the capture index
(capture_scan; built with OpenSSL's headers, it hashes them too), and the plain `nvidia-smi -q -x` report
(parsers.nvidia_smi). Each is exact: it returns what the Python
original returns, or declines (None, NotImplemented, or stopping early) and the Python code reads that input
itself, with its own errors. setup.py builds the extension where a C compiler and Python's headers are present;
without it, or with FABRICASE_NO_NATIVE=1 in the environment (benchmarks compare the two), the Python versions
run alone. tests/test_native.py holds each C function equal to its Python original.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["HASHES", "IN_USE", "describe", "index_items", "plain_counters", "scan_items", "xml_tops"]


def _load() -> tuple[Any, str]:
    """The extension module (or None) and, for the --debug trace, why."""
    if os.environ.get("FABRICASE_NO_NATIVE", "") not in ("", "0"):
        return None, "off (FABRICASE_NO_NATIVE)"
    try:
        from fabricase import _native
    except ImportError as exc:
        return None, f"not built ({exc}): the Python versions run"
    return _native, "in use" + ("" if _native.HASHES else ", without OpenSSL (items hashed in Python)")


def describe() -> str:
    """One line for the --debug trace: whether the C extension is in use."""
    return f"C extension fabricase._native: {_STATE}"


_MODULE, _STATE = _load()
IN_USE: bool = _MODULE is not None
# None where the extension is not in use: the callers keep their Python path.
plain_counters: Callable[..., Any] | None = _MODULE.plain_counters if IN_USE else None
scan_items: Callable[[bytes, int, int], tuple[list[tuple[int, bytes, str, int, int]], int]] | None = (
    _MODULE.scan_items if IN_USE else None)
index_items: Callable[..., tuple[int, int, int]] | None = _MODULE.index_items if IN_USE else None
xml_tops: Callable[[str, str, int], list[tuple] | None] | None = _MODULE.xml_tops if IN_USE else None
HASHES: bool = IN_USE and bool(_MODULE.HASHES)  # index_items hashes each item (built with OpenSSL)
