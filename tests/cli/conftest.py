from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase.cli import cli


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("FABRICASE_HOME", str(h))
    monkeypatch.delenv("FABRICASE_DEBUG", raising=False)
    monkeypatch.delenv("FABRICASE_DB", raising=False)
    return h


@pytest.fixture
def host_tree(tmp_path: Path) -> Path:
    """A host tree with one healthy and one down interface: a real finding to carry through the flow."""
    root = tmp_path / "hostroot"
    for ifname, state, carrier in (("eth0", "up", "1"), ("eth1", "down", "0")):
        d = root / "sys/class/net" / ifname
        (d / "statistics").mkdir(parents=True)
        for counter, value in (("rx_bytes", "1000"), ("rx_errors", "0"), ("rx_crc_errors", "0")):
            (d / "statistics" / counter).write_text(value + "\n")
        (d / "operstate").write_text(state + "\n")
        (d / "carrier").write_text(carrier + "\n")
        (d / "carrier_changes").write_text("3\n")
        (d / "mtu").write_text("9000\n")
        (d / "speed").write_text("100000\n")
    return root


class Run:
    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int | None = 0):
        result = self.runner.invoke(cli, list(args), catch_exceptions=False)
        if code is not None:
            assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
        return result

    def json(self, *args: str, code: int = 0):
        return json.loads(self(*args, "--json", code=code).stdout)


@pytest.fixture
def run(home: Path) -> Run:
    return Run()
