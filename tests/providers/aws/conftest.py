"""AWS provider tests: boto3 against moto in server mode over HTTP for what moto implements (EC2 instances,
CreateCase, DescribeCases, ResolveCase, STS), and botocore's Stubber, which checks every request and response
against the service model, for what moto lacks (instance topology, capacity blocks, ReportInstanceStatus,
services, severities, attachments, communications). Presigned upload-link PUTs go to a local http.server.

Credentials are made at run time from random values, in the environment; the metadata service is disabled;
nothing leaves 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from awsfakes import Clients, UploadServer, write_config

from fabricase.config import Paths
from fabricase.providers import aws
from loopback import moto_server, random_aws_keys


@pytest.fixture(autouse=True)
def fake_aws_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials only; no shared config, no profile, no metadata service, no real region default."""
    nowhere = tmp_path_factory.mktemp("no-aws-config")
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                 "AWS_ENDPOINT_URL", "FABRICASE_DEBUG", "FABRICASE_DB"):
        monkeypatch.delenv(name, raising=False)
    key_id, secret = random_aws_keys()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(nowhere / "config"))


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def moto(moto_url: str) -> str:
    """A clean moto, with support cases frozen in their status (moto otherwise advances it on every read)."""
    httpx.post(f"{moto_url}/moto-api/reset").raise_for_status()
    httpx.post(f"{moto_url}/moto-api/state-manager/set-transition", json={
        "model_name": "support::case", "transition": {"progression": "manual", "times": 10**9}}).raise_for_status()
    return moto_url


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("FABRICASE_HOME", str(h))
    return h


@pytest.fixture
def paths(home: Path) -> Paths:
    return Paths(data=home, config=home).ensure()


@pytest.fixture
def profile(home: Path, moto: str) -> dict[str, Any]:
    return write_config(home, moto)


@pytest.fixture
def clients(profile: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Clients]:
    c = Clients(profile)
    monkeypatch.setattr(aws, "make_client", c.factory)
    yield c


@pytest.fixture
def provider(paths: Paths, clients: Clients) -> aws.AwsProvider:
    return aws.AwsProvider(paths, sleep=lambda s: None)


@pytest.fixture
def uploads() -> Iterator[UploadServer]:
    server = UploadServer()
    try:
        yield server
    finally:
        server.close()
