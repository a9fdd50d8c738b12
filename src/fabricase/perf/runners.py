"""Command lines for the perf tests (pure builders: argv lists) and a small local runner.

perftest runs as a server/client pair: `perftest_pairs` pairs the hosts so each is tested once. nccl-tests runs
one rank per GPU under `srun` or `mpirun`, with `-c 1` so that the `#wrong` column checks the results.
The runner never raises for a missing binary, a timeout or an exec failure: it says so in `PerfRun.error`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fabricase.parsers.nccl_tests import parse_size

__all__ = [
    "LAUNCHERS",
    "PerfRun",
    "ib_write_bw_command",
    "iperf3_command",
    "nccl_tests_argv",
    "nccl_tests_command",
    "perftest_pairs",
    "run_local",
    "run_server_client",
]

LAUNCHERS = ("srun", "mpirun")
# Names that go into a shell script on the host: no spaces or shell metacharacters.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_HOST = re.compile(r"[A-Za-z0-9_.:\-\[\]%]+")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"invalid {what}: {value!r}")
    return value


def _positive(value: int | float, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return f"{value:g}" if isinstance(value, float) else str(value)


def perftest_pairs(hosts: Sequence[str]) -> list[tuple[str, str]]:
    """(server, client) pairs covering every host once; with an odd count the last host pairs with the first."""
    unique = list(dict.fromkeys(h for h in hosts if h))
    if len(unique) < 2:
        return []
    pairs = [(unique[i], unique[i + 1]) for i in range(0, len(unique) - 1, 2)]
    if len(unique) % 2:
        pairs.append((unique[-1], unique[0]))
    return pairs


def ib_write_bw_command(
    device: str,
    port: int,
    server: str | None = None,
    size: int = 8 * 1024 * 1024,
    duration: int = 10,
    report_gbits: bool = True,
    extra: Sequence[str] = (),
    binary: str = "ib_write_bw",
    qps: int | None = None,
    gid_index: int | None = None,
    tcp_port: int | None = None,
) -> list[str]:
    """perftest bandwidth command: the server side when `server` is None, else the client connecting to it.

    8 MiB messages for a duration (`-D`), `-F` so a CPU-frequency warning does not fail the run, Gb/s output.
    """
    if not re.fullmatch(r"ib_(?:write|read|send|atomic)_bw", binary):
        raise ValueError(f"not a perftest bandwidth binary: {binary!r}")
    argv = [binary, "-d", _check(_NAME, device, "RDMA device"), "-i", _positive(port, "port")]
    argv += ["-s", _positive(size, "size"), "-D", _positive(duration, "duration"), "-F"]
    if qps is not None:
        argv += ["-q", _positive(qps, "qps")]
    if gid_index is not None:
        if isinstance(gid_index, bool) or not isinstance(gid_index, int) or gid_index < 0:
            raise ValueError(f"invalid GID index: {gid_index!r}")
        argv += ["-x", str(gid_index)]
    if tcp_port is not None:
        argv += ["-p", _positive(tcp_port, "tcp_port")]
    if report_gbits:
        argv.append("--report_gbits")
    argv += list(extra)
    if server is not None:
        argv.append(_check(_HOST, server, "server"))
    return argv


def nccl_tests_command(
    hosts: Sequence[str],
    gpus_per_host: int,
    binary: str = "all_reduce_perf",
    launcher: str = "srun",
    min_bytes: str = "8",
    max_bytes: str = "8G",
    factor: int = 2,
    iters: int = 20,
    warmup_iters: int = 5,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """nccl-tests across `hosts`, one rank per GPU (`-g 1`), results checked (`-c 1`)."""
    if launcher not in LAUNCHERS:
        raise ValueError(f"unknown launcher {launcher!r}; valid: {', '.join(LAUNCHERS)}")
    names = [_check(_NAME, h, "host") for h in dict.fromkeys(hosts)]
    if not names:
        raise ValueError("nccl-tests needs at least one host")
    gpus = _positive(gpus_per_host, "gpus_per_host")
    variables = [f"{_check(_ENV_KEY, k, 'environment variable')}={v}" for k, v in (env or {}).items()]
    test = nccl_tests_argv(binary, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, iters=iters,
                           warmup_iters=warmup_iters, extra=extra)
    if launcher == "srun":
        launch = ["srun", f"--nodes={len(names)}", f"--ntasks-per-node={gpus}", f"--gpus-per-node={gpus}",
                  f"--nodelist={','.join(names)}"]  # fmt: skip
        if variables:
            launch.append("--export=ALL," + ",".join(variables))
        return launch + test
    launch = ["mpirun", "-np", str(len(names) * int(gpus)), "-H", ",".join(f"{h}:{gpus}" for h in names),
              "--bind-to", "none", "-x", "PATH", "-x", "LD_LIBRARY_PATH"]  # fmt: skip
    for variable in variables:
        launch += ["-x", variable]
    return launch + test


def nccl_tests_argv(binary: str = "all_reduce_perf", *, min_bytes: str = "8", max_bytes: str = "8G", factor: int = 2,
                    iters: int = 20, warmup_iters: int = 5, gpus: int = 1, extra: Sequence[str] = ()) -> list[str]:
    """The nccl-tests command itself (no launcher): `-g gpus` GPUs per rank, results checked (`-c 1`)."""
    if not re.fullmatch(r"(?:\S*/)?[a-z_]+_perf(?:_mpi)?", binary):
        raise ValueError(f"not an nccl-tests binary: {binary!r}")
    for size in (min_bytes, max_bytes):
        if parse_size(str(size)) is None:
            raise ValueError(f"invalid message size: {size!r}")
    return [binary, "-b", str(min_bytes), "-e", str(max_bytes), "-f", _positive(factor, "factor"),
            "-g", _positive(gpus, "gpus"), "-n", _positive(iters, "iters"), "-w", str(int(warmup_iters)),
            "-c", "1", *extra]  # fmt: skip


def iperf3_command(
    server: str | None,
    duration: int = 10,
    json: bool = True,
    parallel: int = 1,
    port: int | None = None,
    reverse: bool = False,
    bind: str | None = None,
) -> list[str]:
    """iperf3 server (`server` None: `-s -1`, exits after one test) or client with JSON output (`-J`)."""
    argv = ["iperf3"]
    if server is None:
        argv += ["-s", "-1"]
    else:
        argv += ["-c", _check(_HOST, server, "server"), "-t", _positive(duration, "duration")]
        argv += ["-P", _positive(parallel, "parallel")]
        if reverse:
            argv.append("-R")
        if bind is not None:
            argv += ["-B", _check(_HOST, bind, "bind address")]
    if port is not None:
        argv += ["-p", _positive(port, "port")]
    if json:
        argv.append("-J")
    return argv


@dataclass(frozen=True)
class PerfRun:
    """One local run. rc None: it did not run to an exit status (error says why: missing binary, timeout)."""

    argv: tuple[str, ...]
    rc: int | None
    stdout: str
    stderr: str
    duration_s: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.rc == 0


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def _missing(argv: Sequence[str], env: Mapping[str, str] | None) -> PerfRun | None:
    if not argv:
        return PerfRun((), None, "", "", 0.0, error="empty command")
    path = (env or os.environ).get("PATH")
    if shutil.which(argv[0], path=path) is None:
        return PerfRun(tuple(argv), None, "", "", 0.0, error=f"{argv[0]}: not installed (not found on PATH)")
    return None


def run_local(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> PerfRun:
    """Run argv here, capturing its output; a missing binary, a timeout or an exec failure is `error`."""
    if missing := _missing(argv, env):
        return missing
    started = time.monotonic()
    try:
        done = subprocess.run(list(argv), capture_output=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return PerfRun(tuple(argv), None, _text(exc.stdout), _text(exc.stderr), time.monotonic() - started,
                       error=f"{argv[0]}: timed out after {timeout_s:g} s")  # fmt: skip
    except OSError as exc:
        return PerfRun(tuple(argv), None, "", "", time.monotonic() - started, error=f"{argv[0]}: {exc}")
    return PerfRun(tuple(argv), done.returncode, _text(done.stdout), _text(done.stderr), time.monotonic() - started)


def run_server_client(
    server_argv: Sequence[str],
    client_argv: Sequence[str],
    timeout_s: float,
    start_delay_s: float = 0.5,
    env: Mapping[str, str] | None = None,
) -> tuple[PerfRun, PerfRun]:
    """Start the server side, run the client against it, then collect the server (stopped if it lingers)."""
    server_missing, client_missing = _missing(server_argv, env), _missing(client_argv, env)
    if server_missing or client_missing:
        skipped = "not run: the other side of the test is missing"
        return (server_missing or PerfRun(tuple(server_argv), None, "", "", 0.0, error=skipped),
                client_missing or PerfRun(tuple(client_argv), None, "", "", 0.0, error=skipped))  # fmt: skip
    started = time.monotonic()
    try:
        server = subprocess.Popen(list(server_argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, env=env)  # fmt: skip
    except OSError as exc:
        failed = PerfRun(tuple(server_argv), None, "", "", 0.0, error=f"{server_argv[0]}: {exc}")
        return failed, failed
    time.sleep(start_delay_s)
    client = run_local(client_argv, timeout_s, env)
    error = None
    try:
        out, err = server.communicate(timeout=max(1.0, min(timeout_s, 10.0)))
    except subprocess.TimeoutExpired:
        server.kill()
        out, err = server.communicate()
        error = f"{server_argv[0]}: still running after the client finished; stopped"
    rc = None if error else server.returncode
    done = PerfRun(tuple(server_argv), rc, _text(out), _text(err), time.monotonic() - started, error=error)
    return done, client
