"""Numeric and duration options are finite, in range, and a bad value is a usage error (exit 2) that names the
option and the allowed range, before anything is captured or filed.

Every bad value is given with a malformed --hosts: if the option were accepted, the command would fail on the
nodeset instead (exit 1), so a test can never start a capture that sleeps for 1e9 seconds."""

from __future__ import annotations

import pytest

from fabricase.cli.options import LIMITS

NO_HOSTS = ("--hosts", "gpu[1-")  # a malformed nodeset: exit 1 once the options are accepted

BAD = {
    "--interval": ["nan", "inf", "-inf", "1e9", "-5", "3601", "9" * 400, "three"],
    "--since": ["-1", "0", "nan", "inf", "1e9", "8761"],
    "--timeout": ["0", "-5", "nan", "inf", "86401"],
    "--deadline": ["0", "-1", "nan", "inf", "1e12"],
    "--fanout": ["0", "-1", "100000", "4097", "2.5", "9" * 5000, "nan"],
}
GOOD = {"--interval": ["0", "0.5", "3600"], "--since": ["0.01", "24", "8760"], "--timeout": ["0.5", "86400"],
        "--deadline": ["1", "604800"], "--fanout": ["1", "4096"]}


def _usage_error(result, option: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    error = result.stderr.strip().splitlines()[-1]
    assert option in error and f"(allowed: {LIMITS[option].describe()})" in error, error
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("command", ["collect", "open", "watch"])
@pytest.mark.parametrize(("option", "value"), [(o, v) for o, values in BAD.items() for v in values])
def test_a_bad_capture_option_is_a_usage_error_naming_it(run, tmp_path, command, option, value):
    extra = {"open": ("--symptom", "x"), "watch": ("--textfile", str(tmp_path / "tf"), "--count", "1")}.get(command, ())
    _usage_error(run(command, *NO_HOSTS, *extra, option, value, code=None), option)


@pytest.mark.parametrize(("option", "value"), [(o, v) for o, values in GOOD.items() for v in values])
def test_a_value_in_range_is_accepted(run, option, value):
    result = run("collect", *NO_HOSTS, option, value, code=1)  # past the options, to the nodeset
    assert "malformed nodeset" in result.stderr or "nodeset" in result.stderr, result.stderr


@pytest.mark.parametrize(("args", "option"), [
    (("--count", "1", "--interval-s", "nan"), "--interval-s"), (("--count", "1", "--interval-s", "-1"), "--interval-s"),
    (("--count", "1", "--interval-s", "1e9"), "--interval-s"), (("--count", "0"), "--count"),
    (("--count", "1e99"), "--count"),
])
def test_watch_round_options(run, tmp_path, args, option):
    _usage_error(run("watch", *NO_HOSTS, "--textfile", str(tmp_path / "tf"), *args, code=None), option)


@pytest.mark.parametrize(("args", "option"), [
    (("--timeout", "0"), "--timeout"), (("--timeout", "nan"), "--timeout"), (("--timeout", "-5"), "--timeout"),
    (("--fanout", "0"), "--fanout"), (("--fanout", "100000"), "--fanout"),
])
def test_relay_options(run, args, option):
    base = {"--timeout": ("--fanout", "2"), "--fanout": ("--timeout", "5")}[option]
    _usage_error(run("relay", "--hosts", "gpu[1-", *base, *args, code=None), option)


@pytest.mark.parametrize(("option", "value"), [
    ("--older-than", "99999999999999w"), ("--older-than", "3651d"), ("--stale-after", "0d"),
    ("--stale-after", "1e9d"), ("--stale-after", "99999999999999999999999w"),
])
def test_tracker_ages_are_bounded(run, option, value):
    result = run("list", option, value, code=None)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    error = result.stderr.strip().splitlines()[-1]
    assert option in error and "allowed:" in error and "3650d" in error, error


def test_help_states_every_range(run):
    for command, options in (("collect", ("--interval", "--since", "--timeout", "--deadline", "--fanout")),
                             ("watch", ("--interval-s", "--count")), ("relay", ("--timeout", "--fanout"))):
        text = " ".join(run(command, "--help").stdout.split())
        for option in options:
            assert LIMITS[option].describe() in text, (command, option)
