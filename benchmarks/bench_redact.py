"""Secret-redaction throughput on a realistic capture, and the worst rule on adversarial text.

    python benchmarks/bench_redact.py [--mb 10] [--binary-mb 4] [--adversarial-kb 100] [--baseline OLD_SECRETS_PY]

The capture is the real kernel logs and `ethtool -S` outputs of tests/fixtures/real, repeated (with their
numbers shifted, so that no two copies are equal) to about `--mb` megabytes, with a secret planted every
~2,000 lines. It reports:
- `redact_secrets` MB/s on it, and the same over a plain `re.sub` of one rule (the AWS access key id) in the
  same run: the ratio is what to compare between machines and between versions (docs/redaction.md keeps the
  numbers before and after the rule set of issue 14);
- with --baseline (an older secrets.py, e.g. `git show HEAD~1:src/fabricase/redact/secrets.py > /tmp/old.py`),
  the same numbers for it, in the same run;
- a binary file as the gate reads it (random bytes decoded as latin-1, `--binary-mb`), the same way, and again
  with `str.translate` lowering it (how `ascii_lower` lowered non-ASCII text before 2026-12-04), in the same run;
- the slowest rule over adversarial texts (long runs of its own characters, of its anchors, of `=`, spaces,
  quotes), each run alone on the rule's pattern: every rule must stay linear.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import string
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "redact"))

from secret_corpus import adversarial_texts  # noqa: E402

from fabricase.redact.secrets import SECRET_RULES, redact_secrets  # noqa: E402

REAL = Path(__file__).parents[1] / "tests" / "fixtures" / "real"
_NUMBER = re.compile(r"\d+")


def realistic_capture(megabytes: float) -> str:
    """Kernel logs and ethtool outputs, repeated with shifted numbers, with a few planted secrets."""
    sources = sorted((REAL / "kernel-log").rglob("*.log*")) + sorted((REAL / "ethernet").rglob("ethtool-S*"))
    base = "".join(p.read_text(encoding="utf-8", errors="replace") for p in sources if p.is_file())
    out, size, copy = [], 0, 0
    while size < megabytes * 1_000_000:
        copy += 1
        text = _NUMBER.sub(lambda m, c=copy: str(int(m.group(0)[:15]) + c), base)
        lines = text.splitlines()
        for at in range(0, len(lines), 2000):
            lines[at] += f" app: WANDB_API_KEY=a{copy:08d}b{at:08d}c9d8e7f6a5b4c3d2e1f0a9b8"
        text = "\n".join(lines) + "\n"
        out.append(text)
        size += len(text)
    return "".join(out)


def _best_of(n: int, work) -> float:
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def throughput(text: str, repeat: int = 3, redact=redact_secrets) -> dict[str, float]:
    mb = len(text) / 1e6
    plain = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])", re.ASCII)
    t_plain = _best_of(repeat, lambda: plain.sub("[REDACTED]", text))
    t_rules = _best_of(repeat, lambda: redact(text, Counter()))
    return {"mb": mb, "rules_mb_s": mb / t_rules, "plain_mb_s": mb / t_plain, "ratio": t_rules / t_plain}


def load_baseline(path: str):
    """An older secrets.py as a module of its own (it imports fabricase.redact.lines, which only grew)."""
    spec = importlib.util.spec_from_file_location("baseline_secrets", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_secrets"] = module
    spec.loader.exec_module(module)
    return module


def binary_text(megabytes: float) -> str:
    """Random bytes as the gate reads a file that is not UTF-8: decoded as latin-1."""
    import random

    return random.Random(1).randbytes(int(megabytes * 1_000_000)).decode("latin-1")


def with_translate_lowering(text: str) -> dict[str, float]:
    """throughput() with ascii_lower as it was: str.translate on all non-ASCII text."""
    import fabricase.redact.lines as lines
    import fabricase.redact.secrets as secrets

    table = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
    saved = lines.ascii_lower, secrets.ascii_lower

    def old(t: str) -> str:
        return t.lower() if t.isascii() else t.translate(table)

    lines.ascii_lower = secrets.ascii_lower = old
    try:
        return throughput(text)
    finally:
        lines.ascii_lower, secrets.ascii_lower = saved


def worst_rule(kb: int) -> tuple[float, str, str]:
    """The slowest (time, rule kind, adversarial text name) of every rule's pattern on every adversarial text."""
    worst = (0.0, "", "")
    for index, rule in enumerate(SECRET_RULES):
        for name, text in adversarial_texts(rule, kb * 1000).items():
            start = time.perf_counter()
            rule.pattern.sub("x", text)
            elapsed = time.perf_counter() - start
            if elapsed > worst[0]:
                worst = (elapsed, f"{index}:{rule.kind}", name)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--binary-mb", type=float, default=4.0)
    parser.add_argument("--adversarial-kb", type=int, default=100)
    parser.add_argument("--skip-adversarial", action="store_true")
    parser.add_argument("--baseline", help="an older secrets.py to measure in the same run")
    args = parser.parse_args()
    text = realistic_capture(args.mb)
    found: Counter[str] = Counter()
    redact_secrets(text, found)
    result = throughput(text)
    print(f"capture {result['mb']:.1f} MB ({dict(found)})")
    print(f"redact_secrets {result['rules_mb_s']:.1f} MB/s; one plain re.sub {result['plain_mb_s']:.1f} MB/s; "
          f"ratio {result['ratio']:.2f}x the plain re.sub ({len(SECRET_RULES)} rules)")
    if args.baseline:
        old = load_baseline(args.baseline)
        before = throughput(text, redact=old.redact_secrets)
        print(f"baseline {before['rules_mb_s']:.1f} MB/s; one plain re.sub {before['plain_mb_s']:.1f} MB/s; "
              f"ratio {before['ratio']:.2f}x ({len(old.SECRET_RULES)} rules)")
    binary = binary_text(args.binary_mb)
    now, before = throughput(binary), with_translate_lowering(binary)
    print(f"binary {now['mb']:.1f} MB: redact_secrets {now['rules_mb_s']:.1f} MB/s ({now['ratio']:.2f}x the plain "
          f"re.sub); lowered by str.translate {before['rules_mb_s']:.1f} MB/s ({before['ratio']:.2f}x)")
    if not args.skip_adversarial:
        seconds, rule, name = worst_rule(args.adversarial_kb)
        print(f"worst rule on {args.adversarial_kb} KB adversarial text: {seconds:.3f} s ({rule}, {name})")


if __name__ == "__main__":
    main()
