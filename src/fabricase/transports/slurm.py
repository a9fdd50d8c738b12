"""Run the capture on a running Slurm job's nodes: ONE `srun` step across them, one task per node.

    srun --jobid=<id> --overlap -N <n> --ntasks=<n> --ntasks-per-node=1 -w <nodelist> --kill-on-bad-exit=0
         --time=<minutes> --input=none --job-name=fabricase-capture sh -c <wrapper> fabricase <run dir>

`--overlap` lets the step share the CPUs, memory and GPUs (GRES) of the steps the job is running, so it starts
at once next to the training step instead of waiting for it. The step gets all of the job's GRES by default,
so the GPUs are visible to nvidia-smi inside it.

Per-node output is kept apart by the wrapper, not by srun's `%N` pattern (that is the host's short name, which
need not be the Slurm node name, and is the same for every slurmd on one host): on each node it runs
`sh <run dir>/capture.sh` with stdout to `<run dir>/<SLURMD_NODENAME>.out` (the framed stream, byte for
byte), stderr to `.err`, and writes the exit status to `.rc` when the script ends. The run dir is created
here with mode 0700 (under $FABRICASE_SLURM_DIR, else the current directory, else $TMPDIR) and removed
afterwards; it must be on a file system shared with the nodes (home or project space on a real cluster),
as `srun --output=%N` files would also be. A node that cannot see it says so in its reason.

A node is done when its `.rc` appears (on_done is called then, so progress is live). When the time limit is
reached, srun is sent SIGTERM (it cancels the step; the job itself keeps running), and every node without
an `.rc` is timed out with what it wrote so far. `--time` is a backstop one minute past our own limit.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricase.errors import TransportError
from fabricase.models import HostStatus
from fabricase.slurm import SlurmJob, resolve_job, slurm_env
from fabricase.transports.base import HostRun, Transport

__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "SlurmTransport", "srun_argv", "srun_reason", "step_minutes",
           "unfinished_node"]

DEFAULT_MAX_OUTPUT_BYTES = 256 << 20  # per node; what is over is cut off and the node is partial
STEP_NAME = "fabricase-capture"
BACKOFF_NODES = 1024  # from this many nodes still running, the run directory is listed less often while idle

# Runs on every node as `sh -c WRAPPER fabricase <run dir>`. The script reads nothing from stdin.
WRAPPER = r"""umask 077
n=${SLURMD_NODENAME:-$(hostname -s)}; d=$1
if [ ! -f "$d/capture.sh" ]; then
  echo "fabricase: $n: cannot see $d/capture.sh (the folder must be on a file system shared with the nodes)" >&2
  exit 0
fi
sh "$d/capture.sh" >"$d/$n.out" 2>"$d/$n.err" </dev/null
echo $? >"$d/$n.rc.tmp" && mv -f "$d/$n.rc.tmp" "$d/$n.rc"
exit 0
"""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def step_minutes(limit_s: float) -> int:
    """srun --time for the step: our own limit rounded up, plus a minute, so our timeout fires first."""
    return max(1, math.ceil(limit_s / 60)) + 1


def srun_argv(job: SlurmJob, nodes: list[str], run_dir: Path, limit_s: float, srun: str = "srun") -> list[str]:
    from ClusterShell.NodeSet import NodeSet

    nodelist = str(NodeSet.fromlist(nodes))
    het = [f"--het-group={job.het_group}"] if job.het_group is not None else []
    n = len(nodes)
    return [srun, f"--jobid={job.srun_job_id or job.job_id}", *het, "--overlap", "-N", str(n), f"--ntasks={n}",
            "--ntasks-per-node=1", "-w", nodelist, "--kill-on-bad-exit=0", f"--time={step_minutes(limit_s)}",
            "--input=none", f"--job-name={STEP_NAME}", "sh", "-c", WRAPPER, "fabricase", str(run_dir)]


def srun_reason(node: str, srun_err: str, srun_rc: int | None) -> str:
    """The line of srun's stderr that explains a node's failure: one naming the node, else srun's last error."""
    lines = [ln.strip() for ln in srun_err.splitlines() if ln.strip()]
    about = [ln for ln in lines if f"{node}:" in ln or f" {node} " in f" {ln} "]
    errors = [ln for ln in lines if "error" in ln.lower()]
    pick = (about or errors or lines or [None])[-1]
    if pick is None:
        return f"srun exited {srun_rc}" if srun_rc is not None else "srun gave no reason"
    return pick[:200]


def unfinished_node(node: str, *, wrote: bool, timed_out: bool, interrupted: bool, limit_s: float,
                    srun_rc: int | None, srun_err: str) -> tuple[HostStatus, str]:
    """Status and reason of a node that never reported its exit status."""
    if interrupted:
        return HostStatus.FAILED, "interrupted"
    if timed_out:
        return HostStatus.TIMED_OUT, f"capture did not finish within {limit_s:g}s on {node}"
    why = srun_reason(node, srun_err, srun_rc)
    if wrote:
        return HostStatus.PARTIAL, f"capture on {node} stopped before it finished ({why})"
    return HostStatus.FAILED, f"no output from {node} ({why})"


def _script_failure(node: str, rc: int, err: bytes) -> str:
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return f"capture script exited {rc} on {node}" + (f": {lines[-1][:200]}" if lines else "")


def _read_capped(path: Path, cap: int | None) -> tuple[bytes, bool]:
    """The file's bytes (at most cap) and whether there was more; b"" when it is missing."""
    try:
        with path.open("rb") as fh:
            data = fh.read(cap + 1) if cap is not None else fh.read()
    except OSError:
        return b"", False
    if cap is not None and len(data) > cap:
        return data[:cap], True
    return data, False


class SlurmTransport(Transport):
    name = "slurm"

    def __init__(self, job: SlurmJob, srun: str = "srun", *, workdir: str | os.PathLike | None = None,
                 deadline_s: float | None = None, max_output_bytes: int | None = DEFAULT_MAX_OUTPUT_BYTES,
                 poll_s: float = 0.2, kill_grace_s: float = 10.0) -> None:
        self.job = job
        self.srun = srun
        self.workdir = workdir
        self.deadline_s = deadline_s
        self.max_output_bytes = max_output_bytes
        self.poll_s = poll_s
        self.kill_grace_s = kill_grace_s

    @classmethod
    def from_options(cls, *, job: SlurmJob | str | None = None, srun: str = "srun",
                     deadline_s: float | None = None, **_ignored: Any) -> SlurmTransport:
        """`job` is the resolved job (or its id); fanout does not apply: Slurm fans the step out itself."""
        if job is None:
            raise TransportError("--via slurm needs --job ID: the running job whose nodes to capture")
        if isinstance(job, str):
            job = resolve_job(job)
        return cls(job, srun, deadline_s=deadline_s)

    # -- the step ---------------------------------------------------------------------------------------

    def _check_job(self) -> None:
        job = self.job
        if job.ended:
            raise TransportError(f"job {job.job_id} has ended ({job.state}); capture its nodes with --via ssh",
                                 where="--via slurm")
        if not job.running:
            raise TransportError(f"job {job.job_id} is {job.state}, not RUNNING: srun cannot start a step in it",
                                 where="--via slurm")

    def _make_run_dir(self) -> Path:
        bases = [self.workdir] if self.workdir else [os.environ.get("FABRICASE_SLURM_DIR") or os.getcwd()]
        if not self.workdir and not os.environ.get("FABRICASE_SLURM_DIR"):
            bases.append(tempfile.gettempdir())
        problems = []
        for base in bases:
            try:
                return Path(tempfile.mkdtemp(prefix=".fabricase-slurm-", dir=base))  # mode 0700
            except OSError as exc:
                problems.append(f"{base}: {exc.strerror}")
        raise TransportError("cannot create the srun work folder (" + "; ".join(problems) + "); set "
                             "FABRICASE_SLURM_DIR to a folder shared with the job's nodes", where="--via slurm")

    def run(self, hosts: list[str], script: str, *, timeout_s: float,
            on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
        self._check_job()
        srun = shutil.which(self.srun)
        if srun is None:
            raise TransportError(f"Slurm is not installed here (no {self.srun} on PATH)", where="--via slurm")
        limit = min(timeout_s, self.deadline_s) if self.deadline_s else timeout_s
        results: dict[str, HostRun] = {}

        def finish(run: HostRun) -> None:
            results[run.host] = run
            if on_done:
                on_done(run)

        in_job = set(self.job.nodes)
        members = list(dict.fromkeys(h for h in hosts if h in in_job))
        for host in dict.fromkeys(h for h in hosts if h not in in_job):
            finish(HostRun(host, HostStatus.FAILED, reason=f"{host} is not a node of job {self.job.job_id} "
                                                            f"({self.job.nodelist})", started_at=_now(),
                           finished_at=_now()))
        if members:
            run_dir = self._make_run_dir()
            try:
                self._step(srun, members, script, run_dir, limit, finish)
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
        return [results[h] for h in hosts]

    def _step(self, srun: str, nodes: list[str], script: str, run_dir: Path, limit: float,
              finish: Callable[[HostRun], None]) -> None:
        (run_dir / "capture.sh").write_text(script)
        argv = srun_argv(self.job, nodes, run_dir, limit, srun)
        started = _now()
        with (run_dir / "srun.out").open("wb") as so, (run_dir / "srun.err").open("wb") as se:
            try:
                # Its own session: Ctrl-C reaches us, and we stop srun ourselves (one SIGINT only makes srun
                # print its status).
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=so, stderr=se, env=slurm_env(),
                                        start_new_session=True)
            except OSError as exc:
                raise TransportError(f"cannot start {srun}: {exc.strerror}", where="--via slurm") from exc
        pending = dict.fromkeys(nodes)  # in node order; O(1) to drop a node that reported
        t0 = time.monotonic()
        timed_out = interrupted = False
        idle = 0
        try:
            while pending:
                before = len(pending)
                self._harvest(pending, run_dir, started, finish)
                if not pending or proc.poll() is not None:
                    break
                if time.monotonic() - t0 >= limit:
                    timed_out = True
                    break
                # Back off while nothing reports, on a large step: listing a shared directory of 3 files a node
                # 5 times a second loads a parallel file system at 10,000 nodes (a small one costs nothing).
                idle = 0 if len(pending) < before else idle + 1
                backoff = 1 << min(idle, 4) if len(pending) >= BACKOFF_NODES else 1
                time.sleep(min(self.poll_s * backoff, max(self.poll_s, 2.0)))
        except KeyboardInterrupt:
            interrupted = True
        if proc.poll() is None:
            if pending:
                self._stop(proc)
            else:  # every node reported: srun ends on its own in a moment
                try:
                    proc.wait(timeout=self.kill_grace_s)
                except subprocess.TimeoutExpired:
                    self._stop(proc)
        elif pending:
            time.sleep(min(1.0, self.poll_s * 5))  # an .rc written just before srun ended (shared fs lag)
        self._harvest(pending, run_dir, started, finish, (timed_out, interrupted, limit))
        srun_err = (run_dir / "srun.err").read_bytes().decode("utf-8", "replace")
        for node in pending:
            out, over = _read_capped(run_dir / f"{node}.out", self.max_output_bytes)
            err, _ = _read_capped(run_dir / f"{node}.err", 1 << 20)
            status, reason = unfinished_node(node, wrote=bool(out), timed_out=timed_out, interrupted=interrupted,
                                             limit_s=limit, srun_rc=proc.returncode, srun_err=srun_err)
            if over and reason != "interrupted":
                reason += f"; output over {self.max_output_bytes} bytes cut off"
            finish(HostRun(node, status, out, err, None, reason, started, _now()))
        pending.clear()

    def _harvest(self, pending: dict[str, None], run_dir: Path, started: str, finish: Callable[[HostRun], None],
                 stopped: tuple[bool, bool, float] | None = None) -> None:
        """Report every pending node whose exit status has appeared; remove it from `pending`. `stopped`
        (timed out, interrupted, limit) after we ended the step: a script killed by it is timed out or
        interrupted, not failed."""
        try:
            names = set(os.listdir(run_dir))
        except OSError:
            return
        reported = {name[:-3] for name in names if name.endswith(".rc")}
        for node in [n for n in pending if n in reported]:  # one pass; dropping a node is O(1)
            del pending[node]
            try:
                rc = int((run_dir / f"{node}.rc").read_text().strip())
            except (OSError, ValueError):
                rc = 255
            out, over = _read_capped(run_dir / f"{node}.out", self.max_output_bytes)
            err, _ = _read_capped(run_dir / f"{node}.err", 1 << 20)
            if rc != 0 and stopped and (stopped[0] or stopped[1]):
                status, reason = unfinished_node(node, wrote=bool(out), timed_out=stopped[0],
                                                 interrupted=stopped[1], limit_s=stopped[2], srun_rc=None,
                                                 srun_err="")
            elif rc != 0:
                status, reason = HostStatus.FAILED, _script_failure(node, rc, err)
            elif over:
                status = HostStatus.PARTIAL
                reason = f"output from {node} exceeded {self.max_output_bytes} bytes; the first ones are kept"
            else:
                status, reason = HostStatus.OK, None
            finish(HostRun(node, status, out, err, rc, reason, started, _now()))

    def _stop(self, proc: subprocess.Popen) -> None:
        """SIGTERM makes srun cancel the step (the job keeps running); SIGKILL if it does not end in time."""
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=self.kill_grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
