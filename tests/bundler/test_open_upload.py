"""(For after the flow patch: tests/bundler/test_open_upload.py) `open` at scale: past the desk's limits it
attaches the summary bundle, uploads the full one to the user's S3 (moto on loopback) and the ticket names it by
object, sha256 and size."""

from __future__ import annotations

import json
from pathlib import Path

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
