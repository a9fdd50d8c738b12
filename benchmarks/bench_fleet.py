"""Fleet fan-out at scale over the CLI path: `fabricase collect --hosts gpu[0001-N] --json`, run in this process
(click's CliRunner) with the fake transport put in place of the ssh one, so that everything `collect` does is
measured: fan-out, stream parse and capture directory (worker processes, which also analyze each host as it is
written), loading the host records back, the fleet-wide analysis, the diagnosis and the JSON report. Each host
replays one recorded 8-GPU HGX host's stream (the golden host tree, captured once with the local transport),
latency 20-200 ms, and 1% of hosts hang past the per-host timeout.
Issue 18's targets on a 2-core machine: 1,024 hosts in 15 s or less and 1 GiB or less, 10,000 hosts in 4 GiB or
less, every hung host reported as timed out.

    python benchmarks/bench_fleet.py [--hosts 1024] [--fanout 128] [--timeout 10] [--hang 0.01] [--format 3]
                                     [--skip-analysis]

--skip-analysis replaces the command's analysis with an empty one (diagnose of no findings; the workers analyze
nothing), to measure the fan-out and capture path apart from the analysis (issue 18 item 2, measured by
bench_analysis.py).

Stand-ins, said plainly: the transport is FakeTransport (no ssh), injected by replacing
fabricase.pipeline.get_transport for this process; --format sets capture_write.WRITTEN_VERSION, the format
collect writes when not told. Peak RSS is this process's plus its largest child's (getrusage); peak open fds
are sampled every 20 ms over this process and its worker processes (/proc). The CPU seconds of this process and
of its workers, and the load average, are printed too: on a shared machine other work's load shows in the wall
time but not in the CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from click.testing import CliRunner  # noqa: E402

from fabricase import capture_write, native, pipeline  # noqa: E402
from fabricase.cli import capture_cmds, cli  # noqa: E402
from fabricase.collectors import select_collectors  # noqa: E402
from fabricase.collectors.plan import CapturePlan, compile_script  # noqa: E402
from fabricase.diagnosis import diagnose  # noqa: E402
from fabricase.models import HostStatus  # noqa: E402
from fabricase.pipeline import Analysis  # noqa: E402
from fabricase.targets import parse_nodeset  # noqa: E402
from fabricase.transports.fake import FakeTransport  # noqa: E402
from fabricase.transports.local import LocalTransport  # noqa: E402
from hosttrees.hosts import hgx_mlx5_host  # noqa: E402


def _fds(pid: int | str) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is pid (from /proc/*/stat: children forked by any of its threads)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2:].split()[1]) == pid:
                out.append(int(name))
    return out


class FdSampler:
    """The most descriptors open at once, this process and its worker processes together, sampled every 20 ms by a
    process of its own (the workers found every 0.5 s: a walk of /proc costs about 1 ms). Not a thread: a
    sampling thread would be a second thread in this process, and the analysis pool stays serial in a process that
    runs threads (fabricase.analysis.pool), so the benchmark would not measure what the CLI does."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self._peak, self._stop = ctx.Value("i", 0), ctx.Event()
        self._proc = ctx.Process(target=self._run, args=(os.getpid(),), daemon=True)

    def _run(self, parent: int) -> None:
        me, children, ticks = os.getpid(), [], 0
        while not self._stop.wait(0.02):
            if ticks % 25 == 0:  # a core's 5% if done every time
                children = [p for p in _children(parent) if p != me]
            ticks += 1
            total = _fds(parent) + sum(_fds(p) for p in children)
            if total > self._peak.value:
                self._peak.value = total

    def start(self) -> None:
        self._proc.start()

    def finish(self) -> int:
        self._stop.set()
        self._proc.join(timeout=5)
        return self._peak.value


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its ended worker processes."""
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, workers.ru_utime + workers.ru_stime


def _no_analysis(capture, placements) -> Analysis:
    """The analysis step left out: no findings, and the diagnosis of none (still the command's report)."""
    return Analysis([], diagnose([], hosts=capture.hosts, hardware={}, samples={}, placements=placements), {}, {})


def _hgx_stream(tmp: Path) -> bytes:
    plan = CapturePlan(collectors=tuple(select_collectors()), interval_s=0, root=str(hgx_mlx5_host(tmp / "root")))
    return LocalTransport().run_one("localhost", compile_script(plan), timeout_s=60).stdout


_LOOP = "import time; t = time.perf_counter(); [i for i in range(10**7)]; print(time.perf_counter() - t)"


def loop_seconds() -> float:
    """This machine's speed at pure Python now: a 10^7-step list comprehension, the best of 3, each in a process of
    its own (its 400 MB list must not count in this one's peak RSS; run after the peaks are read). A shared VM's
    speed varies twofold from hour to hour, so compare runs only with it."""
    return min(float(subprocess.run([sys.executable, "-c", _LOOP], capture_output=True, text=True,
                                    check=True).stdout) for _ in range(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--fanout", type=int, default=128)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--hang", type=float, default=0.01)
    ap.add_argument("--format", type=int, choices=(2, 3), default=3, help="capture format written")
    ap.add_argument("--skip-analysis", action="store_true", help="an empty analysis in place of the real one")
    args = ap.parse_args()
    if args.skip_analysis:
        capture_cmds.diagnose_for = _no_analysis
    capture_write.WRITTEN_VERSION = args.format
    with tempfile.TemporaryDirectory(prefix="fabricase-bench-fleet-") as tmp:
        stream = _hgx_stream(Path(tmp))
        hosts = parse_nodeset(f"gpu[00001-{args.hosts:05d}]")
        # A fresh copy per host, as real hosts' streams would be: in-flight memory is then measured honestly.
        fake = FakeTransport(lambda host: bytes(bytearray(stream)), fanout=args.fanout, latency_s=(0.02, 0.2),
                             hang_fraction=args.hang, seed=1)
        hung = {h for h in hosts if fake.hangs(h)}
        phases: dict[str, float] = {}
        real_collect, real_load = pipeline.collect, pipeline.load_capture

        def timed_collect(targets, opts, *a, **kw):
            if args.skip_analysis:  # the recording workers analyze each host too, unless told not to
                opts = dataclasses.replace(opts, analyze_hosts=False)
            t = time.perf_counter()
            try:
                return real_collect(targets, opts, *a, **kw)
            finally:
                phases["capture and load"] = time.perf_counter() - t

        def timed_load(*a, **kw):
            t = time.perf_counter()
            try:
                return real_load(*a, **kw)
            finally:
                phases["load"] = time.perf_counter() - t

        pipeline.get_transport = lambda *a, **kw: fake  # the stand-in for ssh
        pipeline.collect, pipeline.load_capture = timed_collect, timed_load
        out = Path(tmp) / "cap"
        argv = ["collect", "--hosts", f"gpu[00001-{args.hosts:05d}]", "--via", "ssh", "--interval", "0",
                "--timeout", f"{args.timeout:g}", "--fanout", str(args.fanout), "-o", str(out), "--json"]
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        cpu_before = _cpu()
        sampler = FdSampler()
        sampler.start()
        t0 = time.perf_counter()
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
        wall = time.perf_counter() - t0
        cpu_self, cpu_workers = (after - before for after, before in zip(_cpu(), cpu_before, strict=True))
        peak_fds = sampler.finish()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        loop = loop_seconds()  # after the peaks are read: its processes' 400 MB would be the largest child's
        doc = json.loads(result.stdout)
        statuses = {h["host"]: h["status"] for h in doc["hosts"]}
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        index_bytes = sum(p.stat().st_size for p in out.glob("hosts/*/index.*"))
    timed_out = {h for h, st in statuses.items() if st == HostStatus.TIMED_OUT}
    ok = sum(st == HostStatus.OK for st in statuses.values())
    items = stream.count(b"\n@@FC1 I ") + stream.startswith(b"@@FC1 I ")
    capture_s = phases.get("capture and load", float("nan"))
    load_s = phases.get("load", float("nan"))
    print(f"fabricase collect, {args.hosts} hosts (HGX replay), fanout {args.fanout}, per-host timeout "
          f"{args.timeout:g} s, capture format {args.format}; stream {len(stream) / 1024:.0f} KiB and about {items} "
          f"items per host; {len(hung)} hosts hang; exit code {result.exit_code}")
    analysis = "skipped" if args.skip_analysis else "with"
    also = "" if args.skip_analysis else " (the workers analyze each host too)"
    print(f"wall {wall:.2f} s: capture{also} {capture_s - load_s:.2f} s, load {load_s:.2f} s,")
    print(f"  fleet step and diagnosis ({analysis} analysis) + report {wall - capture_s:.2f} s; CPU "
          f"{cpu_self:.1f} s this process, {cpu_workers:.1f} s workers")
    print(f"  load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end, {os.cpu_count()} CPUs; "
          f"a 10^7-step loop took {loop:.2f} s after the run")
    print(f"  {native.describe()} (FABRICASE_NO_NATIVE=1 compares without it)")
    print(f"peak RSS {peak / 1024:.0f} MiB (before the run {rss_before / 1024:.0f} MiB) + largest worker "
          f"{workers_peak / 1024:.0f} MiB = {(peak + workers_peak) / 1024:.0f} MiB; peak open fds {peak_fds}")
    print(f"capture directory {size / 2**20:.0f} MiB, of which indexes {index_bytes / 2**20:.1f} MiB; "
          f"{len(doc.get('suspects', []))} suspects, {len(doc.get('findings', []))} findings")
    print(f"ok {ok}, timed out {len(timed_out)}; every hung host reported timed out: {timed_out == hung}")


if __name__ == "__main__":
    main()
