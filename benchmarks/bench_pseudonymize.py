"""Pseudonymization throughput on a realistic capture, and the nodeset rule on adversarial text.

    python benchmarks/bench_pseudonymize.py [--mb 10] [--hosts 64] [--adversarial-kb 200]

The capture is bench_redact's (real kernel logs and `ethtool -S` outputs, repeated with shifted numbers), with
host names of a `--hosts` fleet planted in it: a host name at the head of every 20th line (the way a merged
syslog names its source), an FQDN every 200th, and a Slurm node list in folded form (`gpu[0003-0005,0009]`)
every 500th. It reports `Redactor(pseudonymize=True).redact_text` MB/s over it (best of 3), and, for the
nodeset rule, the time over adversarial texts of `--adversarial-kb` and twice that: a linear rule takes about
twice as long on the second.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "redact"))

from bench_redact import _best_of, realistic_capture  # noqa: E402

from fabricase.redact import Redactor  # noqa: E402

SEED = 15


def fleet(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n + 1)]


def with_hosts(text: str, hosts: list[str]) -> str:
    """The capture text with host names, FQDNs and folded node lists planted in it."""
    rng = random.Random(SEED)
    lines = text.splitlines()
    for at in range(0, len(lines), 20):
        lines[at] = f"{rng.choice(hosts)} {lines[at]}"
    for at in range(7, len(lines), 200):
        lines[at] += f" peer {rng.choice(hosts)}.cluster.example.com"
    for at in range(11, len(lines), 500):
        a, b = sorted(rng.sample(range(1, len(hosts) + 1), 2))
        lines[at] += f" NodeList=gpu[{a:04d}-{min(a + 2, len(hosts)):04d},{b:04d}]"
    return "\n".join(lines) + "\n"


def adversarial(kb: int) -> dict[str, str]:
    """Texts that make a careless nodeset pattern backtrack: long runs of its own characters."""
    n = kb * 1000
    return {
        "name run": "g" * n,
        "open brackets": "gpu[" * (n // 4),
        "unclosed range list": "gpu[1" + ",1" * (n // 2),
        "bracket chain": "gpu" + "[1]" * (n // 3),
        "bracket chain, no close": "gpu" + "[1]x" * (n // 4) + "[1",
        "dots": "gpu0001" + "." * n,
        "many small sets": "gpu[0001-0002] " * (n // 15),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--adversarial-kb", type=int, default=200)
    args = parser.parse_args()
    hosts = fleet(args.hosts)
    text = with_hosts(realistic_capture(args.mb), hosts)
    key = random.Random(SEED).randbytes(32)

    def run() -> None:
        # A fresh redactor each time: nothing remembered from the previous run.
        Redactor(pseudonymize=True, key=key, hosts=hosts).redact_text("capture/kernel.log", text)

    seconds = _best_of(3, run)
    redactor = Redactor(pseudonymize=True, key=key, hosts=hosts)
    out = redactor.redact_text("capture/kernel.log", text)
    left = sum(out.count(h) for h in hosts[:8])
    folded = out.count("NodeList=gpu[")
    print(f"capture {len(text) / 1e6:.1f} MB, {args.hosts} hosts: pseudonymize {len(text) / 1e6 / seconds:.1f} MB/s "
          f"({seconds:.2f} s); replaced {redactor.report()['totals']}; host names left {left}, "
          f"folded node lists left {folded}")
    for name, small in adversarial(args.adversarial_kb).items():
        big = adversarial(2 * args.adversarial_kb)[name]
        r = Redactor(pseudonymize=True, key=key, hosts=hosts)
        t1 = _best_of(2, lambda r=r, small=small: r._redact_uncached(small, __import__("collections").Counter()))
        t2 = _best_of(2, lambda r=r, big=big: r._redact_uncached(big, __import__("collections").Counter()))
        print(f"adversarial {name!r}: {t1:.3f} s on {args.adversarial_kb} KB, {t2:.3f} s on twice that "
              f"(x{t2 / max(t1, 1e-9):.1f})")


if __name__ == "__main__":
    main()
