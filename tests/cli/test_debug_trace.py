"""--debug traces on stderr the decisions fabricase otherwise makes silently: whether the C extension is in use,
the transport a target gets, how many processes record and analyze, and why the analysis stays serial (the pool
forks only in a process without other threads). Without --debug none of it is printed."""

from __future__ import annotations

import logging
import threading

import pytest
from click.testing import CliRunner

from fabricase.analysis import pool
from fabricase.cli import cli
from fabricase.trace import LOG


@pytest.fixture(autouse=True)
def _trace_off():
    """The trace's handler and level as a command without --debug leaves them (a test turns it on)."""
    handlers, level = list(LOG.handlers), LOG.level
    yield
    LOG.handlers[:], LOG.level = handlers, level


def _collect(tmp_path, *flags: str):
    argv = [*flags, "collect", "--hosts", "localhost", "--interval", "0", "--json", "-o", str(tmp_path / "cap")]
    return CliRunner().invoke(cli, argv, catch_exceptions=False)


def test_debug_traces_the_decisions_on_stderr(tmp_path, monkeypatch):
    monkeypatch.delenv("FABRICASE_DEBUG", raising=False)
    result = _collect(tmp_path, "--debug")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("fabricase: debug: ")]
    text = "\n".join(lines)
    assert "C extension fabricase._native: " in text
    assert "collect: 1 host via local (chosen for these targets)" in text
    assert "recording: 1 host in this process (fewer than 16 hosts)" in text
    assert "analysis: 1 host in this process (serial: fewer than 64 hosts)" in text
    assert "debug:" not in result.stdout  # the JSON on stdout stays JSON
    assert all(len(line) < 200 for line in lines)


def test_without_debug_nothing_is_traced(tmp_path, monkeypatch):
    monkeypatch.delenv("FABRICASE_DEBUG", raising=False)
    _collect(tmp_path / "first", "--debug")  # an invocation before, in this process, with the trace on
    result = _collect(tmp_path)
    assert result.exit_code == 0, result.stderr
    assert "debug:" not in result.stderr


def test_fabricase_debug_in_the_environment_traces_too(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICASE_DEBUG", "1")
    assert "fabricase: debug: collect: 1 host via local" in _collect(tmp_path).stderr


def _reason(caplog, hosts: int) -> str:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="fabricase"):
        pool.pool_workers(hosts)
    return " ".join(r.getMessage() for r in caplog.records if r.getMessage().startswith("analysis: "))


def test_the_pool_says_why_it_stays_serial(caplog, monkeypatch):
    monkeypatch.setattr(pool.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.delenv(pool.WORKERS_ENV, raising=False)
    threads = [1]  # this process's threads as pool_workers counts them (other tests' may still be ending)
    monkeypatch.setattr(pool.threading, "active_count", lambda: threads[0])
    assert _reason(caplog, 10) == "analysis: 10 hosts in this process (serial: fewer than 64 hosts)"
    assert _reason(caplog, 500) == "analysis: 500 hosts in 2 forked processes"
    monkeypatch.setenv(pool.WORKERS_ENV, "1")
    assert _reason(caplog, 500) == f"analysis: 500 hosts in this process (serial: {pool.WORKERS_ENV}=1)"
    monkeypatch.delenv(pool.WORKERS_ENV)
    threads[0] = 3  # the silent case before: a process with other threads never forks
    assert _reason(caplog, 500) == ("analysis: 500 hosts in this process (serial: 3 threads run in this process, "
                                    "and forking is unsafe then)")
    assert pool.pool_workers(500) == 1


def test_a_real_thread_keeps_the_analysis_serial(monkeypatch):
    monkeypatch.setattr(pool.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.delenv(pool.WORKERS_ENV, raising=False)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        assert pool._serial_reason(500, 2, "").endswith("threads run in this process, and forking is unsafe then")
    finally:
        stop.set()
        other.join()


def test_a_trace_line_prints_data_inert(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FABRICASE_DEBUG", raising=False)
    _collect(tmp_path, "--debug")  # attaches the handler
    LOG.debug("host %s", "evil\x1b[2J\x07name")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "evil" in err
