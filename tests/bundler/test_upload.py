"""Uploads of the full bundle to the user's own storage through a presigned PUT URL (bundler/upload.py).

S3: boto3 against moto in server mode on loopback; the presigned PUT and GET URLs are used for a real PUT and GET
of the bundle's bytes. GCS and Azure: a local HTTP server stands in for the store and checks what the real store
checks of a presigned PUT: for GCS the V4 query parameters, and the RSA signature itself against the service
account's public key (the canonical request rebuilt from the request as received); for Azure the SAS parameters
(sv, sr, sp with write, se, sig) and the x-ms-blob-type header. Credentials are made at run time from random
values: a generated RSA key for the GCS service account, a random base64 account key for Azure, random AWS keys.
Nothing leaves 127.0.0.1; the metadata servers are pointed at a closed loopback port.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest

from fabricase.bundler.upload import PresignedRequest, object_id, parse_upload_target, upload_bundle, upload_file
from fabricase.errors import BundleError, ConfigError

BODY = secrets.token_bytes(3 * 1024 * 1024 + 17)  # more than one streamed chunk


pytestmark = pytest.mark.usefixtures("no_cloud")


@pytest.fixture
def bundle_file(tmp_path: Path) -> Path:
    path = tmp_path / "FC-1-1-full-0123456789ab.tar.gz"
    path.write_bytes(BODY)
    return path


class Store:
    """A loopback object store: `check(handler, query)` returns None to accept a PUT or a reason to refuse it."""

    def __init__(self, check) -> None:
        self.objects: dict[str, bytes] = {}
        self.seen: list[dict] = []
        store = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_PUT(self) -> None:
                parts = urlsplit(self.path)
                length = self.headers.get("Content-Length")
                body = self.rfile.read(int(length)) if length else b""
                store.seen.append({"path": parts.path, "query": parts.query, "headers": dict(self.headers)})
                problem = "no Content-Length" if length is None else None
                problem = problem or ("chunked" if "chunked" in self.headers.get("Transfer-Encoding", "") else None)
                problem = problem or check(self, parts)
                if problem:
                    self.send_response(403)
                    self.end_headers()
                    self.wfile.write(problem.encode())
                    return
                store.objects[unquote(parts.path)] = body
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- S3 through moto ------------------------------------------------------------------------------------------


def test_s3_presigned_put_and_get_move_the_bytes(moto_url: str, bundle_file: Path) -> None:
    import boto3

    boto3.client("s3", endpoint_url=moto_url).create_bucket(Bucket="evidence")
    target = parse_upload_target("s3://evidence/cases/fleet", endpoint=moto_url, want_get=True)
    done = upload_bundle(bundle_file, target)
    assert done.object == f"{moto_url}/evidence/cases/fleet/{bundle_file.name}"
    assert done.sha256 == hashlib.sha256(BODY).hexdigest() and done.size == len(BODY)
    stored = boto3.client("s3", endpoint_url=moto_url).get_object(Bucket="evidence",
                                                                   Key=f"cases/fleet/{bundle_file.name}")
    assert stored["Body"].read() == BODY
    assert "X-Amz-Signature=" in done.get_url and "X-Amz-Expires=604800" in done.get_url
    assert httpx.get(done.get_url).content == BODY  # what the provider would fetch


def test_s3_refusal_names_the_object_not_the_signature(moto_url: str, bundle_file: Path) -> None:
    target = parse_upload_target("s3://no-such-bucket/x/", endpoint=moto_url)
    with pytest.raises(BundleError) as err:
        upload_bundle(bundle_file, target)
    assert "HTTP 404" in err.value.message and "Signature" not in str(err.value)
    assert err.value.where == f"{moto_url}/no-such-bucket/x/{bundle_file.name}"


# -- GCS: V4 signed URL, the signature verified with the service account's public key ---------------------------


@pytest.fixture
def gcs_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    email = f"fabricase-{secrets.token_hex(4)}@test-project.iam.gserviceaccount.com"
    info = {"type": "service_account", "project_id": "test-project", "private_key_id": secrets.token_hex(20),
            "private_key": pem, "client_email": email, "client_id": str(secrets.randbelow(10**20)),
            "token_uri": "http://127.0.0.1:1/token"}
    path = tmp_path / "sa.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return key.public_key(), email


def _gcs_check(public_key, email: str):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    def check(handler, parts) -> str | None:
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if q.get("X-Goog-Algorithm") != "GOOG4-RSA-SHA256":
            return "X-Goog-Algorithm"
        date = q.get("X-Goog-Date", "")
        if not re.fullmatch(r"\d{8}T\d{6}Z", date):
            return "X-Goog-Date"
        if q.get("X-Goog-Credential") != f"{email}/{date[:8]}/auto/storage/goog4_request":
            return "X-Goog-Credential"
        if not q.get("X-Goog-Expires", "").isdigit() or not 0 < int(q["X-Goog-Expires"]) <= 604800:
            return "X-Goog-Expires"
        if not re.fullmatch(r"[0-9a-f]{512}", q.get("X-Goog-Signature", "")):
            return "X-Goog-Signature"
        signed = q.get("X-Goog-SignedHeaders", "")
        canonical_query = "&".join(p for p in parts.query.split("&") if not p.startswith("X-Goog-Signature="))
        headers = "".join(f"{h}:{handler.headers[h].strip()}\n" for h in signed.split(";"))
        canonical = "\n".join(["PUT", parts.path, canonical_query, headers, signed, "UNSIGNED-PAYLOAD"])
        scope = f"{date[:8]}/auto/storage/goog4_request"
        to_sign = "\n".join(["GOOG4-RSA-SHA256", date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        try:
            public_key.verify(bytes.fromhex(q["X-Goog-Signature"]), to_sign.encode(), padding.PKCS1v15(),
                              hashes.SHA256())
        except Exception:
            return "signature does not match"
        return None

    return check


def test_gcs_signed_put_verifies_against_the_service_account_key(gcs_account, bundle_file: Path) -> None:
    store = Store(_gcs_check(*gcs_account))
    try:
        target = parse_upload_target("gs://evidence-bucket/cases/", endpoint=store.url)
        done = upload_bundle(bundle_file, target)
    finally:
        store.close()
    key = f"/evidence-bucket/cases/{bundle_file.name}"
    assert store.objects[key] == BODY
    assert done.object == store.url + key and done.sha256 == hashlib.sha256(BODY).hexdigest()
    assert "?" not in done.object


def test_gcs_store_refuses_a_tampered_signature(gcs_account, bundle_file: Path) -> None:
    from fabricase.bundler.upload import presign

    store = Store(_gcs_check(*gcs_account))
    try:
        target = parse_upload_target("gs://evidence-bucket/cases/", endpoint=store.url)
        good = presign(target, bundle_file.name)
        bad = re.sub(r"X-Goog-Signature=([0-9a-f])", lambda m: "X-Goog-Signature=" + "0123"[int(m[1], 16) % 3 + 1],
                     good.url)
        with pytest.raises(BundleError, match="HTTP 403"):
            upload_file(bundle_file, PresignedRequest(bad))
    finally:
        store.close()
    assert not store.objects


# -- Azure: SAS for a block blob --------------------------------------------------------------------------------


def _azure_check(handler, parts) -> str | None:
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    if handler.headers.get("x-ms-blob-type") != "BlockBlob":
        return "x-ms-blob-type"
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", q.get("sv", "")):
        return "sv"
    if q.get("sr") != "b" or "w" not in q.get("sp", ""):
        return "sr/sp"
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", q.get("se", "")):
        return "se"
    try:
        if len(base64.b64decode(q.get("sig", ""), validate=True)) != 32:  # HMAC-SHA256
            return "sig"
    except ValueError:
        return "sig"
    return None


def test_azure_sas_put_carries_what_blob_storage_checks(monkeypatch: pytest.MonkeyPatch, bundle_file: Path) -> None:
    monkeypatch.setenv("AZURE_STORAGE_KEY", base64.b64encode(os.urandom(64)).decode())
    store = Store(_azure_check)
    try:
        target = parse_upload_target("az://fabacct/evidence/cases/", endpoint=f"{store.url}/fabacct")
        done = upload_bundle(bundle_file, target)
    finally:
        store.close()
    key = f"/fabacct/evidence/cases/{bundle_file.name}"
    assert store.objects[key] == BODY and done.object == store.url + key
    assert store.seen[0]["headers"]["Content-Length"] == str(len(BODY))


# -- the user's own presigned URL, and the target forms ---------------------------------------------------------


def test_a_users_presigned_url_is_used_as_given(bundle_file: Path) -> None:
    store = Store(lambda handler, parts: None if "sig=abc" in parts.query else "unsigned")
    try:
        url = f"{store.url}/bucket/where/it/goes.tar.gz?sig=abc&exp=1"
        done = upload_bundle(bundle_file, parse_upload_target(url))
    finally:
        store.close()
    assert store.objects["/bucket/where/it/goes.tar.gz"] == BODY
    assert done.object == object_id(url) == f"{store.url}/bucket/where/it/goes.tar.gz"


@pytest.mark.parametrize(("text", "store", "bucket", "prefix"), [
    ("s3://b/p", "s3", "b", "p/"), ("gs://b/", "gs", "b", ""), ("az://acct/cont/a/b/", "az", "acct/cont", "a/b/"),
])
def test_targets_parse(text: str, store: str, bucket: str, prefix: str) -> None:
    t = parse_upload_target(text)
    assert (t.store, t.bucket, t.prefix) == (store, bucket, prefix)


@pytest.mark.parametrize("text", ["ftp://x/y", "s3://", "az://acct", "https://example.invalid/no-query"])
def test_bad_targets_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_upload_target(text)


def test_s3_and_gcs_signatures_last_seven_days_at_most() -> None:
    with pytest.raises(ConfigError, match="7 days"):
        parse_upload_target("s3://b/p/", expires_s=8 * 86400)
    assert parse_upload_target("az://a/c/", expires_s=30 * 86400).expires_s == 30 * 86400


@pytest.mark.parametrize(("text", "module", "extra"), [
    ("gs://b/p/", "google.cloud.storage", "upload-gcs"), ("az://a/c/p/", "azure.storage.blob", "upload-azure"),
    ("s3://b/p/", "boto3", "aws"),
])
def test_a_missing_sdk_names_its_extra(monkeypatch: pytest.MonkeyPatch, bundle_file: Path, text: str, module: str,
                                       extra: str) -> None:
    import sys

    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError, as when it is not installed
    with pytest.raises(ConfigError, match=re.escape(f"pip install 'fabricase[{extra}]'")):
        upload_bundle(bundle_file, parse_upload_target(text))
