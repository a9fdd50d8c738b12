"""Increase and rate of a counter read twice, an interval apart: missing, wrapped, reset and physically
impossible counters, and the host-wide rule that a reboot or a reset between the snapshots leaves rates unknown."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

from fabricase.models import HostCapture, HostStatus, MetricSample, SnapshotInfo

__all__ = [
    "MIN_PACKET_BYTES", "RATE_SLACK", "REBOOT_SKEW_S", "RESET_NOTE", "Delta", "counter_delta", "increase_limit",
    "note_host", "physical_max_rate", "reboot_between", "settle_counters",
]  # fmt: skip

# The counters are read a moment after the snapshot mark, one after another, so the interval a counter was really
# read over can be longer than the marks say; a rate up to this multiple of the physical maximum is still taken.
RATE_SLACK = 1.5
# Smaller than any packet on an InfiniBand or Ethernet wire (IB: LRH + BTH + CRCs = 26 bytes; Ethernet: 84 with
# preamble and gap): a packet counter faster than line rate / this is impossible whatever the traffic.
MIN_PACKET_BYTES = 20
# Bits on the wire per count, by sample unit. An error is at most one per bit (symbols, FEC bits) or per packet.
_BITS_PER_COUNT = {
    "bits": 1, "symbols": 1, "errors": 1, "blocks": 1, "bytes": 8, "words": 32,
    "packets": 8 * MIN_PACKET_BYTES, "frames": 8 * MIN_PACKET_BYTES, "transitions": 8 * MIN_PACKET_BYTES,
    "events": 8 * MIN_PACKET_BYTES,
}  # fmt: skip
# A pause (or any) duration counted in microseconds cannot grow faster than time passes.
_DURATION_PER_S = {"us": 1e6, "ms": 1e3, "s": 1.0}
# Wall clock against uptime: a host whose uptime at snapshot 1 is shorter than the wall time since snapshot 0
# (less this much, for NTP slews and steps) booted in between.
REBOOT_SKEW_S = 2.0
RESET_NOTE = "counters reset between snapshots: rates unknown"
_COUNTER_NOTES = frozenset({"wrap", "reset", "implausible", "saturated"})


class Delta(NamedTuple):
    """delta: increase over the interval; rate: per second. note: None when exact, else "missing" (a reading
    is absent), "wrap" (the counter passed its maximum; delta is inferred), "reset" (it went backwards
    without a plausible wrap: driver reload, reboot; delta and rate unknown) or "implausible" (it rose faster
    than the hardware can count; delta and rate unknown). A named tuple: a fleet makes hundreds of thousands."""

    delta: int | None
    rate: float | None
    note: str | None = None


def physical_max_rate(unit: str, line_gbps: float | None) -> float | None:
    """The most a counter in `unit` can count per second on a link of line_gbps: line rate in the counter's unit
    (bytes, 4-byte words, bits; packets at MIN_PACKET_BYTES; errors at most one per bit or per packet), or for a
    duration ("us") one second per second whatever the link. None when neither is known."""
    if unit in _DURATION_PER_S:
        return _DURATION_PER_S[unit]
    bits = _BITS_PER_COUNT.get(unit)
    if bits is None or line_gbps is None or not math.isfinite(line_gbps) or line_gbps <= 0:
        return None
    return line_gbps * 1e9 / bits


def _valid(interval_s: float | None) -> bool:
    return interval_s is not None and math.isfinite(interval_s) and interval_s > 0


def _rate(delta: int, interval_s: float | None) -> float | None:
    return delta / interval_s if _valid(interval_s) else None


def _limit(interval_s: float | None, max_rate: float | None) -> float | None:
    """The largest increase the hardware can make in the interval (RATE_SLACK included), or None if unknown."""
    if max_rate is None or not math.isfinite(max_rate) or max_rate <= 0 or not _valid(interval_s):
        return None
    return max_rate * interval_s * RATE_SLACK  # type: ignore[operator]


def increase_limit(interval_s: float | None, max_rate: float | None) -> float | None:
    """The largest increase the hardware can make in the interval (RATE_SLACK included), or None if unknown: for
    the samplers that inline counter_delta's common case (the limit is the same for every counter of a unit)."""
    return _limit(interval_s, max_rate)


def _wrapped(v0: int, v1: int, width_bits: int, limit: float | None) -> int | None:
    """The increase if v0 -> v1 is a plausible wrap of a 32-bit (or width_bits) counter, else None.

    Plausible: the counter fits the width, the wrapped increase is under a quarter of its range (v0 was in the
    top quarter and v1 is small; many drivers keep 32-bit hardware counters behind 64-bit files), and, where the
    counter's maximum rate is known, the hardware could have counted that much in the interval.
    """
    widths = sorted({min(32, width_bits), width_bits})
    for width in widths:
        modulus = 1 << width
        if 0 <= v0 < modulus and 0 <= v1 < modulus:
            increase = v1 + modulus - v0
            if increase <= modulus >> 2 and (limit is None or increase <= limit):
                return increase
    return None


def counter_delta(v0: int | None, v1: int | None, interval_s: float | None, width_bits: int = 64,
                  max_rate: float | None = None) -> Delta:
    """Increase of a counter from reading v0 to v1, and its rate over interval_s seconds.

    A missing reading gives no delta (never 0); a zero or unknown interval gives no rate. `max_rate`: the most
    the counter can count per second (physical_max_rate), where known: an increase above it is "implausible" and
    a drop that would need more is a "reset", both with no delta, never an error burst.
    """
    if v0 is None or v1 is None:
        return Delta(None, None, "missing")
    limit = _limit(interval_s, max_rate)
    if v1 >= v0:
        delta = v1 - v0
        if limit is not None and delta > limit:
            return Delta(None, None, "implausible")
        return Delta(delta, _rate(delta, interval_s))
    wrapped = _wrapped(v0, v1, width_bits, limit)
    if wrapped is not None:
        return Delta(wrapped, _rate(wrapped, interval_s), "wrap")
    return Delta(None, None, "reset")


def reboot_between(snapshots: Sequence[SnapshotInfo]) -> str | None:
    """Why snapshots 0 and 1 straddle a reboot ("uptime 1005 s, then 30 s"), or None: uptime went backwards, or
    is shorter than the wall time since snapshot 0 (REBOOT_SKEW_S allowed)."""
    by_index = {s.index: s for s in snapshots}
    s0, s1 = by_index.get(0), by_index.get(1)
    if s0 is None or s1 is None or s0.uptime_start is None or s1.uptime_start is None:
        return None
    u0, u1 = s0.uptime_start, s1.uptime_start
    why = f"the host rebooted: uptime {u0:.0f} s, then {u1:.0f} s"
    if u1 < u0:
        return why
    if s0.epoch is not None and s1.epoch is not None:
        wall = s1.epoch - s0.epoch
        if u1 < wall - max(REBOOT_SKEW_S, 0.1 * wall):
            return f"{why}, {wall:.0f} s apart"
    return None


def _is_counter(s: MetricSample) -> bool:
    return s.delta is not None or s.note in _COUNTER_NOTES


def settle_counters(hc: HostCapture, samples: list[MetricSample]) -> tuple[list[MetricSample], str | None]:
    """The samples with every rate that cannot be known made unknown, and the reason for the host's status.

    A reboot between the snapshots (reboot_between) leaves every counter of the host unknown. A counter that
    reset (a driver reload, `perfquery -R`) resets its whole component (a device's counters are cleared together),
    so the component's other deltas, an apparent wrap or a small rise, are unknown too.
    """
    rebooted = reboot_between(hc.snapshots)
    reset = {s.component for s in samples if s.note == "reset"}
    if rebooted is None and not reset:
        return samples, None
    out = []
    for s in samples:
        if _is_counter(s) and (rebooted is not None or s.component in reset) and s.note != "reset":
            s = dataclasses.replace(s, delta=None, rate=None, note="reset")
        out.append(s)
    if rebooted is not None:
        return out, f"{RESET_NOTE} ({rebooted})"
    names = sorted(reset)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return out, f"{RESET_NOTE} ({shown})"


def note_host(hc: HostCapture, note: str) -> None:
    """Put `note` in the host's status: an OK host becomes partial (what it says is true, its rates are not all
    known), another keeps its status; the note is said once, however often the host is analyzed."""
    if hc.reason and note in hc.reason:
        return
    if hc.status == HostStatus.OK:
        hc.status, hc.reason = HostStatus.PARTIAL, note
    else:
        hc.reason = f"{hc.reason}; {note}" if hc.reason else note
