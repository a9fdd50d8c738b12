"""Fixtures for the GCP provider tests: the local fake of Google's APIs (gcp_fake) and credentials for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gcp_fake import NO_METADATA, PROJECT, serving


@pytest.fixture
def google():
    with serving() as g:
        yield g


@pytest.fixture
def no_adc(tmp_path, monkeypatch):
    """No Application Default Credentials anywhere: no key file, an empty gcloud config, no metadata server."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud-empty"))
    monkeypatch.setenv("GCE_METADATA_IP", NO_METADATA)
    monkeypatch.setenv("NO_GCE_CHECK", "true")


@pytest.fixture
def adc(tmp_path, monkeypatch, google) -> Path:
    """Application Default Credentials: a service-account key file (an obviously fake account, a key made here)
    whose token endpoint is the local server. The real credential chain runs, and no Google endpoint is reached
    (an authorized-user file would not do: google-auth always sends those to oauth2.googleapis.com)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = tmp_path / "adc.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": PROJECT, "private_key_id": "fake-key-id", "private_key": pem,
        "client_email": f"fabricase-test@{PROJECT}.iam.gserviceaccount.invalid", "client_id": "1",
        "token_uri": f"{google.base}/token",
    }))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud-empty"))
    monkeypatch.setenv("GCE_METADATA_IP", NO_METADATA)
    return path
