"""Evaluation harness for fleet analysis: the synthetic fleets of benchmarks/fleetgen.py (realistic noise, one
injected fault or none, written as real capture directories), analyzed and diagnosed by the real pipeline, and
scored at suspect level (and at finding level beside it).

    python benchmarks/harness.py [--hosts 1024] [--per-kind 5] [--clean 20] [--out DIR] [--seed 1] [--fleet16]

It prints precision, recall, false alarms and duplicates per fault kind and overall. `fabricase analyze DIR
--inventory DIR/inventory.json --json` on any scenario folder it writes gives the same suspects it scored.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fleetgen import ETH_PORTS, FLEET16_KINDS, PORTS, build, build_fleet16, scenarios


def named(findings: list[dict]) -> set[str]:
    """What the analysis blamed: major or critical findings, as "host/component" or a shared component."""
    out = set()
    for f in findings:
        if f["severity"] in ("major", "critical"):
            out.add(f["component"] if f["host"] is None else f"{f['host']}/{f['component']}")
    return out


def suspect_names(suspect: dict) -> set[str]:
    """One suspect's names: "host/component" for each of its components (a shared one: the component)."""
    return {c if suspect["host"] is None else f"{suspect['host']}/{c}" for c in suspect["components"]}


_PCI_NO_FUNCTION = re.compile(r"(pcie:[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2})$")


def same_thing(name: str) -> str:
    """A name in one spelling per physical thing: a PCI address without its function (an Xid line's
    `0000:bb:00`) is function 0 (`0000:bb:00.0`), as the kernel names the GPU."""
    return _PCI_NO_FUNCTION.sub(r"\1.0", name.lower())


def suspected(diagnosis: dict) -> set[str]:
    """What the diagnosis blamed: every name of every suspect. `diagnosis`: Diagnosis.to_dict(), or the output of
    `fabricase analyze --json` (both carry "suspects")."""
    return {name for s in diagnosis["suspects"] for name in suspect_names(s)}


@dataclass
class Score:
    """One scenario (or a sum of them) scored at suspect level, with the finding-level counts beside it."""

    scenarios: int = 0
    true_suspects: int = 0  # suspects naming an injected fault
    false_alarms: int = 0  # suspects naming none
    found: int = 0  # injected faults named by at least one suspect
    missed: int = 0  # injected faults no suspect names
    duplicates: int = 0  # suspects beyond the first that name the same fault
    finding_tp: int = 0
    finding_fn: int = 0
    finding_fa: int = 0

    def __add__(self, other: Score) -> Score:
        return Score(*(getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__))

    @property
    def precision(self) -> float | None:
        n = self.true_suspects + self.false_alarms
        return self.true_suspects / n if n else None

    @property
    def recall(self) -> float | None:
        n = self.found + self.missed
        return self.found / n if n else None

    @property
    def finding_precision(self) -> float | None:
        n = self.finding_tp + self.finding_fa
        return self.finding_tp / n if n else None

    @property
    def finding_recall(self) -> float | None:
        n = self.finding_tp + self.finding_fn
        return self.finding_tp / n if n else None


def _faults_named(suspect: dict, faults: set[str]) -> set[str]:
    """The injected faults (already in same_thing's spelling) that one suspect names."""
    return {same_thing(n) for n in suspect_names(suspect)} & faults


def score(diagnosis: dict, findings: list[dict], truth: set[str]) -> Score:
    """Score one scenario: a suspect is a true positive when one of its names is an injected fault, else a false
    alarm; a fault no suspect names is missed; a fault named by n > 1 suspects counts n - 1 duplicates."""
    faults = {same_thing(t) for t in truth}
    hits = [_faults_named(s, faults) for s in diagnosis["suspects"]]
    per_fault = {t: sum(t in h for h in hits) for t in faults}
    got = named(findings)
    return Score(scenarios=1, true_suspects=sum(bool(h) for h in hits), false_alarms=sum(not h for h in hits),
                 found=sum(n > 0 for n in per_fault.values()), missed=sum(n == 0 for n in per_fault.values()),
                 duplicates=sum(max(n - 1, 0) for n in per_fault.values()), finding_tp=len(got & truth),
                 finding_fn=len(truth - got), finding_fa=len(got - truth))


def diagnose_folder(folder: Path) -> tuple[dict, list[dict], float]:
    """Diagnose a capture directory with its inventory as `fabricase analyze DIR --inventory` does: the diagnosis
    and the raw findings as JSON dicts, and the seconds that load + analysis + diagnosis took."""
    from fabricase.capturedir import load_capture
    from fabricase.pipeline import diagnose_capture
    from fabricase.placements import inventory_placements, topology_of

    t0 = time.perf_counter()
    capture = load_capture(folder, verify=False)
    placed = inventory_placements(folder / "inventory.json", [hc.host for hc in capture.hosts])
    result = diagnose_capture(capture, topology_of(placed), placed)
    seconds = time.perf_counter() - t0
    return result.diagnosis.to_dict(), [f.to_dict() for f in result.findings], seconds


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_table(rows: dict[str, Score]) -> None:
    """Suspect-level precision, recall, false alarms and duplicates per kind, and the finding-level columns."""
    print(f"{'':<15} {'':>4}  {'suspects':-^30}  {'findings (major+)':-^22}")
    print(f"{'kind':<15} {'runs':>4}  {'prec':>5} {'recall':>6} {'alarms':>6} {'dups':>5} {'found':>4}"
          f"  {'prec':>5} {'recall':>6} {'alarms':>9}")
    for kind, r in [*rows.items(), ("overall", sum(rows.values(), Score()))]:
        print(f"{kind:<15} {r.scenarios:>4}  {_ratio(r.precision):>5} {_ratio(r.recall):>6} {r.false_alarms:>6}"
              f" {r.duplicates:>5} {r.found:>4}  {_ratio(r.finding_precision):>5} {_ratio(r.finding_recall):>6}"
              f" {r.finding_fa:>9}")


def names_a_fault(suspect: dict, truth: set[str]) -> bool:
    return bool(_faults_named(suspect, {same_thing(t) for t in truth}))


def _false_alarms(name: str, diagnosis: dict, truth: set[str]) -> None:
    for s in diagnosis["suspects"]:
        if not names_a_fault(s, truth):
            print(f"  false alarm in {name}: {s['severity']} {s['name']} {s['verdict']}: {s['key_number'][:60]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--per-kind", type=int, default=5)
    ap.add_argument("--clean", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fleet16", action="store_true",
                    help="only the 16-host fleet with 8 faults, one per host (build_fleet16)")
    ap.add_argument("--out", type=Path, default=None, help="keep the scenario folders here")
    ap.add_argument("--verbose", action="store_true", help="print every false alarm")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="fabricase-harness-"))
    rows: dict[str, Score] = {}
    timings = []
    if args.fleet16:
        truth = build_fleet16(out / "fleet16", args.seed)
        diagnosis, findings, seconds = diagnose_folder(out / "fleet16")
        rows["fleet16"] = score(diagnosis, findings, truth)
        timings.append(seconds)
        print(f"16 hosts, {len(truth)} faults ({', '.join(FLEET16_KINDS)}); capture in {out / 'fleet16'}")
        print(diagnosis["verdict"])
        for s in diagnosis["suspects"]:
            mark = "ok " if names_a_fault(s, truth) else "!! "
            print(f"  {mark}{s['severity']:<8} {s['name'][:34]:<34} {s['verdict'][:28]}")
        if args.verbose:
            _false_alarms("fleet16", diagnosis, truth)
    else:
        for sc in scenarios(args.hosts, args.per_kind, args.clean):
            build(sc, out / sc.name, args.seed)
            diagnosis, findings, seconds = diagnose_folder(out / sc.name)
            timings.append(seconds)
            kind = sc.kind or "clean"
            rows[kind] = rows.get(kind, Score()) + score(diagnosis, findings, sc.truth)
            if args.verbose:
                _false_alarms(sc.name, diagnosis, sc.truth)
        print(f"{args.hosts} hosts x {PORTS} InfiniBand + {len(ETH_PORTS)} RoCE ports per scenario; scenarios in {out}")
    print_table(rows)
    timings.sort()
    print(f"per scenario (load + analyze + diagnose): median {timings[len(timings) // 2]:.2f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
