"""`fabricase probe` and `open --probe` at the command line, without hosts: bad options are usage errors naming
the option; what cannot be probed is one line and exit 1, before any test runs."""

from __future__ import annotations

import pytest

from fabricase.cli.options import LIMITS

NO_HOSTS = ("--hosts", "gpu[1-")  # a malformed nodeset: exit 1 once the options are accepted


@pytest.mark.parametrize(("option", "value"), [
    ("--budget", "0"), ("--budget", "nan"), ("--budget", "2d"), ("--budget", "ten"), ("--test-timeout", "0"),
    ("--test-timeout", "inf"), ("--duration", "0"), ("--duration", "1.5"), ("--expect-busbw", "-1"),
    ("--expect-busbw", "nan"), ("--expect-gbps", "0"), ("--per-switch", "0"), ("--gid-index", "256"),
    ("--nccl-iters", "0"), ("--gpus-per-host", "65"), ("--qps", "0"), ("--nccl-sizes", "8G"),
    ("--nccl-sizes", "1M:lots"), ("--test", "everything"), ("--rdma-tool", "ib_atomic_bw"),
])
def test_a_bad_probe_option_is_a_usage_error_naming_it(run, option, value):
    for command in (("probe",), ("open", "--symptom", "x", "--probe")):
        result = run(*command, *NO_HOSTS, option, value, code=None)
        assert result.exit_code == 2, (command, option, value, result.stdout, result.stderr)
        assert option in result.stderr and "Traceback" not in result.stderr


def test_help_states_every_probe_range(run):
    text = " ".join(run("probe", "--help").stdout.split())
    for option in ("--test-timeout", "--duration", "--expect-busbw", "--per-switch", "--nccl-iters"):
        assert LIMITS[option].describe() in text, option
    assert "1s to 24h" in text and "--bisect" in text
    assert "--probe" in " ".join(run("open", "--help").stdout.split())


def test_probe_refuses_a_replay_and_a_gateway(run, tmp_path):
    result = run("probe", "--replay", str(tmp_path), code=2)
    assert "probe runs tests on live hosts" in result.stderr
    result = run("open", "--replay", str(tmp_path), "--symptom", "x", "--probe", code=2)
    assert "--probe runs tests on live hosts" in result.stderr


def test_one_host_is_not_enough_for_tests_between_hosts(run, host_tree):
    result = run("probe", "--hosts", "localhost", "--root", str(host_tree), "--interval", "0", "--collector",
                 "netdev", "--test", "tcp", code=1)
    assert result.stderr.strip().splitlines()[-1] == (
        "fabricase: error: --hosts: a probe between hosts needs at least 2 captured hosts (got 1)")
    assert "Traceback" not in result.stderr
