"""`fabricase probe`: active tests across hosts (pairwise RDMA bandwidth, iperf3, nccl-tests with bisection, dcgmi
diag) for faults that leave the counters clean; and the options `open --probe` shares with it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import click

from fabricase.cli.app import EXIT_PARTIAL, capture_from_targets, cli, paths, progress_bar, target_options
from fabricase.cli.options import Duration, bounded
from fabricase.cli.output import echo_line, emit_json, hosts_json, inert, out_console, print_hosts
from fabricase.errors import TargetError

__all__ = ["exec_for", "print_probe", "probe_options", "probe_options_from", "run_probe_on", "split_probe_values"]

PRE_CAPTURE = ("identity", "rdma", "netdev")  # what the probe reads first: rails, port rates, GID tables
GPU_CAPTURE = ("nvidia",)  # and for nccl-tests or dcgmi: the GPUs' count and model (the busbw baseline)


def print_probe(capture) -> None:
    """The probe's lines (verdict, counts, bisection table) when the capture holds one; each line inert."""
    from fabricase.analysis.probe_text import probe_text

    for line in probe_text(capture, width=80):
        echo_line(line)


def _sizes(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from fabricase.parsers.nccl_tests import parse_size

    low, sep, high = str(value).partition(":")
    if not sep or parse_size(low) is None or parse_size(high) is None or parse_size(low) > parse_size(high):
        raise click.BadParameter(f"{inert(value)!r} is not MIN:MAX with MIN <= MAX, e.g. 1M:8G")
    return value


def probe_options(f):
    """The probe's options (on `probe`, and on `open` for --probe)."""
    from fabricase.probe.run import RDMA_TOOLS, STAGE_NAMES

    opts = [
        click.option("--test", "tests", multiple=True, type=click.Choice(STAGE_NAMES),
                     help="Which tests to run (repeatable; default rdma and nccl): rdma = ib_write_bw between host "
                          "pairs, tcp = iperf3 pairs, nccl = all_reduce_perf across the hosts (bisected when "
                          "slow), gpu = dcgmi diag."),
        click.option("--rdma-tool", "rdma_tools", multiple=True, type=click.Choice(RDMA_TOOLS),
                     help="perftest tool for the rdma pairs (repeatable; default ib_write_bw)."),
        click.option("--rdma-device", "devices", multiple=True, metavar="DEV",
                     help="RDMA device to test, one rail each, the same name on every host (repeatable; default: "
                          "every rail the capture found, NIC i to NIC i)."),
        click.option("--ib-port", **bounded("--ib-port", "RDMA port number (default: from the capture, else 1)."),
                     default=None),
        click.option("--gid-index", **bounded("--gid-index", "RoCE GID index for ib_*_bw -x (default: the RoCE v2 "
                                                             "IPv4 GID from the capture)."), default=None),
        click.option("--qps", **bounded("--qps", "Queue pairs per perftest run (default: perftest's)."),
                     default=None),
        click.option("--duration", **bounded("--duration", "Seconds each bandwidth test runs."), default=5,
                     show_default=True),
        click.option("--nccl-sizes", default="1M:8G", show_default=True, metavar="MIN:MAX", callback=_sizes,
                     help="nccl-tests message sizes (-b MIN -e MAX)."),
        click.option("--nccl-iters", **bounded("--nccl-iters", "nccl-tests iterations per size (-n)."), default=20,
                     show_default=True),
        click.option("--gpus-per-host", **bounded("--gpus-per-host", "GPUs per host for nccl-tests -g (default: "
                                                                     "from the capture, else 1)."), default=None),
        click.option("--expect-gbps", **bounded("--expect-gbps", "Port rate a pair is held against (passes at 90%; "
                                                                 "default: the capture's port rate)."), default=None),
        click.option("--expect-tcp-gbps", **bounded("--expect-tcp-gbps", "Rate an iperf3 pair is held against "
                                                                         "(default: the pairs' median)."),
                     default=None),
        click.option("--expect-busbw", **bounded("--expect-busbw", "Expected all_reduce busbw (passes at 90%; "
                                                                   "see docs/perf-and-nccl.md)."), default=None),
        click.option("--bisect", is_flag=True,
                     help="Bisect the hosts with nccl-tests even when no expected busbw is known or it is met."),
        click.option("--dcgm-level", type=click.Choice(["1", "2"]), default="1", show_default=True,
                     help="dcgmi diag -r level for --test gpu."),
        click.option("--budget", type=Duration(1, 86400), default="10m", show_default=True,
                     help="Time for the whole probe (90s, 10m, 2h); tests not started by then are skipped. "
                          f"[{Duration(1, 86400).describe()}]"),
        click.option("--test-timeout", **bounded("--test-timeout", "Limit of one test."), default=120.0,
                     show_default=True),
        click.option("--per-switch", **bounded("--per-switch", "At most this many tests at once under one switch "
                                                               "(with placements)."), default=None),
        click.option("--tools-path", metavar="DIR", default=None,
                     help="Put DIR first on PATH on the hosts (where perftest or nccl-tests are installed)."),
    ]
    for option in reversed(opts):
        f = option(f)
    return f


def probe_options_from(values: dict[str, Any], switch_of: dict[str, str] | None = None):
    """ProbeOptions from the click values probe_options added."""
    from fabricase.probe.run import ProbeOptions

    low, _, high = str(values["nccl_sizes"]).partition(":")  # checked by _sizes when parsed
    return ProbeOptions(
        stages=tuple(values["tests"]) or ("rdma", "nccl"), rdma_tools=tuple(values["rdma_tools"]) or ("ib_write_bw",),
        devices=tuple(values["devices"]), ib_port=values["ib_port"], gid_index=values["gid_index"],
        qps=values["qps"], duration_s=values["duration"], nccl_min_bytes=low, nccl_max_bytes=high,
        nccl_iters=values["nccl_iters"], nccl_warmup=min(5, values["nccl_iters"]),
        gpus_per_host=values["gpus_per_host"], expect_pair_gbps=values["expect_gbps"],
        expect_tcp_gbps=values["expect_tcp_gbps"], expect_busbw=values["expect_busbw"], bisect=values["bisect"],
        dcgm_level=int(values["dcgm_level"]), budget_s=values["budget"], test_timeout_s=values["test_timeout"],
        per_switch=values["per_switch"], switch_of=dict(switch_of or {}))


_PROBE_KEYS = ("tests", "rdma_tools", "devices", "ib_port", "gid_index", "qps", "duration", "nccl_sizes", "nccl_iters",
               "gpus_per_host", "expect_gbps", "expect_tcp_gbps", "expect_busbw", "bisect", "dcgm_level", "budget",
               "test_timeout", "per_switch", "tools_path")


def split_probe_values(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(probe option values, the rest) of a command's keyword arguments."""
    probe = {k: values.pop(k) for k in _PROBE_KEYS if k in values}
    return probe, values


def exec_for(capture, target: dict[str, Any], tools_path: str | None):
    """How the probe reaches the captured hosts: the capture's own transport (ssh, or srun inside the job)."""
    from fabricase.probe.exec import LocalExec, SshExec

    if target.get("gateways"):
        raise TargetError("the probe runs from here to every host; it does not go through --gateway",
                          where="--gateway")
    via = {h.transport for h in capture.hosts if h.transport} or {"local"}
    name = target.get("via") or (via.pop() if len(via) == 1 else "ssh")
    if name == "slurm":
        from fabricase.probe.srun import SrunExec, allocation_job, probe_nodes
        from fabricase.slurm import resolve_job

        job_id = target.get("job") or (capture.targets or {}).get("job") or allocation_job()
        if not job_id:
            raise TargetError("a probe over Slurm runs inside your job: give --job ID", where="--via")
        job = resolve_job(str(job_id))
        probe_nodes(job, [h.host for h in capture.hosts])
        return SrunExec(job, tools_path=tools_path)
    if name == "ssh":
        return SshExec(ssh_options=tuple(target.get("ssh_options") or ()), user=target.get("user"),
                       tools_path=tools_path)
    return LocalExec(tools_path=tools_path)


def run_probe_on(capture, target: dict[str, Any], values: dict[str, Any], *, quiet: bool):
    """Run the probe over a fresh capture's hosts, with a progress line; returns (ProbeDoc, the capture reloaded
    with the probe's items)."""
    from fabricase.capturedir import load_capture
    from fabricase.placements import resolve_placements, topology_of
    from fabricase.probe.run import run_probe

    hosts = [h for h in capture.hosts if str(h.status) in ("ok", "partial")]
    if len(hosts) < 2 and set(values.get("tests") or ("rdma", "nccl")) - {"gpu"}:
        raise TargetError(f"a probe between hosts needs at least 2 captured hosts (got {len(hosts)})", where="--hosts")
    placements, _ = resolve_placements(capture, None, paths())
    switch_of = {host: parts[-1] for host, parts in topology_of(placements).items() if parts}  # innermost
    opts = probe_options_from(values, switch_of)
    exec_ = exec_for(capture, target, values.get("tools_path"))
    counts = {"ok": 0, "other": 0}
    stop = threading.Event()
    with progress_bar(0, quiet) as (progress, task):
        progress.update(task, total=None, description="probing")

        def on_result(result) -> None:
            counts["ok" if result.status == "ok" else "other"] += 1
            progress.update(task, advance=1, description=inert(
                f"probing: round {result.test.round}, {counts['ok']} tests ok, {counts['other']} not"))

        doc = run_probe(capture, exec_, opts, on_result=on_result, stop=stop)
    return doc, load_capture(capture.root)


@cli.command()
@target_options
@probe_options
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Capture directory to create (default: a new folder under the data directory).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def probe(out_dir, as_json, **values):
    """Run active tests across the hosts and name the slow host, NIC or path that the counters miss.

    First a short capture (identity, RDMA ports, netdevs, GPUs: rails, port rates, GID tables, the busbw
    baseline of 8 GPUs a host), then, round by round:
    ib_write_bw between host pairs (each host with two partners, both directions, NIC i to NIC i), nccl-tests
    across the hosts and, when it falls short, a bisection down to the slow host. Every output is stored in the
    capture with the plan (probe.json), so `analyze`, `report` and `open --replay` read it again. Loads the
    hosts' NICs and GPUs: run it on your own nodes (inside your Slurm job with --job)."""
    from fabricase.cli.capture_cmds import diagnose_for, placements_for
    from fabricase.cli.screen import diagnosis_json, print_diagnosis

    probe_values, target = split_probe_values(values)
    if target["replay"]:
        raise click.UsageError("probe runs tests on live hosts; analyze a stored probe with `fabricase analyze DIR`")
    if not target["collectors"]:
        gpu = {"nccl", "gpu"} & set(probe_values.get("tests") or ("rdma", "nccl"))
        target["collectors"] = PRE_CAPTURE + (GPU_CAPTURE if gpu else ())
    capture = capture_from_targets(target, out_dir, quiet=as_json, analyze_hosts=False)
    doc, capture = run_probe_on(capture, target, probe_values, quiet=as_json)
    placements, _ = placements_for(capture, str(capture.root), None)
    analysis = diagnose_for(capture, placements)
    if as_json:
        emit_json({"capture_dir": str(capture.root), "hosts": hosts_json(capture), "probe": doc.to_dict(),
                   "findings": [f.to_dict() for f in analysis.findings], **diagnosis_json(analysis.diagnosis)})
    else:
        print_hosts(capture)
        print_probe(capture)
        print_diagnosis(analysis.diagnosis, analysis.findings, show_findings=False)
        out_console.print(f"Capture     {capture.root}", soft_wrap=True)
    if (doc.stopped_reason or "").startswith("interrupted"):
        raise click.exceptions.Exit(130)
    if not any(r.status == "ok" for r in doc.results):
        raise click.exceptions.Exit(1)
    if doc.interrupted or any(r.status != "ok" for r in doc.results):
        raise click.exceptions.Exit(EXIT_PARTIAL)
