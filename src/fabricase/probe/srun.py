"""The probe inside a Slurm job: each command is a one-task `srun` step on its node, a collective is ONE step
across the nodes, and the guard rails say which nodes a probe may load at all.

    srun --jobid=<id> [--het-group=N] --overlap -N1 -n1 -w <node> --kill-on-bad-exit=1 --time=<minutes>
         --input=none --job-name=fabricase-probe sh -c <remote_script>

`--overlap` lets the step start next to the job's own steps (and gives it the job's GRES, so no `--gpus-per-node`
is asked for). The script on the node is `exec.remote_script`: the tag and `timeout` work exactly as over ssh,
so `sweep` (Exec.sweep, through argv()) finds what a test left behind. `--time` is a backstop a minute past the
test's own limit (transports.slurm.step_minutes): `start` knows that limit; a bare `argv()` (the sweep) uses
the `limit_s` given at init, the probe's per-test timeout.

A collective runs from here (the login node or the allocation's shell) as one step with one rank per node, in
the order given (`-m arbitrary` with the node list unfolded: rank 0 is on hosts[0]); srun and every rank are
under the tag and `timeout` (the local one a little later, so the ranks' exit status is what srun reports). MPI
wiring (`--mpi`) is left to the site's MpiDefault: nccl-tests builds differ (pmi2, pmix), and the site knows.

srun runs without the SLURM_* variables of an allocation we may be inside (they would steer the step's layout):
`env -u` strips them, since `Running` starts its argv in our own environment.

Guard rails (`probe_nodes`): a probe loads NICs and GPUs hard, so it only runs on the nodes of the user's own
RUNNING job, and never on a node where a job of another user is running.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from fabricase.errors import TargetError
from fabricase.probe.exec import KILL_GRACE_S, TAG_VAR, Exec, Running, remote_script
from fabricase.slurm import SlurmJob, expand_nodelist, parse_scontrol_records, slurm_env
from fabricase.transports.slurm import step_minutes

__all__ = ["DEFAULT_LIMIT_S", "STEP_NAME", "SrunExec", "allocation_job", "jobs_on_nodes", "probe_nodes"]

STEP_NAME = "fabricase-probe"
DEFAULT_LIMIT_S = 120.0  # the probe's default per-test timeout: the step limit of a bare argv() (the sweep)
_JOB = re.compile(r"\d+(?:_\d+|_\[[0-9,%-]+\]|\+\d+)?")  # 48213, 48213_7, 48213_[1-4%2], 48213+1
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}\$?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _strip_slurm_env() -> list[str]:
    """`env -u VAR ...` for the SLURM_*/SRUN_* variables of an allocation around us ([] when there are none)."""
    drop = sorted(set(os.environ) - set(slurm_env()))
    return ["env", *[a for name in drop for a in ("-u", name)]] if drop else []


class SrunExec(Exec):
    """Commands on the nodes of one running job, as `srun` steps (see the module doc)."""

    name = "slurm"

    def __init__(self, job: SlurmJob, *, srun: str = "srun", scontrol: str = "scontrol",
                 tools_path: str | None = None, limit_s: float = DEFAULT_LIMIT_S) -> None:
        super().__init__(tools_path=tools_path)
        self.job = job
        self.srun = srun
        self.scontrol = scontrol
        self.limit_s = limit_s
        self._addresses: dict[str, str] = {}

    def _head(self) -> list[str]:
        het = [f"--het-group={self.job.het_group}"] if self.job.het_group is not None else []
        return [*_strip_slurm_env(), self.srun, f"--jobid={self.job.srun_job_id or self.job.job_id}", *het,
                "--overlap"]

    def _tail(self, limit_s: float) -> list[str]:
        return ["--kill-on-bad-exit=1", f"--time={step_minutes(limit_s)}", "--input=none",
                f"--job-name={STEP_NAME}"]

    def step_argv(self, host: str, script: str, limit_s: float) -> list[str]:
        """The srun step that runs the sh `script` on `host`, with --time a minute past `limit_s`."""
        return [*self._head(), "-N1", "-n1", "-w", host, *self._tail(limit_s), "sh", "-c", script]

    def argv(self, host: str, script: str) -> list[str]:
        return self.step_argv(host, script, self.limit_s)

    def _outside(self, hosts: Sequence[str]) -> str | None:
        stranger = next((h for h in hosts if h not in self.job.nodes), None)
        if stranger is None:
            return None
        return f"{stranger} is not a node of job {self.job.job_id} ({self.job.nodelist})"

    def start(self, host: str, argv: Sequence[str], *, tag: str, limit_s: float,
              env: Mapping[str, str] | None = None) -> Running:
        """Like Exec.start, but the step's --time follows this test's limit; a node outside the job fails."""
        if why := self._outside([host]):
            return Running(host, None, limit_s, error=why)
        try:
            script = remote_script(argv, tag=tag, limit_s=limit_s, env=env, tools_path=self.tools_path)
        except ValueError as exc:
            return Running(host, None, limit_s, error=str(exc))
        return Running(host, self.step_argv(host, script, limit_s), limit_s)

    def address(self, host: str) -> str:
        """The node's NodeAddr (`scontrol show node -o`), which a peer connects to; the node name when Slurm
        does not say. Cached per node."""
        if host not in self._addresses:
            self._addresses[host] = _node_addr(host, self.scontrol) or host
        return self._addresses[host]

    def collective_argv(self, hosts: Sequence[str], test_argv: Sequence[str], *, tag: str, limit_s: float,
                        env: Mapping[str, str] | None = None) -> list[str]:
        """srun's argv for a collective: one step, one rank per node in the given order, each rank under the
        tag and `timeout`. ValueError for a bad tag or variable name."""
        n = len(hosts)
        export = [f"{TAG_VAR}={tag}"]
        for key, value in (env or {}).items():
            if not _ENV_NAME.fullmatch(key):
                raise ValueError(f"invalid environment variable: {key!r}")
            # --export splits on commas: such a value travels by name, from srun's own environment (set by
            # the local wrapper, see collective()).
            export.append(key if "," in value else f"{key}={value}")
        return [*self._head(), "-N", str(n), f"--ntasks={n}", "--ntasks-per-node=1", "-m", "arbitrary",
                "-w", ",".join(hosts), *self._tail(limit_s), f"--export=ALL,{','.join(export)}",
                "timeout", "-k", str(KILL_GRACE_S), str(max(1, round(limit_s))), *test_argv]

    def collective(self, hosts: Sequence[str], test_argv: Sequence[str], *, tag: str, limit_s: float,
                   env: Mapping[str, str] | None = None) -> Running:
        """ONE srun step across `hosts`, started here; its stdout is every rank's output (rank 0 on hosts[0])."""
        first = hosts[0] if hosts else ""
        if not hosts:
            return Running(first, None, limit_s, error="a collective needs at least one host")
        if len(set(hosts)) != len(hosts):
            return Running(first, None, limit_s, error="a collective names a node twice: " + ",".join(hosts))
        if why := self._outside(hosts):
            return Running(first, None, limit_s, error=why)
        try:
            step = self.collective_argv(hosts, test_argv, tag=tag, limit_s=limit_s, env=env)
            # srun itself under the tag and a later timeout: the ranks' own timeout fires first, and srun
            # reports their exit status (124); this one only catches an srun that hangs.
            script = remote_script(step, tag=tag, limit_s=limit_s + 2, env=env, tools_path=self.tools_path)
        except ValueError as exc:
            return Running(first, None, limit_s, error=str(exc))
        return Running(first, ["sh", "-c", script], limit_s)


def _node_addr(node: str, scontrol: str) -> str | None:
    exe = shutil.which(scontrol)
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, "show", "node", "-o", node], capture_output=True, text=True,
                              env=slurm_env(), timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    records = parse_scontrol_records(proc.stdout)
    addr = (records[0].get("NodeAddr") or "").strip() if records else ""
    return addr if addr and addr not in ("(null)", "None") and " " not in addr else None


def jobs_on_nodes(text: str) -> list[tuple[str, str, list[str]]]:
    """`squeue -h -o '%i|%u|%N'` output -> (job id, user, nodes expanded). A line that is not exactly three
    well-formed fields (a job id, a user name, a node list Slurm's syntax reads) is ignored."""
    jobs = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 3:
            continue
        job, user, nodelist = (f.strip() for f in fields)
        if not _JOB.fullmatch(job) or not _USER.fullmatch(user) or not nodelist:
            continue
        nodes = expand_nodelist(nodelist)
        if nodes:
            jobs.append((job, user, nodes))
    return jobs


def _current_user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def _squeue_running(nodes: Sequence[str], squeue: str, env: Mapping[str, str] | None) -> str:
    """squeue's running jobs on the nodes; TargetError when it cannot be asked (no check, no probe)."""
    nodelist = ",".join(nodes)
    exe = shutil.which(squeue)
    if exe is None:
        raise TargetError(f"cannot check which jobs run on {nodelist}: no {squeue} on PATH; not probed",
                          where="--job")
    try:
        proc = subprocess.run([exe, "-h", "-t", "RUNNING", "-w", nodelist, "-o", "%i|%u|%N"], capture_output=True,
                              text=True, env=slurm_env(dict(env) if env is not None else None), timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"cannot check which jobs run on {nodelist} (squeue: {exc}); not probed",
                          where="--job") from exc
    if proc.returncode != 0:
        last = ([ln.strip() for ln in proc.stderr.splitlines() if ln.strip()] or [f"exit {proc.returncode}"])[-1]
        raise TargetError(f"cannot check which jobs run on {nodelist} (squeue: {last[:200]}); not probed",
                          where="--job")
    return proc.stdout


def probe_nodes(job: SlurmJob, requested: Sequence[str] | None = None, *, user: str | None = None,
                squeue: str = "squeue", env: Mapping[str, str] | None = None) -> list[str]:
    """The nodes of `job` a probe may run on (`requested`, or all of them, in the job's order); TargetError
    when the job is not the user's own running job, a node is not in it, or another user's job runs on one."""
    me = user or _current_user()
    if not job.running:
        raise TargetError(f"job {job.job_id} is {job.state}, not RUNNING: a probe runs only inside a running job",
                          where="--job")
    if job.user != me:
        raise TargetError(f"job {job.job_id} belongs to user {job.user or '?'}, not {me}: a probe runs only on "
                          "the nodes of your own job", where="--job")
    if requested is None:
        nodes = list(job.nodes)
    else:
        stranger = next((n for n in requested if n not in job.nodes), None)
        if stranger is not None:
            raise TargetError(f"{stranger} is not a node of job {job.job_id} ({job.nodelist}); not probed",
                              where="--job")
        nodes = list(dict.fromkeys(requested))
    if not nodes:
        raise TargetError(f"no nodes of job {job.job_id} to probe", where="--job")
    others = [(j, u, ns) for j, u, ns in jobs_on_nodes(_squeue_running(nodes, squeue, env)) if u != me]
    for node in nodes:
        for other_job, other_user, other_nodes in others:
            if node in other_nodes:
                raise TargetError(f"{node} runs job {other_job} of user {other_user}: a probe would load its "
                                  "NICs and GPUs; not probed", where="--job")
    return nodes


def allocation_job(env: Mapping[str, str] = os.environ) -> str | None:
    """The job fabricase runs inside (salloc, sbatch): SLURM_JOB_ID, when it is a well-formed job id."""
    value = (env.get("SLURM_JOB_ID") or "").strip()
    return value if _JOB.fullmatch(value) else None
