"""Detection power of the shared-component (switch) test on the harness's synthetic fleets.

    python benchmarks/bench_switch_power.py [--hosts 256] [--reps 4] [--clean 10] [--seed 1] [--ib-only]

For k = 1..16 affected hosts of the 16 under one leaf and each intensity of fleetgen.MINORITY_ERRORS (symbol
errors on one port per affected host in the 5 s interval), it builds `--reps` fleets, analyzes them with the real
pipeline (fabricase.analysis.analyze with the fleet's inventory) and counts the share in which the bad leaf is
named (a `shared-component-fault` finding on it), with today's host-level test alone ("hosts") and with the port
test ("ports"); then the false alarms: fleets where some other component is named, and clean fleets where any is.
It prints a Markdown table (docs/topology-and-drift.md quotes it).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fleetgen import MINORITY_ERRORS, Scenario, build

import fabricase.analysis.topology as topology
from fabricase.analysis import analyze
from fabricase.capturedir import load_capture
from fabricase.placements import inventory_placements, topology_of


def _named(folder: Path, hosts: list[str]) -> tuple[set[str], set[str], list[str]]:
    """(named by the host-level test alone, named with the port test, power-limit lines) for one capture."""
    calls = []
    real = topology.shared_component_findings

    def spy(findings, placements, all_hosts, **kw):
        calls.append((findings, placements, all_hosts))
        return real(findings, placements, all_hosts, **kw)

    topology.shared_component_findings = spy
    try:
        capture = load_capture(folder, verify=False)
        topo = topology_of(inventory_placements(folder / "inventory.json", hosts))
        findings = analyze(capture, topo)
    finally:
        topology.shared_component_findings = real
    with_ports = {f.component for f in findings if f.kind == topology.SHARED_COMPONENT_FAULT}
    limits = [f.summary for f in findings if f.kind == topology.SWITCH_POWER_LIMIT]
    hosts_only = {f.component for f in real(*calls[0])[0]} if calls else set()
    return hosts_only, with_ports, limits


def _rack_of(switch: str) -> str:
    return "rack:r" + switch.removeprefix("switch:leaf-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--clean", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ib-only", action="store_true", help="InfiniBand ports only (quicker)")
    ap.add_argument("--counts", default="1-16", help="affected hosts, e.g. 1-16 or 2,3,4,6,8 ('' for clean only)")
    args = ap.parse_args()
    lo, _, hi = args.counts.partition("-")
    counts = list(range(int(lo), int(hi) + 1)) if hi else [int(c) for c in args.counts.split(",") if c.strip()]
    names = [f"gpu{i:04d}" for i in range(1, args.hosts + 1)]
    t0 = time.perf_counter()
    rows: dict[tuple[int, int], list[int]] = {}  # (k, e) -> [named today, named now, wrong today, wrong now]
    example_limits: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for e in MINORITY_ERRORS:
            for k in counts:
                tally = [0, 0, 0, 0]
                for rep in range(args.reps):
                    sc = Scenario(f"minority-switch-{k}-x{e}-{rep}", f"minority-switch-{k}-x{e}", names)
                    folder = Path(tmp) / sc.name
                    build(sc, folder, args.seed, ib_only=args.ib_only)
                    truth = next(iter(sc.truth))
                    right = {truth, _rack_of(truth)}
                    today, now, limits = _named(folder, names)
                    tally[0] += truth in today
                    tally[1] += truth in now
                    tally[2] += bool(today - right)
                    tally[3] += bool(now - right)
                    if limits and len(example_limits) < 3 and truth not in now:
                        example_limits.append(limits[0])
                rows[(k, e)] = tally
        clean = [0, 0]
        for rep in range(args.clean):
            sc = Scenario(f"clean-{rep}", None, names)
            folder = Path(tmp) / sc.name
            build(sc, folder, args.seed, ib_only=args.ib_only)
            today, now, _ = _named(folder, names)
            clean[0] += bool(today)
            clean[1] += bool(now)
    reps = args.reps
    print(f"{args.hosts} hosts ({args.hosts // 16} leaves of 16), {reps} fleets per cell, "
          f"seed {args.seed}{', InfiniBand only' if args.ib_only else ''}; share of bad leaves named, "
          f"host-level test alone (today) / with the port test")
    print()
    print("| affected hosts of 16 | " + " | ".join(f"{e} symbol errors / 5 s ({e * 720:,}/h)"
                                                   for e in MINORITY_ERRORS) + " |")
    print("|---:|" + "---|" * len(MINORITY_ERRORS))
    for k in counts:
        cells = [f"{rows[(k, e)][0] / reps:.0%} / **{rows[(k, e)][1] / reps:.0%}**" for e in MINORITY_ERRORS]
        print(f"| {k} | " + " | ".join(cells) + " |")
    wrong = [sum(rows[(k, e)][i] for k in counts for e in MINORITY_ERRORS) for i in (2, 3)]
    cells_n = len(counts) * len(MINORITY_ERRORS) * reps
    print()
    print(f"Another component named in a bad-leaf fleet: {wrong[0]} / {wrong[1]} of {cells_n} fleets. "
          f"Clean fleets with any component named: {clean[0]} / {clean[1]} of {args.clean}.")
    for line in example_limits:
        print(f"Power-limit line: {line}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
