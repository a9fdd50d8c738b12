"""A real Slurm cluster on this machine, for the session: munge, slurmctld and four slurmd (`slurmd -N gpu00N`),
all from Debian's packages (apt: slurm-wlm munge), every node on localhost.

Needs root. Skipped with the reason elsewhere; FAILS instead when CI=true. Everything lives under
/tmp/fc-slurm (fixed ports 16817 and 17001-17004); leftovers of a crashed earlier run (daemons, job steps,
state) are removed at setup, and everything started here is stopped again at teardown, even on failure.
Every Slurm command finds this cluster through SLURM_CONF, set for the test process and its children.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

BASE = Path("/tmp/fc-slurm")
NODES = ["gpu001", "gpu002", "gpu003", "gpu004"]
CTLD_PORT = 16817
TOOLS = {"slurmctld": "slurmctld", "slurmd": "slurmd", "sbatch": "slurm-client", "scontrol": "slurm-client",
         "srun": "slurm-client", "sinfo": "slurm-client", "squeue": "slurm-client", "scancel": "slurm-client",
         "munged": "munge", "munge": "munge", "unmunge": "munge", "runuser": "util-linux"}

SLURM_CONF = f"""\
ClusterName=fc
SlurmctldHost=localhost
SlurmctldPort={CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=600
StateSaveLocation={BASE}/state
SlurmdSpoolDir={BASE}/slurmd.%n
SlurmctldPidFile={BASE}/slurmctld.pid
SlurmdPidFile={BASE}/slurmd.%n.pid
SlurmctldLogFile={BASE}/slurmctld.log
SlurmdLogFile={BASE}/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=gpu[001-004] NodeHostname=localhost Port=17001-17004 CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=gpu Nodes=gpu[001-004] Default=YES MaxTime=INFINITE State=UP
"""


def need(ok: bool, reason: str) -> None:
    """Skip (or, in CI, fail) when the cluster cannot be built here."""
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the Slurm cluster cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class Cluster:
    conf: Path
    base: Path
    nodes: list[str]
    started_s: float  # wall time to bring it up

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=check,
                              env={**os.environ, "SLURM_CONF": str(self.conf)})

    def sbatch(self, *args: str) -> str:
        return self.run("sbatch", "--parsable", "-o", "/dev/null", *args).stdout.strip().split(";")[0]

    def state(self, job_id: str) -> str:
        out = self.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).stdout.strip()
        if out:
            return out.splitlines()[0]
        text = self.run("scontrol", "show", "job", "-o", job_id, check=False).stdout
        return next((w.split("=", 1)[1] for w in text.split() if w.startswith("JobState=")), "GONE")

    def wait_state(self, job_id: str, states: set[str], timeout: float = 30) -> str:
        end = time.monotonic() + timeout
        state = ""
        while time.monotonic() < end:
            state = self.state(job_id)
            if state in states:
                return state
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} is {state}, not {sorted(states)} after {timeout:g}s\n{self.logs()}")

    def steps(self, job_id: str) -> list[str]:
        out = self.run("squeue", "-h", "-s", "-j", job_id, "-o", "%i %j", check=False).stdout
        return [ln.strip() for ln in out.splitlines() if ln.strip()]

    def logs(self, lines: int = 15) -> str:
        parts = []
        for log in sorted(self.base.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)


def _ours(pid: int, conf: str) -> bool:
    """A process started for this cluster: daemons, job steps and tasks all carry our SLURM_CONF."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"SLURM_CONF={conf}".encode() in env


def _kill_ours(conf: str) -> None:
    me = {os.getpid(), os.getppid()}
    for _ in range(3):
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in me and _ours(int(p), conf)]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        time.sleep(0.5)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _munge_works() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        if cred.returncode != 0:
            return False
        return subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start_munge() -> int | None:
    """munged as the munge user, with its key; None when a munged already answers (not ours to stop)."""
    if _munge_works():
        return None
    key = Path("/etc/munge/munge.key")
    if not key.is_file():
        key.parent.mkdir(mode=0o700, exist_ok=True)
        key.write_bytes(os.urandom(1024))
    shutil.chown(key.parent, "munge", "munge")
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    for d, mode in (("/run/munge", 0o755), ("/var/lib/munge", 0o711), ("/var/log/munge", 0o700)):
        Path(d).mkdir(mode=mode, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    proc = subprocess.run(["runuser", "-u", "munge", "--", shutil.which("munged") or "/usr/sbin/munged"],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        pytest.fail(f"munged did not start: {proc.stderr.strip()}", pytrace=False)
    pid = int(Path("/run/munge/munged.pid").read_text().split()[0])
    for _ in range(50):
        if _munge_works():
            return pid
        time.sleep(0.1)
    pytest.fail("munged started but `munge -n | unmunge` does not work", pytrace=False)


def _sinfo_idle(env: dict[str, str]) -> list[str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, env=env,
                         timeout=10).stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.split()[1:] == ["idle"])


@pytest.fixture(scope="session")
def slurm_cluster():
    need(os.geteuid() == 0, "the Slurm cluster needs root (slurmd runs job steps as their users)")
    missing = sorted({f"{tool} ({pkg})" for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    need(not missing, "Slurm or munge is not installed: missing " + ", ".join(missing)
         + " (apt-get install slurm-wlm munge)")
    t0 = time.monotonic()
    conf = BASE / "slurm.conf"
    _kill_ours(str(conf))  # a crashed earlier run
    shutil.rmtree(BASE, ignore_errors=True)
    (BASE / "state").mkdir(parents=True)
    BASE.chmod(0o755)
    conf.write_text(SLURM_CONF)
    old_conf = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    env = {**os.environ}
    munged = None
    cluster = Cluster(conf, BASE, list(NODES), 0.0)
    try:
        munged = _start_munge()
        subprocess.run(["slurmctld", "-i"], env=env, check=True, capture_output=True, timeout=30)
        for node in NODES:
            subprocess.run(["slurmd", "-N", node], env=env, check=True, capture_output=True, timeout=30)
        end = time.monotonic() + 60
        idle: list[str] = []
        while time.monotonic() < end:
            with contextlib.suppress(subprocess.TimeoutExpired):
                idle = _sinfo_idle(env)
            if idle == NODES:
                break
            time.sleep(0.3)
        else:
            pytest.fail(f"Slurm nodes not idle after 60 s (idle: {idle})\n{cluster.logs()}", pytrace=False)
        cluster.started_s = time.monotonic() - t0
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True, timeout=15)
            end = time.monotonic() + 10
            while time.monotonic() < end and subprocess.run(
                    ["squeue", "-h"], env=env, capture_output=True, text=True, timeout=10).stdout.strip():
                time.sleep(0.3)
        _kill_ours(str(conf))
        if munged is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(munged, signal.SIGTERM)
        shutil.rmtree(BASE, ignore_errors=True)
        if old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old_conf


@pytest.fixture
def job_factory(slurm_cluster):
    """Submit batch jobs; every one is cancelled at the end of the test."""
    jobs: list[str] = []

    def submit(*args: str, running: bool = True) -> str:
        job_id = slurm_cluster.sbatch(*args)
        jobs.append(job_id)
        if running:
            slurm_cluster.wait_state(job_id, {"RUNNING"})
        return job_id

    yield submit
    if jobs:
        slurm_cluster.run("scancel", *jobs, check=False)
