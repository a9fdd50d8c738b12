"""Which probe results are slow: one rule, shared by the bisection (which set to recurse into) and the analysis
(what the report says was slow), so that both always agree.

A figure is held against the expected one when it is known (90% of a port's rate for a pair; the busbw baseline
for a collective). Without one, results are held against each other: against the median of the pairs (most
pairs are healthy), or against the better half of the sets of one bisection round (those sets run at once, on the
same fabric, with the same sizes). A test that failed, hung or timed out (no figure) is slow: a hang is what a bad
node does to a collective.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["PAIR_FRACTION", "PAIR_RELATIVE", "SET_FRACTION", "SET_RELATIVE", "again_pairs", "slow_pairs",
           "slow_sets"]

PAIR_FRACTION = 0.9  # NVIDIA ngc_multinode_perf: a pair passes at 90% of the port's link rate
PAIR_RELATIVE = 0.5  # without a rate: under half the median pair is slow (a healthy fabric spreads ~10-20%)
SET_FRACTION = 0.9  # of the expected busbw
SET_RELATIVE = 0.5  # without a baseline: under half the mean of the round's better half; sets of one round
# share the fabric and the CPUs and spread by a third or more, while a slow host costs far more


def slow_pairs(values: Sequence[float | None], expected: float | None = None, *, fraction: float = PAIR_FRACTION,
               relative: float = PAIR_RELATIVE) -> list[bool]:
    """For each pair result (Gb/s; None: no figure), whether it is slow."""
    if expected is not None:
        return [v is None or v < fraction * expected for v in values]
    known = [v for v in values if v is not None]
    if not known:
        return [True] * len(values)
    median = statistics.median(known)
    return [v is None or v < relative * median for v in values]


def again_pairs(values: Sequence[float | None], expected: float | None, hosts: int) -> list[bool]:
    """For each pair result of one tool and rail (Gb/s; None: no figure) among `hosts` hosts, whether the pair
    runs once more: its figure was slow as the analysis judges it. When every pair is below the expected rate
    (a fabric slower than its ports, a wrong --expect-gbps) and three hosts or more ran, the analysis holds the
    pairs against one another (analysis.probe), and so do these: every pair once more would double the ring's
    time for nothing. A test without a figure (failed, hung) is not run again: that is its own finding."""
    flags = slow_pairs(values, expected)
    if expected is not None and flags and all(flags) and hosts >= 3:
        flags = slow_pairs(values)
    return [slow and v is not None for v, slow in zip(values, flags, strict=True)]


def slow_sets(values: Sequence[float | None], expected: float | None = None, *, fraction: float = SET_FRACTION,
              relative: float = SET_RELATIVE) -> list[bool]:
    """For each set of one bisection round (busbw GB/s; None: no figure), whether it is slow."""
    if expected is not None:
        return [v is None or v < fraction * expected for v in values]
    known = [v for v in values if v is not None]
    if not known:
        return [True] * len(values)
    # Against the mean of the better half of the round: one lucky run does not lift it as it lifts the best, and
    # slow sets that are the majority (two suspects' pairs beside one control) do not pull it down as a median.
    top = sorted(known, reverse=True)[: (len(known) + 1) // 2]
    reference = sum(top) / len(top)
    return [v is None or v < relative * reference for v in values]
