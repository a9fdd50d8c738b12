"""The command line: the only place that prints for humans and sets exit codes (see cli/app.py). Each command's
module is imported when the command runs (app.COMMANDS), so that `fabricase list` does not pay for the analysis."""

from __future__ import annotations

import sys
from typing import NoReturn

from fabricase.cli.app import cli

__all__ = ["cli", "main"]


def main() -> NoReturn:
    """The console script. A character the terminal's encoding lacks (a host name in UTF-8 on a latin-1 locale)
    is written as a backslash escape, not raised: printing never fails a command, least of all after filing."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    sys.exit(cli.main(prog_name="fabricase"))
