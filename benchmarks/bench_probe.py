"""What the probe's bisection costs against testing pairs, on a simulated fabric.

    python benchmarks/bench_probe.py [--sizes 64,1024,4096] [--trials 20] [--seed 1] [--nccl-run-s 60]
                                     [--pair-run-s 12]

For each fleet size and 1 or 2 slow hosts at random (seeded) positions, it drives fabricase.probe.plan.Bisection
with a fabric in which a set's busbw is its slowest host's speed (healthy 100 GB/s, slow 10, +-5% noise), once
with an expected busbw and once without one (--bisect: sets judged against each other), and counts the rounds,
the collective runs and whether exactly the slow hosts were named. The wall time is estimated with a per-run
cost (all runs of a round at once): bisection rounds x --nccl-run-s, against testing every pair (a round-robin
tournament, n-1 rounds for even n, each pair in both directions: 2(n-1) rounds of --pair-run-s) and against
fabricase's ring pairwise (4 rounds for even n, 6 for odd), with the rounds in which the ring's slow pairs run
a second time (judge.again_pairs and plan.disjoint_rounds, as the probe runs them; a pair's figure is its slower
host's speed, 100 or 10 Gb/s +-5%, judged against 100 Gb/s or, without it, against the median pair). It prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import zlib

from fabricase.probe import judge
from fabricase.probe.plan import Bisection, disjoint_rounds, pair_rounds

HEALTHY, SLOW = 100.0, 10.0


def _busbw(hosts: tuple[str, ...], slow: set[str]) -> float:
    noise = 0.95 + 0.1 * (zlib.crc32(",".join(hosts).encode()) % 1000) / 999
    return noise * min(SLOW if h in slow else HEALTHY for h in hosts)


def _bisect(hosts: list[str], slow: set[str], expected: float | None) -> tuple[int, int, bool]:
    """(rounds, collective runs, named exactly the slow hosts) for one simulated bisection."""
    b = Bisection(hosts, expected_gbs=expected, always=expected is None)
    runs = 0
    while sets := b.next_round():
        runs += len(sets)
        for s in sets:
            b.record(s.id, _busbw(s.hosts, slow))
    out = b.outcome()
    return len(out.rounds), runs, set(out.suspects) == slow


def _ring_again(ring: list[list[tuple[str, str]]], slow: set[str], expected: float | None) -> int:
    """Rounds of second runs after the ring: the pairs judge.again_pairs picks, in rounds of disjoint hosts."""
    tests = [pair for r in ring for pair in r]
    values = [_busbw(pair, slow) for pair in tests]
    hosts = len({h for pair in tests for h in pair})
    again = [pair for pair, flag in zip(tests, judge.again_pairs(values, expected, hosts), strict=True) if flag]
    return len(disjoint_rounds(again, key=lambda pair: pair))


def _hours(rounds: float, per_run_s: float) -> float:
    return rounds * per_run_s / 3600


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,1024,4096", help="fleet sizes, comma-separated")
    ap.add_argument("--trials", type=int, default=20, help="random placements of the slow hosts per cell")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nccl-run-s", type=float, default=60, help="one all_reduce_perf run, launch included")
    ap.add_argument("--pair-run-s", type=float, default=12, help="one ib_write_bw pair test, setup included")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    print(f"{args.trials} trials per row, seed {args.seed}; cost model: {args.nccl_run_s:g} s per collective round, "
          f"{args.pair_run_s:g} s per pair round")
    print()
    print("| hosts | slow | expected busbw | found | rounds mean / max | collective runs mean | bisection h | "
          "ring pairs: rounds, tests | second runs: rounds mean / max | ring h, both | all pairs: rounds, tests, h | "
          "all pairs / bisection | ring / bisection |")
    print("|---:|---:|---|---:|---:|---:|---:|---|---|---:|---|---:|---:|")
    for n in (int(x) for x in args.sizes.split(",") if x.strip()):
        hosts = [f"gpu{i:05d}" for i in range(n)]
        ring = pair_rounds(hosts)
        ring_tests = sum(len(r) for r in ring)
        all_rounds = 2 * (n - 1 if n % 2 == 0 else n)
        all_tests = n * (n - 1)
        for k in (1, 2):
            for expected in (100.0, None):
                slows = [set(rng.sample(hosts, k)) for _ in range(args.trials)]
                results = [_bisect(hosts, slow, expected) for slow in slows]
                again = [_ring_again(ring, slow, expected) for slow in slows]
                rounds = [r for r, _, _ in results]
                mean_rounds = statistics.mean(rounds)
                runs = statistics.mean(r for _, r, _ in results)
                found = sum(ok for _, _, ok in results)
                bisect_h = _hours(mean_rounds, args.nccl_run_s)
                ring_h = _hours(len(ring) + statistics.mean(again), args.pair_run_s)
                all_h = _hours(all_rounds, args.pair_run_s)
                print(f"| {n} | {k} | {'100 GB/s' if expected else 'none (--bisect)'} | {found}/{args.trials} | "
                      f"{mean_rounds:.1f} / {max(rounds)} | {runs:.1f} | {bisect_h:.2f} | "
                      f"{len(ring)}, {ring_tests} | {statistics.mean(again):.1f} / {max(again)} | {ring_h:.2f} | "
                      f"{all_rounds}, {all_tests:,}, {all_h:.2f} | "
                      f"{all_h / bisect_h:.1f}x | {ring_h / bisect_h:.2f}x |")
    print()
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
