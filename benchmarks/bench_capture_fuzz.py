"""Fuzz capture directories: mutated copies of a small real-looking capture through load and diagnosis.

Every mutated directory must give one of three outcomes, never an internal error (an exception that is not a
FabricaseError) and never a hang:
- `error`: a one-line FabricaseError naming the file (and host) at fault;
- `failed-host`: the capture loads and is diagnosed, the damaged host marked failed with its reason;
- `ok`: the mutation changed nothing that matters (an unknown key, a reason text).

Mutations: delete, truncate, corrupt, empty, replace with a directory, a FIFO or a symlink out of the capture,
for any file or host folder; JSON of the wrong type at every level of capture.json, host.json, index.json and
placements.json (lists for objects, strings for numbers, null, huge and non-finite numbers, negative and
past-the-end offsets and sizes, sha256 mismatches, duplicate items, unknown keys), non-UTF-8 bytes, JSON nested
100,000 deep, host names with `..` or control characters.

    python benchmarks/bench_capture_fuzz.py            # 10,000 mutated directories, then the RSS check
    python benchmarks/bench_capture_fuzz.py --quick    # 500
    python benchmarks/bench_capture_fuzz.py --rss-only [--baseline-src /path/to/old/src]

The RSS check analyzes a capture whose host stream is padded with zeros to 1 GiB (a sparse file) and to
300 MB (under the 512 MiB cap, so the items are read one by one), in a fresh interpreter each, and prints the
peak RSS. `--baseline-src` runs the same against another checkout's src/ for a before/after.
The corpus and its mutations are benchmarks/fuzz_corpus.py; tests/capture/test_malformed_capture.py runs 300
mutations of them in the suite.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from fuzz_corpus import HOSTS, NCCL_LOG, build_capture, mutate, rewrite_item  # noqa: E402

from fabricase.capturedir import load_capture, load_placements  # noqa: E402
from fabricase.errors import FabricaseError  # noqa: E402
from fabricase.models import HostStatus  # noqa: E402

__all__ = ["HOSTS", "NCCL_LOG", "RUN_LIMIT_S", "Outcome", "Summary", "build_capture", "diagnose_dir", "fuzz",
           "mutate", "rewrite_item", "run_one"]

RUN_LIMIT_S = 10  # a run past this is a hang (a FIFO read, a quadratic loop): counted as an internal error


@dataclass(frozen=True)
class Outcome:
    kind: str  # ok | failed-host | error | internal
    mutation: str
    message: str = ""
    seconds: float = 0.0


@dataclass
class Summary:
    counts: Counter = field(default_factory=Counter)
    worst_s: float = 0.0
    worst: str = ""
    internal: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.kind] += 1
        if outcome.seconds > self.worst_s:
            self.worst_s, self.worst = outcome.seconds, outcome.mutation
        if outcome.kind == "internal":
            self.internal.append(outcome)


# -- running -----------------------------------------------------------------------------------------------

class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang(f"no answer within {RUN_LIMIT_S}s")


def diagnose_dir(root: Path) -> Any:
    """What `fabricase analyze DIR` does, without the terminal: load (verified), placements, diagnosis."""
    from fabricase.pipeline import diagnose_capture
    from fabricase.placements import topology_of

    capture = load_capture(root)
    placements = load_placements(capture.root) or []
    return capture, diagnose_capture(capture, topology_of(placements), placements)


def run_one(root: Path, mutation: str, analyze: Callable[[Path], Any] = diagnose_dir) -> Outcome:
    """Analyze one mutated directory and classify the outcome."""
    start = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(RUN_LIMIT_S)
    try:
        capture, _ = analyze(root)
    except FabricaseError as exc:
        text = str(exc)
        kind = "error" if text and "\n" not in text and "\r" not in text else "internal"
        return Outcome(kind, mutation, text, time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - what the fuzzer is looking for
        return Outcome("internal", mutation, f"{type(exc).__name__}: {exc}"[:300], time.perf_counter() - start)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    failed = [h for h in capture.hosts if h.status == HostStatus.FAILED]
    kind = "failed-host" if failed else "ok"
    return Outcome(kind, mutation, "; ".join(f"{h.host}: {h.reason}" for h in failed)[:300],
                   time.perf_counter() - start)


def fuzz(n: int, seed: int = 0, work: Path | None = None,
         on_outcome: Callable[[Outcome], None] | None = None) -> Summary:
    """n mutated copies of build_capture()'s capture, each loaded and diagnosed; seeded, so reproducible."""
    summary = Summary()
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        pristine = build_capture(Path(tmp) / "pristine")
        outside = Path(tmp) / "outside"
        outside.mkdir()
        diagnose_dir(pristine)  # imports and first-use costs out of the worst time
        for i in range(n):
            rng = random.Random(f"{seed}:{i}")
            root = Path(tmp) / "mutated"
            shutil.copytree(pristine, root, symlinks=True)
            mutation = mutate(root, rng, outside)
            outcome = run_one(root, f"#{i} {mutation}")
            summary.add(outcome)
            if on_outcome:
                on_outcome(outcome)
            shutil.rmtree(root)
    return summary


# -- memory ------------------------------------------------------------------------------------------------

_RSS_CHILD = """
import resource, sys, time
from pathlib import Path
sys.path.insert(0, {bench!r})
import bench_capture_fuzz as b
root = Path({root!r})
stream = root / "hosts/gpu001/stream.fc1"
with open(stream, "r+b") as fh:
    fh.truncate({size})  # zeros after the END marker, as a sparse file: the items stay valid
start = time.perf_counter()
try:
    capture, analysis = b.diagnose_dir(root)
    hc = capture.host("gpu001")
    what = f"{{hc.status}}: {{hc.reason}}" if hc.reason else str(hc.status)
except Exception as exc:
    what = f"{{type(exc).__name__}}: {{exc}}"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{{peak:.0f}} MB peak RSS, {{time.perf_counter() - start:.2f}} s; gpu001 {{what[:160]}}")
"""


def rss_of_zeros(size: int, src: Path | None = None) -> str:
    """Peak RSS of loading and diagnosing a capture whose gpu001 stream is padded to `size` bytes, in a fresh
    interpreter (src: another checkout's src/ to import fabricase from)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = build_capture(Path(tmp) / "zeros")
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = str(src)
        code = _RSS_CHILD.format(bench=str(Path(__file__).parent), root=str(root), size=size)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
        return (done.stdout.strip() or done.stderr.strip().splitlines()[-1])[:300]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10_000, help="mutated directories (default 10,000)")
    ap.add_argument("--quick", action="store_true", help="500 mutated directories")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rss-only", action="store_true", help="only the memory check")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="another checkout's src/ folder: run the memory check against it too (before/after)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every outcome")
    args = ap.parse_args(argv)
    # A runaway read (a symlink to /dev/zero on an old fabricase) must fail here, not take the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    status = 0
    if not args.rss_only:
        n = 500 if args.quick else args.n
        start = time.perf_counter()
        show = (lambda o: print(f"{o.kind:12s} {o.seconds:6.3f}s {o.mutation} -> {o.message[:160]!r}")) \
            if args.verbose else None
        summary = fuzz(n, args.seed, on_outcome=show)
        print(f"{n} mutated capture directories in {time.perf_counter() - start:.1f} s (seed {args.seed})")
        for kind in ("internal", "error", "failed-host", "ok"):
            print(f"  {kind:12s} {summary.counts[kind]}")
        print(f"  worst time   {summary.worst_s:.3f} s ({summary.worst})")
        kinds = Counter(o.message.split(":")[0] for o in summary.internal)
        for o in summary.internal[:20]:
            print(f"  INTERNAL {o.mutation}: {o.message}")
        if kinds:
            print(f"  internal errors by type: {dict(kinds.most_common())}")
        status = 1 if summary.internal else 0
    for size, label in ((1 << 30, "1 GiB"), (300 * 10**6, "300 MB")):
        print(f"host stream padded with zeros to {label}: {rss_of_zeros(size)}")
        if args.baseline_src is not None:
            print(f"  baseline ({args.baseline_src}): {rss_of_zeros(size, args.baseline_src)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
