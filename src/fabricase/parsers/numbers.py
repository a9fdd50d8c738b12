"""Bounded number conversions shared by the parsers: what int() and float() accept, less what no capture holds.

A counter is at most a u64 (20 digits). int() of more than 4,300 digits raises (sys.get_int_max_str_digits), and
a number of a few thousand digits in one hostile file would otherwise travel into every later stage, so the
digits are counted before int() runs. float() reads "nan", "inf" and "1e999" (inf): none is a rate, a size, a
temperature or a time, so a value that is not finite is unreadable (None), never a number.
"""

from __future__ import annotations

import math

__all__ = ["MAX_DIGITS", "MAX_FLOAT_CHARS", "to_float", "to_int"]

MAX_DIGITS = 40  # twice a u64's 20 digits: room for any real counter, far below int()'s 4,300
MAX_FLOAT_CHARS = 64


def to_int(token: str | None, *, signed: bool = False) -> int | None:
    """An ASCII decimal integer of 1 to MAX_DIGITS digits (with a leading sign when `signed`), else None."""
    if not token:
        return None
    digits = token[1:] if signed and token[0] in "+-" else token
    if not 0 < len(digits) <= MAX_DIGITS or not digits.isascii() or not digits.isdigit():
        return None
    return int(token)


def to_float(token: str | None) -> float | None:
    """A finite ASCII decimal number of at most MAX_FLOAT_CHARS characters, else None ("nan", "inf", "1e999")."""
    if not token or len(token) > MAX_FLOAT_CHARS or not token.isascii() or "_" in token:
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
