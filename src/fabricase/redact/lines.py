"""Run line-local rules on only the lines that can match.

A kernel log or an `nvidia-smi -q` output is megabytes, and a regex tried at every position of it is slow
(a lookbehind or a case-insensitive alternation defeats the engine's literal scan). A cheap finder locates the
few candidate lines; the rules run on those lines joined, and the result is spliced back. This is exact for
rules that never match across a line break and never add or remove one: those are the only ones given here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["WINDOW_MIN", "ascii_lower", "literal_hits", "on_lines", "regex_hits"]

WINDOW_MIN = 4096  # shorter texts are cheaper to search whole
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """`text` with A-Z lowered and nothing else changed: positions stay those of `text` (str.lower can
    lengthen some non-ASCII characters)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


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
