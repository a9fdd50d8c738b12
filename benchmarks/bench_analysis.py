"""Analysis time of a 1,024-host fleet capture: load the capture directory, then analyze it (rules, fleet
statistics, topology, drift), and what the diagnosis adds: `diagnose_capture` (analysis with the hardware pass,
then diagnose) against `analyze` alone, in the same run, with time.perf_counter, the median of several runs.

    python benchmarks/bench_analysis.py [--hosts 1024] [--runs 5] [--full]

Default: every host has 8 InfiniBand ports and nothing else (the issue's "1,024 hosts x 8 NICs"). --full adds
what the evaluation harness carries: 8 GPUs x 6 NVLinks, a dual-port RoCE NIC with its `ethtool -S`, and a kernel
log. The fleet is a clean harness fleet (heavy-tailed background errors, idle and busy NICs, counter resets),
16 hosts per leaf switch, analyzed with its inventory as `fabricase analyze DIR --inventory` does. Each timed
pass loads the capture afresh, and the passes alternate in order from run to run, so that neither profits from
the other's warm caches. The split of diagnose_capture (analysis + hardware pass | diagnose) is its steps
replayed, timed one by one. Wall and CPU time are both printed; the overhead is judged on CPU time, which
other work on a shared machine leaves unchanged.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).parent))

import fleetgen  # noqa: E402

from fabricase.analysis import analyze  # noqa: E402
from fabricase.capturedir import load_capture  # noqa: E402
from fabricase.diagnosis import diagnose, host_hardware  # noqa: E402
from fabricase.models import Capture, Placement  # noqa: E402
from fabricase.pipeline import diagnose_capture  # noqa: E402
from fabricase.placements import inventory_placements, topology_of  # noqa: E402

T = TypeVar("T")


@dataclass
class Times:
    """Seconds of one step over the runs: wall clock (perf_counter) and this process's CPU (process_time). CPU time
    is what the step costs; it stays put when other work shares the machine, where wall time does not."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def timed(self, fn: Callable[[], T]) -> T:
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        self.wall.append(time.perf_counter() - w0)
        self.cpu.append(time.process_time() - c0)
        return result

    def line(self, label: str) -> str:
        return f"{label:<28} {statistics.median(self.wall):7.2f} s {statistics.median(self.cpu):7.2f} s"


def _split(capture: Capture, topology: dict[str, list[str]], placed: list[Placement], with_hardware: Times,
           diagnosing: Times) -> None:
    """diagnose_capture's steps one by one: the analysis with the hardware pass and samples, then diagnose."""
    samples: dict = {}
    hardware: dict = {}
    findings = with_hardware.timed(lambda: analyze(capture, topology=topology, samples_out=samples,
                                                   per_host=host_hardware, per_host_out=hardware))
    diagnosing.timed(lambda: diagnose(findings, hosts=capture.hosts, hardware=hardware, samples=samples,
                                      placements=placed))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="NVLinks, RoCE ports and kernel logs too")
    args = ap.parse_args()
    scenario = fleetgen.Scenario("clean", None, [f"gpu{i:04d}" for i in range(1, args.hosts + 1)])
    loads, analyses, diagnosed, with_hardware, diagnosing = Times(), Times(), Times(), Times(), Times()
    found = suspects = 0
    with tempfile.TemporaryDirectory(prefix="fabricase-bench-analysis-") as tmp:
        root = Path(tmp) / "capture"
        fleetgen.build(scenario, root, seed=1, ib_only=not args.full)
        placed = inventory_placements(root / "inventory.json", scenario.hosts)
        topology = topology_of(placed)

        def plain() -> None:
            nonlocal found
            capture = loads.timed(lambda: load_capture(root, verify=False))
            found = len(analyses.timed(lambda: analyze(capture, topology=topology)))

        def full() -> None:
            nonlocal suspects
            capture = load_capture(root, verify=False)
            suspects = len(diagnosed.timed(lambda: diagnose_capture(capture, topology, placed)).diagnosis.suspects)

        for run in range(args.runs):
            for step in (plain, full) if run % 2 == 0 else (full, plain):
                step()
            _split(load_capture(root, verify=False), topology, placed, with_hardware, diagnosing)
    what = "8 IB ports, NVLinks, RoCE ports, kernel log" if args.full else "8 IB ports"
    print(f"{args.hosts} hosts x ({what}); median of {args.runs} runs")
    print(f"{found} findings, {suspects} suspects")
    print(f"{'':<28} {'wall':>9} {'CPU':>9}")
    print(loads.line("load"))
    print(analyses.line("analyze"))
    print(diagnosed.line("diagnose_capture"))
    print(with_hardware.line("  analyze + hardware pass"))
    print(diagnosing.line("  diagnose"))
    med = statistics.median
    wall, cpu = med(diagnosed.wall) / med(analyses.wall), med(diagnosed.cpu) / med(analyses.cpu)
    print(f"{'diagnose_capture / analyze':<28} {wall:7.3f}   {cpu:7.3f}")
    print(f"diagnosis adds {100 * (cpu - 1):+.1f}% CPU ({100 * (wall - 1):+.1f}% wall) to analysis")


if __name__ == "__main__":
    main()
