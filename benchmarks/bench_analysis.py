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

Beside them, in the same run, the issue's minimal reference (issue 18): load the capture, read every counter item
(each sysfs counter file's bytes -> int; with --full also every `name: value` line of `ethtool -S` and every
NVLink error count) into numpy arrays by snapshot, and compute the per-port deltas. `load + analyze / reference`
is the ratio the issue's targets are stated in (<= 3x). CPU time counts the analysis pool's children too (they
are waited for inside the step). Peak RSS (this process, and the largest child) is printed at the end.
FABRICASE_ANALYSIS_WORKERS=1 forces the analysis serial.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import fleetgen  # noqa: E402

from fabricase import native  # noqa: E402
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
        w0, c0 = time.perf_counter(), _cpu()
        result = fn()
        self.wall.append(time.perf_counter() - w0)
        self.cpu.append(_cpu() - c0)
        return result

    def add(self, other: Times) -> Times:
        return Times([a + b for a, b in zip(self.wall, other.wall, strict=True)],
                     [a + b for a, b in zip(self.cpu, other.cpu, strict=True)])

    def line(self, label: str) -> str:
        return f"{label:<28} {statistics.median(self.wall):7.2f} s {statistics.median(self.cpu):7.2f} s"


def _cpu() -> float:
    """CPU seconds of this process and of its waited-for children (the analysis pool's workers)."""
    own, kids = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.user + own.system + kids.ru_utime + kids.ru_stime


_IB = "/sys/class/infiniband/"
_COUNTER_DIRS = ("/counters/", "/hw_counters/")
_ETHTOOL_LINE = re.compile(rb"^\s+([A-Za-z0-9_]+): (\d+)$", re.M)
_NVLINK_LINE = re.compile(rb"Link (\d+): (\w+) Errors: (\d+)")


def reference_deltas(root: Path) -> int:
    """The issue's minimal reference reader: every counter of the capture into arrays, per snapshot, and the
    per-port (per-counter) deltas with numpy; returns how many deltas it computed. It does what any analysis must
    at least do, and nothing else: no resets, wraps, rates, rules or statistics."""
    capture = load_capture(root, verify=False)
    keys: dict[tuple[str, str], int] = {}  # (host, counter) -> column
    values: tuple[list[int], list[int]] = ([], [])
    where: tuple[list[int], list[int]] = ([], [])
    for hc in capture.hosts:
        host = hc.host
        for it in hc.items:
            if it.snapshot not in (0, 1):
                continue
            source = it.source
            if source.startswith(_IB) and any(d in source for d in _COUNTER_DIRS):
                pairs = [(source, int(hc.read(it)))]
            elif source == "cmd:ethtool-stats":  # "### <port>" sections, one per port
                pairs = [(f"{port.decode()}/{name.decode()}", int(v))
                         for port, _, body in (part.partition(b"\n") for part in hc.read(it).split(b"### ")[1:])
                         for name, v in _ETHTOOL_LINE.findall(body)]
            elif source == "cmd:nvlink-errors":
                pairs = [(f"{i}/{link.decode()}/{kind.decode()}", int(v))
                         for i, (link, kind, v) in enumerate(_NVLINK_LINE.findall(hc.read(it)))]
            else:
                continue
            for name, value in pairs:
                where[it.snapshot].append(keys.setdefault((host, name), len(keys)))
                values[it.snapshot].append(value)
        hc.release()
    snaps = []
    for snap in (0, 1):
        arr = np.full(len(keys), -1, dtype=np.int64)
        arr[np.asarray(where[snap], dtype=np.int64)] = np.asarray(values[snap], dtype=np.uint64).astype(np.int64)
        snaps.append(arr)
    deltas = snaps[1] - snaps[0]
    return int(np.count_nonzero((snaps[0] >= 0) & (snaps[1] >= 0) & (deltas >= 0)))


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
    reference = Times()
    counted = 0
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

        def ref() -> None:
            nonlocal counted
            counted = reference.timed(lambda: reference_deltas(root))

        for run in range(args.runs):
            for step in (plain, full, ref) if run % 2 == 0 else (ref, full, plain):
                step()
            _split(load_capture(root, verify=False), topology, placed, with_hardware, diagnosing)
    what = "8 IB ports, NVLinks, RoCE ports, kernel log" if args.full else "8 IB ports"
    print(f"{args.hosts} hosts x ({what}); median of {args.runs} runs")
    print(f"{found} findings, {suspects} suspects; {native.describe()}")
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
    both = loads.add(analyses)
    print(both.line("load + analyze"))
    print(reference.line(f"reference ({counted} deltas)"))
    wall, cpu = med(both.wall) / med(reference.wall), med(both.cpu) / med(reference.cpu)
    print(f"{'(load + analyze) / reference':<28} {wall:7.3f}   {cpu:7.3f}")
    own, kids = (resource.getrusage(r).ru_maxrss / 1024 for r in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(f"peak RSS: {own:.0f} MiB (largest child {kids:.0f} MiB)")


if __name__ == "__main__":
    main()
