"""(For after the flow patch: tests/bundler/test_open_upload.py) `open` at scale: past the desk's limits it
attaches the summary bundle, uploads the full one to the user's S3 (moto on loopback) and the ticket names it by
object, sha256 and size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_summary_cli import capture_dir, cli_run, home, small_outbox  # noqa: F401  (shared fixtures)

from fabricase.bundler.limits import DeskLimits


def test_open_uploads_the_full_bundle_and_the_ticket_names_it(home: Path, capture_dir: Path,  # noqa: F811
                                                              moto_url: str, small_outbox: DeskLimits) -> None:  # noqa: F811
    import boto3

    boto3.client("s3", endpoint_url=moto_url).create_bucket(Bucket="fleet-evidence")
    opened = json.loads(cli_run("open", "--replay", str(capture_dir), "--symptom", "busbw fell", "--dry-run",
                                "--upload-to", "s3://fleet-evidence/open/", "--upload-endpoint", moto_url, "--json"))
    assert opened["form"] == "summary"
    full = opened["full_bundle"]
    assert full["object"].startswith(f"{moto_url}/fleet-evidence/open/")
    ticket = Path(opened["ticket_path"]).read_text()
    assert f"sha256 {full['sha256']}" in ticket and full["object"] in ticket


def test_open_summary_on_request(home: Path, capture_dir: Path) -> None:  # noqa: F811
    opened = json.loads(cli_run("open", "--replay", str(capture_dir), "--symptom", "x", "--dry-run",
                                "--summary-bundle", "--json"))
    assert opened["form"] == "summary" and opened["full_bundle"] is None


def _config(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(text)


def test_configured_upload_to_is_the_default(home: Path, capture_dir: Path,  # noqa: F811
                                            moto_url: str, small_outbox: DeskLimits) -> None:  # noqa: F811
    import boto3

    boto3.client("s3", endpoint_url=moto_url).create_bucket(Bucket="team-evidence")
    _config(home, f'[bundle]\nupload_to = "s3://team-evidence/fc/"\nupload_endpoint = "{moto_url}"\n'
                  'expires = "2d"\npresign_get = true\n')
    opened = json.loads(cli_run("open", "--replay", str(capture_dir), "--symptom", "busbw fell", "--dry-run",
                                "--json"))
    full = opened["full_bundle"]
    assert opened["form"] == "summary" and full["object"].startswith(f"{moto_url}/team-evidence/fc/")
    assert opened["uploaded"]["get_url"] and "X-Amz-Expires=172800" in opened["uploaded"]["get_url"]
    body = boto3.client("s3", endpoint_url=moto_url).get_object(Bucket="team-evidence",
                                                                 Key=full["object"].split("/team-evidence/")[1])
    assert len(body["Body"].read()) == full["size"]


def test_no_upload_keeps_the_full_bundle_local_despite_the_config(home: Path, capture_dir: Path,  # noqa: F811
                                                                 moto_url: str,
                                                                 small_outbox: DeskLimits) -> None:  # noqa: F811
    _config(home, f'[bundle]\nupload_to = "s3://team-evidence/fc/"\nupload_endpoint = "{moto_url}"\n')
    opened = json.loads(cli_run("open", "--replay", str(capture_dir), "--symptom", "x", "--dry-run", "--no-upload",
                                "--json"))
    assert opened["form"] == "summary" and opened["uploaded"] is None
    assert Path(opened["full_bundle"]["path"]).is_file()
    out = cli_run("open", "--replay", str(capture_dir), "--symptom", "x", "--dry-run", "--no-upload",
                  "--upload-to", "s3://b/", code=2)
    assert out == ""


def test_a_command_line_upload_wins_over_the_config(home: Path, capture_dir: Path, tmp_path: Path,  # noqa: F811
                                                   moto_url: str, small_outbox: DeskLimits) -> None:  # noqa: F811
    import boto3

    boto3.client("s3", endpoint_url=moto_url).create_bucket(Bucket="mine")
    _config(home, '[bundle]\nupload_to = "s3://not-this-one/"\npresign_get = true\n')
    made = json.loads(cli_run("bundle", str(capture_dir), "-o", str(tmp_path / "b.tar.gz"), "--upload-to",
                              "s3://mine/x/", "--upload-endpoint", moto_url, "--json"))
    assert made["uploaded"]["object"].startswith(f"{moto_url}/mine/x/")
    assert made["uploaded"]["get_url"] is None  # the config's presign_get came with its upload_to, not alone


@pytest.mark.parametrize(("text", "said"), [
    ('[bundle]\nupload-to = "s3://b/"\n', "[bundle] has no setting 'upload-to'"),
    ("[bundle]\nupload_to = 5\n", "[bundle] upload_to must be a non-empty string"),
    ('[bundle]\nupload_to = "s3://b/"\npresign_get = "yes"\n', "[bundle] presign_get must be true or false"),
    ('[bundle]\nupload_to = "s3://b/"\nexpires = "forever"\n', "[bundle] expires: "),
    ('bundle = "s3://b/"\n', "[bundle] must be a table"),
])
def test_a_bad_bundle_setting_is_one_line_naming_the_file(home: Path, capture_dir: Path, tmp_path: Path,  # noqa: F811
                                                          text: str, said: str) -> None:
    from click.testing import CliRunner

    from fabricase.cli import cli

    _config(home, text)
    result = CliRunner().invoke(cli, ["bundle", str(capture_dir), "-o", str(tmp_path / "b.tar.gz")])
    assert result.exit_code != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "config.toml" in lines[0], result.stderr
    assert not (tmp_path / "b.tar.gz").exists()
