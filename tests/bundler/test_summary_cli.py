"""`bundle`, `verify`, `analyze` and `open` on the summary form through the command line: a desk whose limits the
full bundle exceeds (the outbox desk's limits made small, as a desk reporting them at run time would) gets a
summary bundle; the full one is kept beside it, or uploaded to S3 (moto on loopback) and named by object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from summary_helpers import HOSTS, make_fleet

from fabricase.bundler.limits import DeskLimits
from fabricase.cli import cli
from fabricase.providers.desks.outbox import OutboxDesk


@pytest.fixture(scope="module")
def capture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "capture"
    make_fleet(root)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("FABRICASE_HOME", str(h))
    for name in ("FABRICASE_DEBUG", "FABRICASE_DB"):
        monkeypatch.delenv(name, raising=False)
    return h


@pytest.fixture
def small_outbox(monkeypatch: pytest.MonkeyPatch) -> DeskLimits:
    limits = DeskLimits("outbox", body_max_chars=None, attachment_max_bytes=40_000, max_attachments=3)
    monkeypatch.setattr(OutboxDesk, "limits", limits)
    return limits


def cli_run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (args, result.stdout, result.stderr)
    return result.stdout


def test_bundle_summary_verify_and_analyze(home: Path, capture_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.tar.gz"
    made = json.loads(cli_run("bundle", str(capture_dir), "-o", str(out), "--summary", "--json"))
    assert made["form"] == "summary" and made["full_bundle"] is None
    assert made["summary"]["hosts_targeted"] == HOSTS
    said = cli_run("verify", str(out))
    n = made["summary"]["hosts_included"]
    assert f"summary bundle: {n} of {HOSTS} hosts; the rest left out" in said
    analyzed = json.loads(cli_run("analyze", str(out), "--json"))
    assert len(analyzed["hosts"]) == n
    assert not [f for f in analyzed["findings"] if f["kind"] == "host-unreachable"]
    assert analyzed["summary"]["hosts_targeted"] == HOSTS
    # People are told what the bundle left out, by analyze on stdout and by draft on stderr.
    assert f"summary bundle: {n} of {HOSTS} hosts" in cli_run("analyze", str(out))
    drafted = CliRunner().invoke(cli, ["draft", str(out)], catch_exceptions=False)
    assert drafted.exit_code == 0 and f"summary bundle: {n} of {HOSTS} hosts" in drafted.stderr


def test_bundle_past_the_desk_limit_keeps_the_full_one(home: Path, capture_dir: Path, tmp_path: Path,
                                                       small_outbox: DeskLimits) -> None:
    made = json.loads(cli_run("bundle", str(capture_dir), "-o", str(tmp_path / "b.tar.gz"), "--json"))
    assert made["form"] == "summary" and made["size"] <= 3 * small_outbox.attachment_max_bytes
    full = Path(made["full_bundle"]["path"])
    assert full.is_file() and full.stat().st_size == made["full_bundle"]["size"]
    assert json.loads(cli_run("verify", str(full), "--json"))["summary"] is None
    forced = json.loads(cli_run("bundle", str(capture_dir), "-o", str(tmp_path / "f.tar.gz"), "--full-bundle",
                                "--json"))
    assert forced["form"] == "full" and forced["size"] > 3 * small_outbox.attachment_max_bytes


def test_bundle_uploads_the_full_one_to_s3(home: Path, capture_dir: Path, tmp_path: Path, moto_url: str,
                                           small_outbox: DeskLimits) -> None:
    import boto3
    import httpx

    boto3.client("s3", endpoint_url=moto_url).create_bucket(Bucket="fleet-evidence")
    made = json.loads(cli_run("bundle", str(capture_dir), "-o", str(tmp_path / "b.tar.gz"), "--upload-to",
                              "s3://fleet-evidence/cases/", "--upload-endpoint", moto_url, "--presign-get",
                              "--expires", "2d", "--json"))
    full = made["full_bundle"]
    assert made["uploaded"]["object"] == full["object"] == f"{moto_url}/fleet-evidence/cases/{full['name']}"
    assert made["summary"]["full_bundle"]["object"] == full["object"]  # the summary names where the rest is
    fetched = httpx.get(made["uploaded"]["get_url"]).content
    assert fetched == Path(full["path"]).read_bytes()
    assert "X-Amz-Expires=172800" in made["uploaded"]["get_url"]


def test_open_past_the_desk_limit_attaches_the_summary(home: Path, capture_dir: Path, tmp_path: Path,
                                                       small_outbox: DeskLimits) -> None:
    opened = json.loads(cli_run("open", "--replay", str(capture_dir), "--symptom", "busbw fell", "--dry-run",
                                "--json"))
    assert opened["form"] == "summary"
    assert Path(opened["bundle_path"]).stat().st_size <= 3 * small_outbox.attachment_max_bytes
    assert Path(opened["full_bundle"]["path"]).is_file()


def test_contradicting_bundle_options_are_refused(home: Path, capture_dir: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "x.tar.gz")
    cli_run("bundle", str(capture_dir), "-o", out, "--summary", "--full-bundle", code=2)
    cli_run("bundle", str(capture_dir), "-o", out, "--presign-get", code=2)
    cli_run("bundle", str(capture_dir), "-o", out, "--upload-to", "s3://b/", "--expires", "9d", code=1)
