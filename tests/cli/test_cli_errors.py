"""Bad input: one line naming the culprit, exit 1 (or 2 for usage), never a traceback."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase.cli import cli


def _one_line_error(result, code: int, *needles: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    err = result.stderr.strip()
    assert "Traceback" not in err + result.stdout
    lines = err.splitlines()
    assert len(lines) >= 1
    last = lines[-1]
    for needle in needles:
        assert needle in last, (needle, last)


def test_unknown_command_and_flag_are_usage_errors(run):
    _one_line_error(run("frobnicate", code=None), 2, "No such command")
    _one_line_error(run("open", "--hosts", "localhost", "--symptom", "x", "--nope", code=None), 2, "--nope")


@pytest.mark.parametrize("spec,needle", [("", "empty host list"), ("gpu[001-", "malformed nodeset"),
                                         ("gpu[9-1]", "malformed nodeset")])
def test_bad_nodesets(run, spec, needle):
    _one_line_error(run("collect", "--hosts", spec, code=None), 1, "fabricase: error: --hosts", needle)


def test_remote_hosts_with_a_broken_ssh_config(run, tmp_path):
    missing = tmp_path / "no-such-ssh-config"
    result = run("collect", "--hosts", "gpu[001-002]", "--ssh-option", f"-F {missing}", code=None)
    _one_line_error(result, 1, "fabricase: error:", "ssh")


def test_replay_of_missing_and_foreign_directories(run, tmp_path):
    _one_line_error(run("analyze", str(tmp_path / "missing"), code=None), 1, "missing", "no such directory")
    _one_line_error(run("open", "--replay", str(tmp_path), "--symptom", "x", code=None), 1,
                    str(tmp_path), "not a capture directory")


def test_capture_with_a_corrupt_item(run, tmp_path, host_tree):
    cap = tmp_path / "D"
    run("collect", "--hosts", "localhost", "-o", str(cap), "--interval", "0", "--root", str(host_tree))
    stream = cap / "hosts/localhost/stream.fc1"
    raw = stream.read_bytes()
    at = raw.index(b"/sys/class/net/eth1/operstate\n") + len(b"/sys/class/net/eth1/operstate\n")
    stream.write_bytes(raw[:at] + b"dawn" + raw[at + 4:])  # "down" -> "dawn": same size
    _one_line_error(run("analyze", str(cap), code=None), 1, "eth1/operstate", "sha256")
    stream.write_bytes(raw[:at + 2])
    _one_line_error(run("open", "--replay", str(cap), "--symptom", "x", code=None), 1, "stream.fc1", "short")


def test_verify_rejects_non_tar_truncated_and_tampered(run, tmp_path):
    out = run.json("open", "--hosts", "localhost", "--symptom", "x", "--interval", "0")
    bundle = Path(out["bundle_path"])
    junk = tmp_path / "junk.tar.gz"
    junk.write_text("this is not a bundle\n")
    _one_line_error(run("verify", str(junk), code=None), 1, "junk.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2])
    _one_line_error(run("verify", str(cut), code=None), 1, "cut.tar.gz")
    plain = tmp_path / "plain.tar.gz"
    plain.write_bytes(gzip.compress(b"\0" * 1024))
    _one_line_error(run("verify", str(plain), code=None), 1, "plain.tar.gz")
    _one_line_error(run("verify", str(tmp_path / "absent.tar.gz"), code=None), 1, "absent.tar.gz")


def test_unwritable_home(tmp_path, monkeypatch):
    blocker = tmp_path / "afile"
    blocker.write_text("a file where a folder should be")
    monkeypatch.setenv("FABRICASE_HOME", str(blocker / "home"))
    result = CliRunner().invoke(cli, ["list"])
    _one_line_error(result, 1, "fabricase: error:", str(blocker / "home"))


def test_show_unknown_escalation(run):
    _one_line_error(run("show", "FC-404", code=None), 1, "FC-404")
    _one_line_error(run("resolve", "nonsense", code=None), 1, "nonsense")


def test_debug_shows_the_traceback(run, tmp_path):
    result = CliRunner().invoke(cli, ["--debug", "analyze", str(tmp_path / "missing")])
    assert result.exit_code != 0 and result.exception is not None
    assert type(result.exception).__name__ == "TargetError"
