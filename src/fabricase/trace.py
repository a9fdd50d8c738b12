"""The --debug trace: one line on stderr for each decision fabricase otherwise makes silently (how many processes
analyze, why the analysis stays serial, whether the C extension is in use, which transport a target gets).

Plain logging: the "fabricase" logger at DEBUG, with no handler of its own. The CLI attaches one with --debug or
FABRICASE_DEBUG=1 (cli.app), which prints each line inert as "fabricase: debug: ..."; a library caller attaches
its own. A message is formatted only when a handler wants it."""

from __future__ import annotations

import logging

__all__ = ["LOG", "debug", "hosts"]

LOG = logging.getLogger("fabricase")


def debug(message: str, *args: object) -> None:
    """One trace line (printf-style args, formatted only when the trace is on)."""
    LOG.debug(message, *args)


def hosts(n: int) -> str:
    """"1 host", "3 hosts"."""
    return f"{n:,} host" + ("" if n == 1 else "s")
