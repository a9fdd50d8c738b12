"""Increase and rate of a counter read twice, an interval apart: missing, wrapped and reset counters."""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["Delta", "counter_delta"]


class Delta(NamedTuple):
    """delta: increase over the interval; rate: per second. note: None when exact, else "missing" (a reading
    is absent), "wrap" (the counter passed its maximum; delta is inferred) or "reset" (it went backwards
    without a plausible wrap: driver reload, reboot; delta and rate unknown). A named tuple: a fleet makes
    hundreds of thousands of these."""

    delta: int | None
    rate: float | None
    note: str | None = None


def _rate(delta: int, interval_s: float | None) -> float | None:
    if interval_s is None or not math.isfinite(interval_s) or interval_s <= 0:
        return None
    return delta / interval_s


def _wrapped(v0: int, v1: int, width_bits: int) -> int | None:
    """The increase if v0 -> v1 is a plausible wrap of a 32-bit (or width_bits) counter, else None.

    Plausible: the counter fits the width and the wrapped increase is under a quarter of its range, i.e. v0 was
    in the top quarter and v1 is small. Many drivers still keep 32-bit hardware counters behind 64-bit files.
    """
    widths = sorted({min(32, width_bits), width_bits})
    for width in widths:
        modulus = 1 << width
        if 0 <= v0 < modulus and 0 <= v1 < modulus:
            increase = v1 + modulus - v0
            if increase <= modulus >> 2:
                return increase
    return None


def counter_delta(v0: int | None, v1: int | None, interval_s: float | None, width_bits: int = 64) -> Delta:
    """Increase of a counter from reading v0 to v1, and its rate over interval_s seconds.

    A missing reading gives no delta (never 0); a zero or unknown interval gives no rate.
    """
    if v0 is None or v1 is None:
        return Delta(None, None, "missing")
    if v1 >= v0:
        delta = v1 - v0
        return Delta(delta, _rate(delta, interval_s))
    wrapped = _wrapped(v0, v1, width_bits)
    if wrapped is not None:
        return Delta(wrapped, _rate(wrapped, interval_s), "wrap")
    return Delta(None, None, "reset")
