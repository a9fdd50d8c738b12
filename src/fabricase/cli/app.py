"""The command group, its error handling and the options commands share.

Exit codes: 0 success, 1 a fabricase error (one line on stderr), 2 a usage error, 3 a capture that
completed with some hosts not captured, 130 interrupted. Tracebacks only with --debug or FABRICASE_DEBUG=1.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from fabricase import __version__
from fabricase.cli.options import bounded
from fabricase.cli.output import echo_line, err_console, inert, inert_lines
from fabricase.config import Paths, resolve_paths
from fabricase.errors import CaptureInterrupted, FabricaseError, TargetError
from fabricase.models import Capture
from fabricase.trace import LOG

EXIT_PARTIAL = 3


class _Failure(click.ClickException):
    """A one-line error and exit 1 (click's own UsageError keeps exit 2). The message may quote data (an
    internal error's text can hold anything): it is printed inert."""

    def show(self, file: Any = None) -> None:
        echo_line(f"fabricase: error: {self.format_message()}", err=True)


def _debug_on(ctx: click.Context | None) -> bool:
    if os.environ.get("FABRICASE_DEBUG", "") not in ("", "0"):
        return True
    while ctx is not None:
        if ctx.obj and ctx.obj.get("debug"):
            return True
        ctx = ctx.parent
    return False


# Each command and the module that defines it, imported when the command is asked for: the analysis, numpy and
# the SDKs' imports cost about 0.7 s, which `fabricase list` or `fabricase providers` need not pay. `fabricase
# --help` lists every command, and so imports them all. tests/cli/test_lazy_commands.py checks this against what
# the modules define.
COMMANDS = {
    "analyze": "capture_cmds", "bundle": "capture_cmds", "collect": "capture_cmds", "draft": "capture_cmds",
    "join": "capture_cmds", "open": "capture_cmds", "verify": "capture_cmds",
    "attach": "track_cmds", "comment": "track_cmds", "list": "track_cmds", "reopen": "track_cmds",
    "resolve": "track_cmds", "retry": "track_cmds", "show": "track_cmds", "sync": "track_cmds",
    "export": "metrics_cmds", "watch": "metrics_cmds",
    "probe": "probe_cmd", "providers": "provider_cmds", "relay": "relay_cmd", "report-faulty": "faulty_cmd",
}  # fmt: skip


class FabricaseGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(f"fabricase.cli.{COMMANDS[cmd_name]}")  # its decorators add it to the group
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CaptureInterrupted as exc:
            echo_line(f"fabricase: {exc}", err=True)
            ctx.exit(130)
        except FabricaseError as exc:
            if _debug_on(ctx):
                raise
            raise _Failure(str(exc)) from exc
        except click.ClickException as exc:  # a usage error may quote what was given: click prints it inert too
            exc.message = inert_lines(exc.message)  # a group run without its subcommand: its help, line by line
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("fabricase: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:  # a bug: say so in one line unless debugging
            if _debug_on(ctx):
                raise
            raise _Failure(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                           "traceback)") from exc


class _TraceLine(logging.Handler):
    """The --debug trace (fabricase.trace) on stderr, a line each, inert (a host or file name is data)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            echo_line(f"fabricase: debug: {record.getMessage()}", err=True)
        except Exception:  # noqa: BLE001 - a trace line must never fail the command
            self.handleError(record)


def _trace(on: bool) -> None:
    """The trace's handler attached for this invocation, or detached (a second invocation in one process, as in
    tests or a library caller's, traces only when it too is asked to)."""
    from fabricase import native

    ours = [h for h in LOG.handlers if isinstance(h, _TraceLine)]
    if not on:
        for handler in ours:
            LOG.removeHandler(handler)
        return
    if not ours:
        LOG.addHandler(_TraceLine())
    LOG.setLevel(logging.DEBUG)
    LOG.debug("fabricase %s, Python %s; %s", __version__, sys.version.split()[0], native.describe())


def paths() -> Paths:
    """The data directories, created on first use (an unwritable FABRICASE_HOME fails here, in one line)."""
    return resolve_paths().ensure()




json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")


def target_options(f):
    f = click.option("--via", type=click.Choice(["local", "ssh", "slurm", "k8s"]), default=None,
                     help="How to reach the hosts (default: local for this machine; k8s for --k8s-nodes and "
                          "--k8s-job).")(f)
    f = click.option("--replay", metavar="DIR", default=None,
                     help="Use a capture directory (or unpacked bundle) instead of live hosts.")(f)
    f = click.option("--job", metavar="ID", default=None,
                     help="The nodes of a Slurm job (captured with srun while it runs, over ssh after).")(f)
    f = click.option("--hosts", "hosts", metavar="NODESET", default=None,
                     help="Hosts to capture, e.g. 'gpu[001-064]' or 'localhost'.")(f)
    f = click.option("--k8s-nodes", metavar="SELECTOR", default=None,
                     help="Kubernetes nodes matching this label selector, e.g. 'nvidia.com/gpu.present=true' "
                          "(implies --via k8s).")(f)
    f = click.option("--k8s-job", metavar="NAMESPACE/KIND/NAME", default=None,
                     help="The nodes under a PyTorchJob, MPIJob, JobSet or Job's pods (implies --via k8s).")(f)
    f = click.option("--kubeconfig", metavar="FILE", default=None,
                     help="Kubeconfig for --via k8s (default: KUBECONFIG, ~/.kube/config, in-cluster).")(f)
    f = click.option("--context", "k8s_context", metavar="NAME", default=None,
                     help="Kubeconfig context (default: the current one).")(f)
    f = click.option("--k8s-namespace", default="fabricase", show_default=True,
                     help="Namespace of the fabricase-node DaemonSet (deploy/kubernetes/).")(f)
    f = click.option("--k8s-debug-pods", is_flag=True,
                     help="Enter nodes without a DaemonSet pod through a privileged pod, as "
                          "'kubectl debug node/N --profile=sysadmin' does (creates and deletes pods).")(f)
    f = click.option("--k8s-debug-image", metavar="IMAGE", default=None,
                     help="Image of those debug pods; needs sh and nsenter (default: busybox).")(f)
    f = click.option("--interval", **bounded("--interval", "Seconds between the two counter snapshots."),
                     default=3.0, show_default=True)(f)
    f = click.option("--since", "since_h", **bounded("--since", "How many hours of kernel log to keep."),
                     default=24.0, show_default=True)(f)
    f = click.option("--timeout", **bounded("--timeout", "Per-host capture time limit in seconds (default: derived "
                                                        "from the collectors)."), default=None)(f)
    f = click.option("--collector", "collectors", multiple=True,
                     help="Run only this collector (repeatable).")(f)
    f = click.option("--fanout", **bounded("--fanout", "Hosts captured at once."), default=64, show_default=True)(f)
    f = click.option("--deadline", **bounded("--deadline", "Overall limit in seconds; hosts not started by then are "
                                                          "recorded as timed out."), default=None)(f)
    f = click.option("--ssh-option", "ssh_options", multiple=True, metavar="OPT",
                     help="An ssh option: 'KEY=VALUE' (as -o KEY=VALUE, e.g. 'ProxyJump=bastion'), or "
                          "'-F FILE', '-i KEY', '-J HOST', '-p PORT' passed as given (repeatable).")(f)
    f = click.option("--user", default=None, help="Remote user for ssh (default: your ssh config).")(f)
    f = click.option("--gateway", "gateways", multiple=True, metavar="HOST",
                     help="Tree mode: split the hosts among these gateways, each running `fabricase relay` "
                          "(repeatable).")(f)
    f = click.option("--gateway-command", default="fabricase", show_default=True,
                     help="How to start fabricase on the gateways.")(f)
    f = click.option("--perf", is_flag=True,
                     help="Also run perf tests (nccl-tests, ib_write_bw loopback) where installed; loads the host.")(f)
    f = click.option("--nccl-log", "nccl_logs", multiple=True, metavar="GLOB",
                     help="A job's NCCL_DEBUG=INFO output to attribute errors to hosts and NICs (repeatable).")(f)
    f = click.option("--root", "root", default="", hidden=True,
                     help="Read host files under this folder instead of / (golden host trees, tests).")(f)
    return f


def capture_from_targets(target: dict[str, Any], out_dir: Path | None, quiet: bool,
                         analyze_hosts: bool = True) -> Capture:
    """Live capture (or replay) from the options `target_options` added, given as one dict. `analyze_hosts`: each
    host is analyzed as it is recorded, for the diagnosis that follows (False when the capture is changed before
    it is diagnosed: the probe adds its items)."""
    from fabricase.pipeline import CollectOptions, collect
    from fabricase.targets import resolve_targets
    from fabricase.transports.replay import load_replay

    k8s_given = target.get("k8s_nodes") is not None or target.get("k8s_job") is not None
    if k8s_given and target["via"] not in (None, "k8s"):
        raise TargetError(f"--k8s-nodes and --k8s-job capture through Kubernetes; drop --via {target['via']}",
                          where="--via")
    targets = resolve_targets(target["hosts"], target["job"], target["replay"], k8s_nodes=target.get("k8s_nodes"),
                              k8s_job=target.get("k8s_job"), kubeconfig=target.get("kubeconfig"),
                              context=target.get("k8s_context"))
    if targets.replay is not None:
        if target["nccl_logs"]:
            raise TargetError("--nccl-log is copied into a new capture; it cannot be added to a replay",
                              where="--nccl-log")
        return load_replay(targets.replay)
    opts = CollectOptions(via="k8s" if k8s_given else target["via"], interval_s=target["interval"],
                          since_s=max(1, round(target["since_h"] * 3600)),
                          timeout_s=target["timeout"], collectors=tuple(target["collectors"]), root=target["root"],
                          nccl_logs=tuple(target["nccl_logs"]), perf=target["perf"], fanout=target["fanout"],
                          deadline_s=target["deadline"], ssh_options=tuple(target["ssh_options"]),
                          user=target["user"], gateways=tuple(target["gateways"]),
                          gateway_command=target["gateway_command"], kubeconfig=target.get("kubeconfig"),
                          k8s_context=target.get("k8s_context"),
                          k8s_namespace=target.get("k8s_namespace") or "fabricase",
                          k8s_debug_pods=bool(target.get("k8s_debug_pods")),
                          k8s_debug_image=target.get("k8s_debug_image"), analyze_hosts=analyze_hosts)
    if out_dir is None:
        from fabricase.capturedir import new_capture_dir

        label = f"job-{targets.job}" if targets.job else (
            "k8s-" + targets.k8s["job"].rsplit("/", 1)[-1] if targets.k8s and "job" in targets.k8s
            else targets.nodeset or "capture")
        out_dir = new_capture_dir(paths().captures, label)
    counts = {"ok": 0, "failed": 0}
    slowest: list = [0.0, ""]
    with progress_bar(len(targets.hosts), quiet) as (progress, task):
        def on_host(run):
            counts["ok" if run.status == "ok" else "failed"] += 1
            took = _seconds_between(run.started_at, run.finished_at)
            if took is not None and took > slowest[0]:
                slowest[:] = [took, run.host]
            slow = f"; slowest {slowest[1]} {slowest[0]:.1f}s" if slowest[1] else ""
            progress.update(task, advance=1, description=inert(f"capturing: {counts['ok']} ok, "
                                                               f"{counts['failed']} failed{slow}"))

        return collect(targets, opts, out_dir, on_host=on_host)


def _seconds_between(start: str | None, end: str | None) -> float | None:
    from datetime import datetime

    try:
        return (datetime.fromisoformat(end.replace("Z", "+00:00"))
                - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    except (AttributeError, ValueError):
        return None


class progress_bar:
    """A progress bar on stderr for a fan-out; silent when quiet or not a terminal."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=err_console, transient=True,
                                 disable=quiet or not err_console.is_terminal)
        self.total = total

    def __enter__(self):
        self.progress.start()
        task = self.progress.add_task("capturing", total=self.total)
        return self.progress, task

    def __exit__(self, *exc) -> None:
        self.progress.stop()


@click.group(cls=FabricaseGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True,
              help="Show tracebacks, and trace on stderr the decisions made (processes, transport, C extension); "
                   "also FABRICASE_DEBUG=1.")
@click.version_option(__version__, prog_name="fabricase")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Find the degraded link, NIC or NVLink in a GPU training fabric, bundle the evidence, and file and
    track the provider ticket."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    _trace(debug or _debug_on(None))
