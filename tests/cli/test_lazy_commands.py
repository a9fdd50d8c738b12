"""The commands are imported when asked for (app.COMMANDS): `fabricase list` and `fabricase providers` start
without the analysis, numpy or the capture code, and every command the modules define is reachable by name."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
from click.testing import CliRunner

from fabricase.cli import app, cli

MODULES = ("capture_cmds", "faulty_cmd", "metrics_cmds", "probe_cmd", "provider_cmds", "relay_cmd", "track_cmds")
HEAVY = ("numpy", "fabricase.analysis", "fabricase.capture_index", "fabricase.diagnosis", "fabricase.bundler")


def _loaded_after(*argv: str) -> set[str]:
    code = ("import sys\nfrom fabricase.cli import cli\ntry:\n    cli.main(" + repr(list(argv)) +
            ", prog_name='fabricase')\nexcept SystemExit:\n    pass\nprint('MODULES', ' '.join(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    return set(out.rsplit("MODULES", 1)[1].split())


def test_the_registry_names_every_command_and_its_module():
    for name in MODULES:
        importlib.import_module(f"fabricase.cli.{name}")
    defined = {name: cmd.callback.__module__.rsplit(".", 1)[1] for name, cmd in cli.commands.items()}
    assert defined == app.COMMANDS


def test_every_command_is_found_by_name():
    ctx = click.Context(cli)
    for name in app.COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.get_command(ctx, "no-such-command") is None


def test_a_tracker_command_starts_without_the_analysis():
    for argv in (["list", "--help"], ["providers", "--help"], ["show", "--help"]):
        loaded = _loaded_after(*argv)
        assert "fabricase.cli.track_cmds" in loaded or "fabricase.cli.provider_cmds" in loaded
        assert not {m for m in loaded if m in HEAVY}, argv


def test_help_lists_every_command_but_the_hidden_one():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:", 1)[1].splitlines() if line.strip()}
    assert listed == set(app.COMMANDS) - {"relay"}


def test_a_group_without_its_subcommand_prints_its_help_line_by_line():
    """`fabricase providers` alone: click's help as a usage error, with its line breaks (it was one line of
    literal "\\n" escapes, the usage error's message made inert whole)."""
    result = CliRunner().invoke(cli, ["providers"])
    assert result.exit_code == 2
    assert "\\n" not in result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("Usage: ") and any(line.strip().startswith("check") for line in lines)
    assert all(len(line) <= 80 for line in lines)
