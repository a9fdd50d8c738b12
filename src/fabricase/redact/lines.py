"""Run line-local rules on only the lines that can match.

A kernel log or an `nvidia-smi -q` output is megabytes, and a regex tried at every position of it is slow
(a lookbehind or a case-insensitive alternation defeats the engine's literal scan). A cheap finder locates the
few candidate lines; the rules run on those lines joined, and the result is spliced back. This is exact for
rules that never match across a line break and never add or remove one: those are the only ones given here.

Vendor tokens (`ghp_…`, `hf_…`, `sk-proj-…`) have no common literal to look for, and a hundred literal scans
over a 10 MB log cost more than the whole redaction. But each is a run of 24 or more token characters
(letters, digits and `_-.$/+=~@`), and such runs are rare outside secrets: `token_runs` finds them with one
byte translation and one literal search, and `on_runs` runs the token rules on those runs only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["RUN_CHARS", "RUN_MIN", "WINDOW_MIN", "ascii_lower", "literal_hits", "on_lines", "on_runs", "regex_hits",
           "token_runs"]

WINDOW_MIN = 4096  # shorter texts are cheaper to search whole
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_LOWER_BYTES = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_TRANSLATE_MAX = 4096  # below this str.translate is as fast as the round trips
RUN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.$/+=~@"  # not `:`: time stamps
RUN_MIN = 24  # the shortest token a run-local rule may match
_RUN_TABLE = bytes(ord("a") if chr(i) in RUN_CHARS else ord(" ") for i in range(256))
_RUN_BYTES = re.compile(b"a" * RUN_MIN + b"a*")


def ascii_lower(text: str) -> str:
    """`text` with A-Z lowered and nothing else changed: positions stay those of `text` (str.lower can
    lengthen some non-ASCII characters). str.translate runs at a few MB/s on latin-1 text (a binary file read
    as latin-1 by the gate, a log with accents), so such text is lowered as bytes, in one pass of C."""
    if text.isascii():
        return text.lower()
    if len(text) >= _TRANSLATE_MAX:
        try:
            return text.encode("latin-1").translate(_ASCII_LOWER_BYTES).decode("latin-1")
        except UnicodeEncodeError:  # a character past U+00FF: str.translate is not slow on those
            pass
    return text.translate(_ASCII_LOWER)


def literal_hits(lowered: str, anchors: tuple[str, ...]) -> list[int]:
    """Where any of `anchors` occurs in `lowered`, sorted (str.find: a fast scan, unlike a case-insensitive
    regex alternation)."""
    hits = []
    for anchor in anchors:
        pos = lowered.find(anchor)
        while pos >= 0:
            hits.append(pos)
            pos = lowered.find(anchor, pos + 1)
    return sorted(hits)


def regex_hits(text: str, finder: re.Pattern[str]) -> list[int]:
    return [m.start() for m in finder.finditer(text)]


def on_lines(text: str, hits: Callable[[str], list[int]], apply: Callable[[str], str]) -> str:
    """`apply` (line-local, newline-preserving) run on the lines of `text` that hold one of `hits(text)`."""
    if len(text) < WINDOW_MIN:
        return apply(text)
    spans: list[list[int]] = []  # [start, end) of runs of candidate lines
    for at in hits(text):
        if spans and at <= spans[-1][1]:
            continue  # on a line already taken
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if spans and start <= spans[-1][1] + 1:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    if not spans:
        return text
    pieces = [text[start:end] for start, end in spans]
    joined = "\n".join(pieces)
    out = apply(joined)
    if out == joined:
        return text
    lines = out.split("\n")
    result, prev, at = [], 0, 0
    for (start, end), piece in zip(spans, pieces, strict=True):
        n = piece.count("\n") + 1
        result += [text[prev:start], "\n".join(lines[at:at + n])]
        at, prev = at + n, end
    if at != len(lines):  # a rule added or removed a line break (not line-local after all): take the slow way
        return apply(text)
    result.append(text[prev:])
    return "".join(result)


def token_runs(text: str) -> list[tuple[int, int]]:
    """[start, end) of every maximal run of RUN_CHARS at least RUN_MIN long, in order."""
    # One byte per character (`?` for any non-ASCII one, which is no run character).
    raw = text.encode("ascii") if text.isascii() else text.encode("ascii", "replace")
    if len(raw) >= _NUMPY_MIN:
        return _runs_numpy(raw)
    return [m.span() for m in _RUN_BYTES.finditer(raw.translate(_RUN_TABLE))]


_NUMPY_MIN = 1 << 16  # below this the regex is faster than numpy's fixed costs


def _runs_numpy(raw: bytes) -> list[tuple[int, int]]:
    # The regex over megabytes of mostly-run bytes keeps restarting its literal match; numpy finds every run
    # edge in a few vector passes.
    import numpy as np

    inside = np.frombuffer(raw.translate(_RUN_TABLE), dtype=np.uint8) == ord("a")
    edges = np.diff(inside.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    long = ends - starts >= RUN_MIN
    return list(zip(starts[long].tolist(), ends[long].tolist(), strict=True))


def on_runs(text: str, runs: list[tuple[int, int]], apply: Callable[[str], str]) -> str:
    """`apply` run on the `runs` of `text` (joined by line breaks, which no run holds) and spliced back.
    Exact for rules that match only RUN_CHARS, at least RUN_MIN of them, and never add or remove a line break
    (a match never spans two runs, and a boundary check at a run's edge sees what a non-run character is)."""
    if not runs:
        return text
    pieces = [text[start:end] for start, end in runs]
    joined = "\n".join(pieces)
    out = apply(joined)
    if out == joined:
        return text
    parts = out.split("\n")
    if len(parts) != len(pieces):  # not run-local after all: the slow, exact way
        return apply(text)
    result, prev = [], 0
    for (start, end), part in zip(runs, parts, strict=True):
        result += [text[prev:start], part]
        prev = end
    result.append(text[prev:])
    return "".join(result)
