"""No parser goes quadratic: every adversarial shape of ~100 KB parses well under BOUND_S.

A quadratic regex (nested or adjacent unbounded quantifiers over the same characters) takes tens of seconds on
these (40,000 spaces took 19 s in parse_ibstat); a linear parser takes milliseconds. The bound is generous so a
busy machine does not fail it; benchmarks/bench_parsers.py measures the worst time over 1 MB shapes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import bench_parsers as kit  # noqa: E402

SIZE = 100_000
BOUND_S = 2.0
PARSERS = kit.discover()
# The shapes that find quadratic paths: long runs, runs after each format's keywords, long lines of short units
# (many short lines and non-UTF-8 test speed, not complexity: the benchmark times them).
SHAPES = [
    (name, data)
    for name, data in kit.adversarial(SIZE)
    if not name.startswith(("lines:", "bytes-", "text-")) and not (name.startswith("pair:") and "\\n" in name)
]
SEEDS = [data for _, data in kit.load_fixtures() if len(data) <= 64 * 1024]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.name)
def test_parser_is_linear_on_100k_adversarial_input(parser):
    seeds = kit.relevant_fixtures(parser, [(str(i), s) for i, s in enumerate(SEEDS)])[:2]
    repeated = [(n, d) for n, d in kit.fixture_shapes(seeds, SIZE, cuts=2) if n.endswith("repeat")]
    slow = []
    for name, data in SHAPES + repeated:
        outcome = kit.run_one(parser, data, BOUND_S)
        if isinstance(outcome.error, kit.Slow) or outcome.seconds >= BOUND_S:
            slow.append(f"{name} ({outcome.seconds:.1f} s)")
    assert not slow, f"{parser.name}: {len(slow)} inputs of {SIZE} chars over {BOUND_S} s: {slow[:5]}"
