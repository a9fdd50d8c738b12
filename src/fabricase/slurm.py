"""Slurm job resolution: `--job ID` -> the job's nodes, partition and state, read with `scontrol`.

The parsers are pure (text in, records out) and table-tested with real `scontrol` output; `resolve_job` is the
one small runner. Errors are TargetError with one line that says what happened.

A job that has ended (COMPLETED, CANCELLED, FAILED, TIMEOUT, ...) is still returned, with its state and the
nodes it ran on, for as long as slurmctld remembers it (MinJobAge, 300 s by default): the caller can then
capture those nodes over ssh. A pending job has no nodes yet and is an error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field, replace

from fabricase.errors import TargetError

__all__ = [
    "ENDED_STATES",
    "SlurmJob",
    "expand_nodelist",
    "job_from_records",
    "parse_hostnames",
    "parse_scontrol_records",
    "resolve_job",
    "scontrol_error",
    "slurm_env",
    "validate_job_id",
]

# Job states after which no step can start (squeue's long names; COMPLETING: the nodes are being released).
ENDED_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "COMPLETING", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
})
_UNSET = {"", "(null)", "None", "Unknown", "N/A"}
_JOB_ID = re.compile(r"\d+(?:_\d+|\+\d+)?")  # 48213, an array task 48213_7, a het component 48213+1
# JobName is followed by UserId (or, in a het job, HetJobIdSet): everything between is the name.
_JOB_NAME = re.compile(r"(?:^| )JobName=(.*?) (?=(?:HetJobIdSet|UserId|GroupId)=)")
_KEY = re.compile(r"[A-Z][A-Za-z0-9_]*(?:[:/][A-Za-z0-9_]+)*")


@dataclass(frozen=True)
class SlurmJob:
    job_id: str  # as the user names it: 48213, 48213_7 (array task) or 48213+1 (het component)
    name: str
    state: str  # JobState: RUNNING, PENDING, COMPLETED, CANCELLED, ...
    partition: str
    nodes: list[str]  # expanded, in Slurm's order
    nodelist: str  # folded, as Slurm prints it: gpu[001-002]
    user: str
    start_time: str | None = None  # ISO local time as scontrol prints it; None when unknown
    end_time: str | None = None  # a running job: when its time limit ends it (Slurm's EndTime)
    reason: str | None = None  # why it is pending or ended, when Slurm says
    srun_job_id: str = ""  # what `srun --jobid` takes: the job's own id (an array task's own id, a het leader)
    het_group: int | None = None  # for a het component: `srun --het-group`
    raw: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    def describe(self) -> dict:
        """What capture.json records about the job."""
        return {"job_id": self.job_id, "name": self.name, "state": self.state, "partition": self.partition,
                "nodelist": self.nodelist, "nodes": list(self.nodes), "user": self.user,
                "start_time": self.start_time, "end_time": self.end_time}


def validate_job_id(job_id: str) -> str:
    text = (job_id or "").strip()
    if not _JOB_ID.fullmatch(text):
        raise TargetError(f"malformed job id {job_id!r}: expected digits, e.g. 48213, 48213_7 or 48213+1",
                          where="--job")
    return text


def parse_scontrol_records(text: str) -> list[dict[str, str]]:
    """`scontrol show job -o` output: one record per line, `Key=value` fields separated by spaces.

    A value may contain spaces (JobName, Command, WorkDir): a word that does not look like `Key=` (Slurm keys
    start with a capital) belongs to the value before it. The first occurrence of a key wins.
    """
    records = []
    for line in text.splitlines():
        line = line.strip()
        if not line or "=" not in line:
            continue
        name = None
        m = _JOB_NAME.search(line)
        if m:  # the name may hold anything, even ` Key=`: take it out before splitting
            name, line = m.group(1), line[:m.start(1)] + line[m.end(1):]
        parts: dict[str, list[str]] = {}
        key = None
        for word in line.split(" "):
            k, eq, v = word.partition("=")
            if eq and _KEY.fullmatch(k) and k not in parts:
                key = k
                parts[key] = [v]
            elif key is not None:
                parts[key].append(word)
        record = {k: " ".join(words) for k, words in parts.items()}
        if name is not None:
            record["JobName"] = name
        records.append(record)
    return records


def parse_hostnames(text: str) -> list[str]:
    """`scontrol show hostnames NODELIST` output: one host per line."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _value(record: dict[str, str], key: str) -> str | None:
    v = record.get(key, "")
    return None if v in _UNSET else v


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's folded node list -> names (ClusterShell NodeSet reads Slurm's syntax); [] when it cannot."""
    from ClusterShell.NodeSet import NodeSet, NodeSetException

    try:
        return list(NodeSet(nodelist))
    except (NodeSetException, ValueError, IndexError):
        return []


def job_from_records(job_id: str, records: list[dict[str, str]]) -> SlurmJob:
    """The job `scontrol show job -o <job_id>` described; TargetError when it cannot be captured as one job."""
    if not records:
        raise TargetError(f"job {job_id} does not exist (scontrol printed nothing)", where="--job")
    if len(records) > 1:
        first = records[0]
        if _value(first, "HetJobId"):
            parts = ", ".join(f"{job_id}+{r.get('HetJobOffset', '?')}" for r in records)
            raise TargetError(f"job {job_id} is a heterogeneous job with {len(records)} components ({parts}); "
                              f"give one component, e.g. --job {job_id}+0", where="--job")
        if _value(first, "ArrayJobId"):
            tasks = sorted((f"{r.get('ArrayJobId')}_{r.get('ArrayTaskId')}" for r in records),
                           key=lambda t: [int(x) if x.isdigit() else 0 for x in re.split(r"[_\[\]-]", t)])
            raise TargetError(f"job {job_id} is an array job with {len(records)} tasks ({', '.join(tasks[:8])}"
                              f"{', ...' if len(tasks) > 8 else ''}); give one task, e.g. --job {tasks[0]}",
                              where="--job")
        raise TargetError(f"scontrol described {len(records)} jobs for {job_id}; give one job id", where="--job")
    r = records[0]
    state = (_value(r, "JobState") or "UNKNOWN").split("+")[0]
    reason = _value(r, "Reason")
    nodelist = _value(r, "NodeList") or ""
    if not nodelist:
        why = f" (reason: {reason})" if reason else ""
        if state in ENDED_STATES:
            raise TargetError(f"job {job_id} ended ({state}) before any node was allocated{why}", where="--job")
        raise TargetError(f"job {job_id} is {state}: no nodes allocated yet{why}", where="--job")
    nodes = expand_nodelist(nodelist)
    het_group = None
    srun_job_id = _value(r, "JobId") or job_id
    if _value(r, "HetJobId") and _value(r, "HetJobOffset"):
        srun_job_id, het_group = r["HetJobId"], int(r["HetJobOffset"])
    user = (_value(r, "UserId") or "").split("(")[0]
    return SlurmJob(job_id=job_id, name=_value(r, "JobName") or "", state=state,
                    partition=_value(r, "Partition") or "", nodes=nodes, nodelist=nodelist, user=user,
                    start_time=_value(r, "StartTime"), end_time=_value(r, "EndTime"), reason=reason,
                    srun_job_id=srun_job_id, het_group=het_group, raw=dict(r))


def scontrol_error(job_id: str, rc: int, stderr: str) -> str:
    """One line for a failed `scontrol show job`: the job is unknown, or Slurm could not be asked."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {rc}"
    detail = last.split(" error: ", 1)[-1] if " error: " in last else last
    if "Invalid job id" in detail or "not found" in detail:
        return f"job {job_id} does not exist (scontrol: {detail})"
    return f"cannot read job {job_id} from Slurm (scontrol: {detail[:200]})"


def slurm_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for scontrol and srun: ours, minus the SLURM_* of any job we run inside (they would
    steer srun to that job and its task layout), keeping SLURM_CONF (which cluster)."""
    env = dict(os.environ if base is None else base)
    return {k: v for k, v in env.items() if not (k.startswith(("SLURM_", "SRUN_")) and k != "SLURM_CONF")}


def _resolve_hostnames(nodelist: str, scontrol: str, env: dict[str, str], timeout_s: float) -> list[str]:
    try:
        proc = subprocess.run([scontrol, "show", "hostnames", nodelist], capture_output=True, text=True,
                              env=env, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_hostnames(proc.stdout) if proc.returncode == 0 else []


def resolve_job(job_id: str, *, scontrol: str = "scontrol", timeout_s: float = 30.0,
                env: dict[str, str] | None = None) -> SlurmJob:
    """The job's nodes, partition and state, as slurmctld knows them now."""
    job_id = validate_job_id(str(job_id))
    exe = shutil.which(scontrol)
    if exe is None:
        raise TargetError(f"Slurm is not installed here (no {scontrol} on PATH)", where="--job")
    env = slurm_env(env)
    try:
        proc = subprocess.run([exe, "show", "job", "-o", job_id], capture_output=True, text=True, env=env,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise TargetError(f"scontrol did not answer within {timeout_s:g}s for job {job_id} "
                          "(is slurmctld reachable?)", where="--job") from exc
    except OSError as exc:
        raise TargetError(f"cannot run {exe}: {exc.strerror}", where="--job") from exc
    if proc.returncode != 0:
        raise TargetError(scontrol_error(job_id, proc.returncode, proc.stderr + proc.stdout), where="--job")
    job = job_from_records(job_id, parse_scontrol_records(proc.stdout))
    if not job.nodes:  # a node list NodeSet cannot read: let Slurm expand it
        nodes = _resolve_hostnames(job.nodelist, exe, env, timeout_s)
        if not nodes:
            raise TargetError(f"job {job_id}: cannot expand its node list {job.nodelist!r}", where="--job")
        job = replace(job, nodes=nodes)
    return job
