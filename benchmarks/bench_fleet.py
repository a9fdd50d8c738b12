"""Fleet fan-out at scale: 1,024 simulated hosts through the real pipeline (stream parse, capture directory,
load), with the fake transport replaying one recorded GPU host's stream per host, latency 20-200 ms, and 1%
of hosts that hang. Issue 4's target: --fanout 128, a 10 s per-host timeout, under 15 s wall and 1 GiB peak
memory on a 2-core machine, every hung host reported as timed out.

    python benchmarks/bench_fleet.py [--hosts 1024] [--fanout 128] [--timeout 10] [--hang 0.01]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from fabricase.collectors import select_collectors  # noqa: E402
from fabricase.collectors.plan import CapturePlan, compile_script  # noqa: E402
from fabricase.models import HostStatus  # noqa: E402
from fabricase.pipeline import CollectOptions, collect  # noqa: E402
from fabricase.targets import Targets, parse_nodeset  # noqa: E402
from fabricase.transports.fake import FakeTransport  # noqa: E402
from fabricase.transports.local import LocalTransport  # noqa: E402
from hosttrees.hosts import hgx_mlx5_host  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--fanout", type=int, default=128)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--hang", type=float, default=0.01)
    ap.add_argument("--host", choices=("hgx", "local"), default="hgx",
                    help="whose stream each host replays: the golden 8-GPU HGX host, or this machine's own capture")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = str(hgx_mlx5_host(Path(tmp) / "root")) if args.host == "hgx" else ""
        plan = CapturePlan(collectors=tuple(select_collectors()), interval_s=0, root=root)
        stream = LocalTransport().run_one("localhost", compile_script(plan), timeout_s=60).stdout
        hosts = parse_nodeset(f"gpu[0001-{args.hosts:04d}]")
        # A fresh copy per host, as real hosts' streams would be: in-flight memory is then measured honestly.
        fake = FakeTransport(lambda host: bytes(bytearray(stream)), fanout=args.fanout, latency_s=(0.02, 0.2),
                             hang_fraction=args.hang, seed=1)
        hung = {h for h in hosts if fake.hangs(h)}
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        collect(Targets(hosts=tuple(hosts), nodeset="bench"),
                CollectOptions(interval_s=0, timeout_s=args.timeout, fanout=args.fanout),
                Path(tmp) / "cap", transport=fake, load=False)
        wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        records = (Path(tmp) / "cap").glob("hosts/*/host.json")
        statuses = {p.parent.name: json.loads(p.read_text())["status"] for p in records}
        timed_out = {h for h, st in statuses.items() if st == HostStatus.TIMED_OUT}
        ok = sum(st == HostStatus.OK for st in statuses.values())
        size = sum(p.stat().st_size for p in (Path(tmp) / "cap").rglob("*") if p.is_file())
    items = stream.count(b"\n@@FC1 I ") + stream.startswith(b"@@FC1 I ")
    print(f"{args.hosts} hosts ({args.host}), fanout {args.fanout}, per-host timeout {args.timeout:g} s, "
          f"stream {len(stream) / 1024:.0f} KiB and about {items} items per host, {len(hung)} hosts hang")
    print(f"wall {wall:.2f} s; peak RSS {peak / 1024:.0f} MiB (before the run {rss_before / 1024:.0f} MiB), "
          f"largest worker process {workers_peak / 1024:.0f} MiB; capture directory {size / 2**20:.0f} MiB")
    print(f"ok {ok}, timed out {len(timed_out)}; every hung host reported timed out: {timed_out == hung}")


if __name__ == "__main__":
    main()
