"""The three collectors' declarations and their per-port shell loop, run with sh."""

from __future__ import annotations

import subprocess

import pytest

from fabricase.collectors.ethtool import EthtoolCollector, each_port
from fabricase.collectors.fabric_config import FabricConfigCollector
from fabricase.collectors.pcie import PcieCollector
from hosttrees import record_command, write_file


def _sh(shell: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", shell], capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.parametrize("collector", [EthtoolCollector, PcieCollector, FabricConfigCollector])
def test_commands_are_posix_sh(collector):
    assert collector.requires_any
    for cmd in collector.commands:
        assert subprocess.run(["/bin/sh", "-n", "-c", cmd.shell]).returncode == 0, cmd.name
        assert cmd.timeout_s <= 60 and cmd.cap <= 8 << 20


def test_counter_declarations():
    assert [c.name for c in EthtoolCollector.commands if c.counter] == ["ethtool-stats"]
    assert {f.pattern.rsplit("/", 1)[1] for f in PcieCollector.files if f.counter} == {
        "aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal", "aer_rootport_total_err_cor",
        "aer_rootport_total_err_fatal", "aer_rootport_total_err_nonfatal"}
    assert not any(f.counter for f in FabricConfigCollector.files)


def test_each_port_loops_over_physical_ports_under_fc_root(tmp_path):
    root = tmp_path / "host"
    for port in ("eth0", "eth1"):
        write_file(root, f"/sys/class/net/{port}/device/vendor", "0x15b3\n")
    (root / "sys/class/net/bond0").mkdir()
    record_command(root, "tool", ["eth0"], "zero\n")
    record_command(root, "tool", ["eth1"], "one\n", rc=3)
    env = {"PATH": f"{root}/.fabricase/bin:/usr/bin:/bin", "FC_ROOT": str(root)}
    run = _sh(each_port("tool", 'tool "$i"'), env)
    assert (run.stdout, run.returncode) == ("### eth0\nzero\n### eth1\none\n", 3)
    assert _sh(each_port("tool", 'tool "$i"', keep_status=False), env).returncode == 0


def test_each_port_without_the_tool_is_silent(tmp_path):
    run = _sh(each_port("no-such-tool-here", 'no-such-tool-here "$i"'), {"PATH": str(tmp_path), "FC_ROOT": ""})
    assert (run.stdout, run.stderr, run.returncode) == ("", "", 0)
