"""Azure provider tests: the real SDKs (azure-mgmt-compute, azure-mgmt-support, azure-core's ARM pipeline with
its bearer-token policy and long-running-operation polling) and httpx against a local HTTPS server (azure_fake_arm),
with a fake TokenCredential. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import ipaddress
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fabricase.config import Paths
from fabricase.providers.azure import AzureProvider

sys.path.insert(0, str(Path(__file__).parent))
from azure_fake_arm import FakeArm  # noqa: E402
from azure_fakes import FakeCredential, write_config  # noqa: E402


@pytest.fixture(scope="session")
def tls(tmp_path_factory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1: the SDKs keep TLS and their real bearer-token policy."""
    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fabricase test ARM")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture
def arm(tls):
    with FakeArm(*tls) as server:
        yield server


@pytest.fixture
def paths(tmp_path, arm, tls) -> Paths:
    home = tmp_path / "home"
    write_config(home, arm, tls[0])
    return Paths(data=home, config=home)


@pytest.fixture
def delays() -> list[float]:
    return []


@pytest.fixture
def provider(paths, delays) -> AzureProvider:
    return AzureProvider(paths, credential=FakeCredential(), sleep=delays.append,
                         now=lambda: dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC))
