"""One GPU host's capture cost: the issue-3 budget (capture script CPU < 0.25 s, parse + normalize < 50 ms).

The host is the golden HGX tree (tests/hosttrees/hosts.py): 8 ConnectX-7 devices x 2 ports with their real
counter names, 8 RoCE netdevs with ethtool -S, PCIe, PFC/ECN, 8 H100 GPUs; command outputs are replayed by
stubs from real captured formats. Run by hand from the repository root:

    python benchmarks/bench_host.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from fabricase.analysis import ANALYZERS, analyze_host  # noqa: E402
from fabricase.capturedir import host_capture_from_stream, load_capture, write_capture_meta, write_host  # noqa: E402
from fabricase.collectors import select_collectors  # noqa: E402
from fabricase.collectors.framing import parse_stream  # noqa: E402
from fabricase.collectors.plan import CapturePlan, compile_script  # noqa: E402
from fabricase.models import HostStatus  # noqa: E402
from hosttrees.hosts import hgx_mlx5_host  # noqa: E402


def child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def use_binary_tools(root: Path, workdir: Path) -> bool:
    """Swap the shell stubs for one compiled replay binary (a real tool is one process, not sh + cat)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return False
    binary = workdir / "replay_tool"
    subprocess.run([cc, "-O2", "-o", str(binary), str(Path(__file__).with_name("replay_tool.c"))], check=True)
    for stub in (root / ".fabricase" / "bin").iterdir():
        stub.unlink()
        os.link(binary, stub)
    return True


def run_cpu(script: str, repeat: int) -> tuple[list[float], bytes]:
    cpu, out = [], b""
    for _ in range(repeat):
        c0 = child_cpu()
        out = subprocess.run(["sh", "-s"], input=script.encode(), capture_output=True, check=True).stdout
        cpu.append(child_cpu() - c0)
    return cpu, out


def ms(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1000:7.1f} ms  (min {min(xs) * 1000:.1f}, max {max(xs) * 1000:.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = hgx_mlx5_host(Path(tmp) / "root", degraded=True, ports=2)
        # The stubs replaying command outputs cost processes a real host would not spend on `cat`: measure
        # them alone (same commands, outputs to /dev/null) to report the script's own share too.
        plan = CapturePlan(collectors=tuple(select_collectors()), interval_s=0, root=str(root))
        script = compile_script(plan)
        cpu, _ = run_cpu(script, args.repeat)
        binary = use_binary_tools(root, Path(tmp))
        cpu_bin, out = run_cpu(script, args.repeat) if binary else ([], b"")
        parse, load, normalize, rules = [], [], [], []
        for n in range(args.repeat):
            t0 = time.perf_counter()
            stream = parse_stream(out)
            hc = host_capture_from_stream("gpu001", stream, plan)
            parse.append(time.perf_counter() - t0)
            hc.status, hc.transport = HostStatus.OK, "local"
            cap_dir = Path(tmp) / f"cap{n}"
            cap_dir.mkdir()
            write_capture_meta(cap_dir, plan=plan, targets={}, hosts=["gpu001"], created_at="2026-01-01T00:00:00Z")
            write_host(cap_dir, hc, out)
            t0 = time.perf_counter()
            hc = load_capture(cap_dir, verify=False).hosts[0]
            load.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            samples = [s for a in ANALYZERS for s in a.samples(hc)]
            normalize.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            findings = analyze_host(hc)
            rules.append(time.perf_counter() - t0)
        stubs = sum(1 for _ in (root / ".fabricase" / "out").rglob("*") if _.is_file())
        counter_files = sum(1 for it in stream.items if it.kind == "file" and it.snapshot == 0)
    print(f"host: {counter_files} files, {len(stream.items)} stream items, {stubs} recorded command outputs, "
          f"{len(samples)} metric samples, {len(findings)} findings; runs: {args.repeat}")
    print(f"capture script CPU (sh + children, shell replay stubs): {ms(cpu)}")
    if cpu_bin:
        print(f"capture script CPU (tools replayed by one binary each):  {ms(cpu_bin)}")
    print(f"parse stream into items:                              {ms(parse)}")
    print(f"load capture directory (index, no sha256 check):      {ms(load)}")
    print(f"normalize (every domain's metric samples):            {ms(normalize)}")
    print(f"analyze host (samples again + all rules):             {ms(rules)}")


if __name__ == "__main__":
    main()
