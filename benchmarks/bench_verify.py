"""Time and peak memory of `verify` and extraction on a bundle holding one large member.

    python benchmarks/bench_verify.py [--mib 256] [--random]

Builds a capture whose host stream is MIB MiB (zeros, or random bytes that do not compress), bundles it, then
verifies and extracts it, each in a fresh child process so its peak RSS is its own. Both must stay near the
interpreter's baseline whatever the member's size: members are hashed and written in 1 MiB chunks. Also times
verify on the same bundle with 1 MiB appended (it must say so) and on one whose header declares 3 GiB (it must
refuse at the header, without reading on).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

_CHILD = """
import re, sys, time
from pathlib import Path
from fabricase.bundler import extract_bundle, verify_bundle
from fabricase.errors import BundleError
start = time.perf_counter()
try:
    if sys.argv[1] == "verify":
        report = verify_bundle(Path(sys.argv[2]))
        said = "ok" if report.ok else "; ".join(report.problems)[:100]
    else:
        extract_bundle(Path(sys.argv[2]), Path(sys.argv[3]))
        said = "extracted"
except BundleError as exc:
    said = str(exc)[-100:]
# VmHWM, not ru_maxrss: the latter carries the parent's peak across fork and exec
hwm = int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
print(f"{time.perf_counter() - start:.2f} {hwm // 1024} {' '.join(said.split())}")
"""


def _child(*args: str) -> tuple[float, int, str]:
    out = subprocess.run([sys.executable, "-c", _CHILD, *args], check=True, capture_output=True, text=True).stdout
    seconds, rss, said = out.strip().split(" ", 2)
    return float(seconds), int(rss), said


def _capture(root: Path, mib: int, random_bytes: bool) -> Path:
    host = root / "hosts" / "gpu001"
    host.mkdir(parents=True)
    (root / "capture.json").write_text(json.dumps({"format": "fabricase-capture", "format_version": 2,
                                                   "created_at": "2024-05-14T08:30:00Z", "hosts": ["gpu001"]}))
    (host / "index.json").write_text('{"items": []}')
    chunk = (lambda: __import__("os").urandom(1 << 20)) if random_bytes else (lambda: b"\0" * (1 << 20))
    with (host / "stream.fc1").open("wb") as fh:
        for _ in range(mib):
            fh.write(chunk())
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="size of the large member (at most the 512 MiB cap)")
    parser.add_argument("--random", action="store_true", help="random bytes instead of zeros")
    args = parser.parse_args()
    from fabricase.bundler import build_bundle

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        bundle = build_bundle(_capture(tmp_path / "cap", args.mib, args.random), tmp_path / "b.tar.gz",
                              extra={}, mtime=1715675400).path
        appended = tmp_path / "appended.tar.gz"
        appended.write_bytes(bundle.read_bytes() + b"\0" * (1 << 20))
        head = tarfile.TarInfo("capture/hosts/gpu001/huge")
        head.size, head.mtime = 3 * 1024**3, 1715675400
        huge = tmp_path / "huge.tar.gz"
        with tarfile.open(bundle, "r|gz") as tar:  # the manifest comes first: keep it, then the hostile header
            first = next(iter(tar))
            boundary = first.offset_data + -(-first.size // 512) * 512
        with gzip.open(bundle) as gz:
            huge.write_bytes(gzip.compress(gz.read(boundary) + head.tobuf(tarfile.PAX_FORMAT) + b"\0" * 4096))
        baseline = _child("verify", str(tmp_path / "absent"))
        rows = [("baseline (a missing file)", baseline), ("verify", _child("verify", str(bundle))),
                ("extract", _child("extract", str(bundle), str(tmp_path / "x"))),
                ("verify, 1 MiB appended", _child("verify", str(appended))),
                ("verify, a 3 GiB header", _child("verify", str(huge)))]
        kind = "random" if args.random else "zeros"
        print(f"bundle: {bundle.stat().st_size} bytes, a {args.mib} MiB member ({kind})")
        for label, (seconds, rss, said) in rows:
            print(f"{label:28} {seconds:7.2f} s  peak RSS {rss:5d} MiB  {said}")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - start:.1f} s")
