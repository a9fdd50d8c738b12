"""The command line: the only place that prints for humans and sets exit codes (see cli/app.py)."""

from __future__ import annotations

import sys
from typing import NoReturn

from fabricase.cli import (  # noqa: F401  (each registers its commands)
    capture_cmds,
    metrics_cmds,
    provider_cmds,
    relay_cmd,
    track_cmds,
)
from fabricase.cli.app import cli

__all__ = ["cli", "main"]


def main() -> NoReturn:
    sys.exit(cli.main(prog_name="fabricase"))
