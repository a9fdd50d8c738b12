"""Numeric and duration options: finite, in range, and a usage error (exit 2) naming the option otherwise.

click's own float type takes "nan", "inf" and "1e9", and an int type takes 5,000 digits; a capture would then
sleep forever, never time out, or fail deep inside with an internal error. Every numeric option is a `Bounded`
from LIMITS, so that the ranges are stated once, checked alike and shown in --help:

    option          unit     range              why
    --interval      seconds  0 to 3600          0 reads the two snapshots back to back; an hour is already a lot
    --since         hours    over 0 to 8760     a year of kernel log; the collector caps it by size anyway
    --timeout       seconds  over 0 to 86400    per host; a day covers the slowest perf test
    --deadline      seconds  over 0 to 604800   the whole fan-out; a week
    --fanout        hosts    1 to 4096          ssh connections at once
    --interval-s    seconds  0 to 86400         between watch rounds; a day
    --count         rounds   1 to 1000000       watch rounds
    --older-than    age      0 to 3650d         a tracker filter; ten years
    --stale-after   age      over 0 to 3650d
    --budget        duration 1s to 24h          a whole probe: 90s, 10m, 2h (a plain number is seconds)
    --test-timeout  seconds  1 to 86400         one probe test
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import click

from fabricase.errors import inert

__all__ = ["AGE_LIMIT", "LIMITS", "Age", "Bounded", "Duration", "bounded"]


@dataclass(frozen=True)
class Bounded(click.ParamType):
    """A number (float, or int with integer=True) in [low, high]; low excluded when low_open. "nan", "inf",
    overflowing and out-of-range values fail with the option's name and the allowed range."""

    low: float
    high: float
    unit: str
    low_open: bool = False
    integer: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return "integer" if self.integer else "number"

    def describe(self) -> str:
        """The range in words, for --help and for errors: "0 to 3600 seconds", "over 0 to 24 hours"."""
        low = f"over {_number(self.low)}" if self.low_open else _number(self.low)
        return f"{low} to {_number(self.high)} {self.unit}"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "INTEGER" if self.integer else "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | int:
        try:
            number = _parse(value, self.integer)
        except OverflowError:
            number = math.inf
        except (TypeError, ValueError):
            kind = "a whole number" if self.integer else "a number"
            self.fail(f"{_shown(value)} is not {kind} (allowed: {self.describe()})", param, ctx)
        if not math.isfinite(number) or number < self.low or number > self.high or (
                self.low_open and number == self.low):
            self.fail(f"{_shown(value)} is out of range (allowed: {self.describe()})", param, ctx)
        return number


def _parse(value: Any, integer: bool) -> float | int:
    """The number in `value`; OverflowError for one too long to be any allowed value (int() of 5,000 digits is
    slow and then refused), ValueError for what is not a number."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int | float):
        number: float | int = value
    else:
        text = str(value).strip()
        if len(text) > 64:
            if text.lstrip("+-").isdigit():
                raise OverflowError(text)
            raise ValueError(text)
        number = int(text) if integer else float(text)
    if integer and isinstance(number, float):
        raise ValueError(value)
    return int(number) if integer else float(number)


def _shown(value: Any) -> str:
    """The value as an error quotes it: repr, cut to 40 characters, inert."""
    text = repr(value if isinstance(value, str) else str(value))
    return inert(text if len(text) <= 40 else text[:39] + "…")


def _number(x: float) -> str:
    return f"{int(x)}" if float(x).is_integer() else f"{x:g}"


# option -> its range; an option's help says it through `bounded`.
LIMITS: dict[str, Bounded] = {
    "--interval": Bounded(0, 3600, "seconds"),
    "--since": Bounded(0, 8760, "hours", low_open=True),
    "--timeout": Bounded(0, 86400, "seconds", low_open=True),
    "--deadline": Bounded(0, 604800, "seconds", low_open=True),
    "--fanout": Bounded(1, 4096, "hosts", integer=True),
    "--interval-s": Bounded(0, 86400, "seconds"),
    "--count": Bounded(1, 1_000_000, "rounds", integer=True),
    "--test-timeout": Bounded(1, 86400, "seconds"),
    "--duration": Bounded(1, 3600, "seconds", integer=True),
    "--ib-port": Bounded(1, 255, "(port number)", integer=True),
    "--gid-index": Bounded(0, 255, "(GID table index)", integer=True),
    "--qps": Bounded(1, 1024, "queue pairs", integer=True),
    "--gpus-per-host": Bounded(1, 64, "GPUs", integer=True),
    "--nccl-iters": Bounded(1, 10000, "iterations", integer=True),
    "--expect-gbps": Bounded(0, 100000, "Gb/s", low_open=True),
    "--expect-tcp-gbps": Bounded(0, 100000, "Gb/s", low_open=True),
    "--expect-busbw": Bounded(0, 100000, "GB/s", low_open=True),
    "--per-switch": Bounded(1, 4096, "tests", integer=True),
}
AGE_LIMIT = timedelta(days=3650)


def bounded(option: str, help_text: str) -> dict[str, Any]:
    """click.option's type= and help= for `option`: its Bounded from LIMITS, and the help with the range."""
    kind = LIMITS[option]
    return {"type": kind, "help": f"{help_text} [{kind.describe()}]"}


class Age(click.ParamType):
    """A duration such as 3d, 12h, 90m, 2w (tracker.records.parse_age), at most AGE_LIMIT; zero only when
    allow_zero. A bad one is a usage error naming the option."""

    name = "AGE"

    def __init__(self, *, allow_zero: bool = True) -> None:
        self.allow_zero = allow_zero

    def describe(self) -> str:
        return f"{'0' if self.allow_zero else 'over 0'} to {AGE_LIMIT.days}d"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        from fabricase.tracker.records import parse_age

        if isinstance(value, timedelta):
            age = value
        else:
            try:
                if len(str(value)) > 64:  # no real age is this long; the number would overflow timedelta
                    raise OverflowError(f"not an age: {_shown(value)}")
                age = parse_age(str(value))
            except (ValueError, OverflowError) as exc:
                self.fail(f"{inert(exc)} (allowed: {self.describe()})", param, ctx)
        if age > AGE_LIMIT or age < timedelta(0) or (not self.allow_zero and age == timedelta(0)):
            self.fail(f"{_shown(value)} is out of range (allowed: {self.describe()})", param, ctx)
        return age


class Duration(click.ParamType):
    """A duration such as 90s, 10m, 2h or a plain number of seconds, between `low_s` and `high_s`; seconds out."""

    name = "DURATION"
    _UNITS = {"s": 1, "m": 60, "h": 3600}

    def __init__(self, low_s: float = 1, high_s: float = 86400) -> None:
        self.low_s, self.high_s = low_s, high_s

    def describe(self) -> str:
        return f"{_number(self.low_s)}s to {_number(self.high_s / 3600)}h"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            text = str(value).strip().lower()
            unit = self._UNITS.get(text[-1:], None) if text else None
            try:
                seconds = float(text[:-1] if unit else text) * (unit or 1)
            except ValueError:
                self.fail(f"{_shown(value)} is not a duration such as 90s, 10m or 2h (allowed: {self.describe()})",
                          param, ctx)
        if not math.isfinite(seconds) or not self.low_s <= seconds <= self.high_s:
            self.fail(f"{_shown(value)} is out of range (allowed: {self.describe()})", param, ctx)
        return seconds
