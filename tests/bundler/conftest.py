"""Fixtures of the upload tests: the clouds' metadata services and shared configs out of reach, and moto in server
mode on loopback with AWS keys made at run time from random values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopback import free_port, moto_server, random_aws_keys


@pytest.fixture
def no_cloud(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No profile, no shared config, and every metadata service pointed at a closed loopback port."""
    closed = f"127.0.0.1:{free_port()}"
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AZURE_STORAGE_CONNECTION_STRING",
                 "AZURE_STORAGE_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("GCE_METADATA_HOST", closed)
    monkeypatch.setenv("GCE_METADATA_IP", closed)
    monkeypatch.setenv("NO_GCE_CHECK", "True")


@pytest.fixture
def moto_url(no_cloud: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    key_id, secret = random_aws_keys()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with moto_server() as url:
        yield url
