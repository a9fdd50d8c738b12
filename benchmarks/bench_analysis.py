"""Analysis time of a 1,024-host fleet capture: load the capture directory, then analyze it (rules, fleet
statistics, topology, drift), with time.perf_counter, the median of several runs.

    python benchmarks/bench_analysis.py [--hosts 1024] [--runs 5] [--full]

Default: every host has 8 InfiniBand ports and nothing else (the issue's "1,024 hosts x 8 NICs"). --full adds
what the evaluation harness carries: 8 GPUs x 6 NVLinks, a dual-port RoCE NIC with its `ethtool -S`, and a kernel
log. The fleet is a clean harness fleet (heavy-tailed background errors, idle and busy NICs, counter resets),
16 hosts per leaf switch, analyzed with its inventory as `fabricase analyze DIR --inventory` does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import harness  # noqa: E402

from fabricase.analysis import analyze  # noqa: E402
from fabricase.capturedir import load_capture  # noqa: E402
from fabricase.placements import inventory_placements, topology_of  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="NVLinks, RoCE ports and kernel logs too")
    args = ap.parse_args()
    scenario = harness.Scenario("clean", None, [f"gpu{i:04d}" for i in range(1, args.hosts + 1)])
    with tempfile.TemporaryDirectory(prefix="fabricase-bench-analysis-") as tmp:
        root = Path(tmp) / "capture"
        harness.build(scenario, root, seed=1, ib_only=not args.full)
        topology = topology_of(inventory_placements(root / "inventory.json", scenario.hosts))
        loads, analyses, found = [], [], 0
        for _ in range(args.runs):
            t0 = time.perf_counter()
            capture = load_capture(root, verify=False)
            t1 = time.perf_counter()
            found = len(analyze(capture, topology=topology))
            t2 = time.perf_counter()
            loads.append(t1 - t0)
            analyses.append(t2 - t1)
    what = "8 IB ports, NVLinks, RoCE ports, kernel log" if args.full else "8 IB ports"
    print(f"{args.hosts} hosts x ({what}); {found} findings; median of {args.runs} runs")
    print(f"load     {statistics.median(loads):6.2f} s")
    print(f"analyze  {statistics.median(analyses):6.2f} s")
    print(f"total    {statistics.median(a + b for a, b in zip(loads, analyses, strict=True)):6.2f} s")


if __name__ == "__main__":
    main()
