"""Capture cost on one host: CPU of the capture script, and time to parse, store, load and analyze it.

Builds a synthetic host tree (N interfaces x M counters, real sysfs file shapes) and runs the real
compiled script on it with sh. Run by hand: python benchmarks/bench_capture.py [--ifaces 64] [--repeat 5]
[--format 3] (the capture format written: 3, the binary index.fci, or 2, index.json).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from fabricase.analysis import analyze
from fabricase.capturedir import (
    FORMAT_VERSION,
    host_capture_from_stream,
    load_capture,
    write_capture_meta,
    write_host,
)
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.models import HostStatus

COUNTERS = [
    "rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped",
    "multicast", "collisions", "rx_length_errors", "rx_over_errors", "rx_crc_errors", "rx_frame_errors",
    "rx_fifo_errors", "rx_missed_errors", "tx_aborted_errors", "tx_carrier_errors", "tx_fifo_errors",
    "tx_heartbeat_errors", "tx_window_errors", "rx_compressed", "tx_compressed", "rx_nohandler",
]


def build_tree(root: Path, ifaces: int) -> int:
    files = 0
    for i in range(ifaces):
        d = root / "sys/class/net" / f"eth{i}"
        (d / "statistics").mkdir(parents=True)
        for j, c in enumerate(COUNTERS):
            (d / "statistics" / c).write_text(f"{i * 1000003 + j}\n")
            files += 1
        for attr, value in (("carrier_changes", "2"), ("operstate", "up"), ("carrier", "1"), ("speed", "400000"),
                            ("mtu", "9000"), ("address", "0c:42:a1:00:00:01"), ("type", "1"), ("duplex", "full")):
            (d / attr).write_text(value + "\n")
            files += 1
    return files


def child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ifaces", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--format", type=int, choices=(2, 3), default=FORMAT_VERSION, help="capture format written")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "host"
        files = build_tree(root, args.ifaces)
        plan = CapturePlan(collectors=tuple(select_collectors(["netdev", "netstat", "identity"])), interval_s=0,
                           root=str(root))
        script = compile_script(plan)
        cpu, wall, parse, load, analysis = [], [], [], [], []
        for n in range(args.repeat):
            c0, t0 = child_cpu(), time.perf_counter()
            out = subprocess.run(["sh", "-s"], input=script.encode(), capture_output=True, check=True).stdout
            wall.append(time.perf_counter() - t0)
            cpu.append(child_cpu() - c0)
            t0 = time.perf_counter()
            stream = parse_stream(out)
            hc = host_capture_from_stream("h1", stream, plan)
            hc.status, hc.transport = HostStatus.OK, "local"
            cap_dir = Path(tmp) / f"cap{n}"
            cap_dir.mkdir()
            write_capture_meta(cap_dir, plan=plan, targets={}, hosts=["h1"], created_at="2026-01-01T00:00:00Z",
                               version=args.format)
            write_host(cap_dir, hc, out, args.format)
            parse.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            capture = load_capture(cap_dir)
            len(capture.hosts[0].items)  # (format 3 decodes items on first use: count it here)
            load.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            analyze(capture)
            analysis.append(time.perf_counter() - t0)
        items = len(stream.items)
        # The naive alternative for comparison: one `cat` process per file, both snapshots.
        naive = f'for s in 0 1; do for f in {root}/sys/class/net/*/statistics/* {root}/sys/class/net/*/*; do ' \
                '[ -f "$f" ] && cat "$f"; done; done >/dev/null'
        naive_cpu = []
        for _ in range(args.repeat):
            c0 = child_cpu()
            subprocess.run(["sh", "-c", naive], check=True)
            naive_cpu.append(child_cpu() - c0)

    def fmt(xs: list[float]) -> str:
        return f"median {statistics.median(xs) * 1000:8.1f} ms  (min {min(xs) * 1000:.1f}, max {max(xs) * 1000:.1f})"

    print(f"host tree: {args.ifaces} interfaces, {files} sysfs files; stream items: {items}; runs: {args.repeat}; "
          f"capture format {args.format}")
    print(f"capture script CPU (sh + children): {fmt(cpu)}")
    print(f"naive cat-per-file CPU, same files: {fmt(naive_cpu)}")
    print(f"capture script wall:                {fmt(wall)}")
    print(f"parse stream + write capture dir:   {fmt(parse)}")
    print(f"load + verify capture dir:          {fmt(load)}")
    print(f"analyze:                            {fmt(analysis)}")


if __name__ == "__main__":
    main()
