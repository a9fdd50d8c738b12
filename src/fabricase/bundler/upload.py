"""Upload a (redacted) bundle to the user's own object storage through a presigned PUT URL.

The user names a place (`s3://bucket/prefix/`, `gs://bucket/prefix/`, `az://account/container/prefix/`) and
fabricase signs the PUT itself with the user's standard credential chain, through the store's SDK (an optional
extra, imported only here, with an install hint): boto3 `generate_presigned_url("put_object")`,
google-cloud-storage `Blob.generate_signed_url(version="v4", method="PUT")`, azure-storage-blob
`generate_blob_sas` (an account key from AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_KEY, else a user
delegation key through DefaultAzureCredential). Or the user gives a presigned PUT URL they made (`--upload-url`).
Either way the bytes go with one streamed httpx PUT carrying Content-Length (S3 refuses chunked uploads to a
presigned URL) and the headers the store needs (`x-ms-blob-type: BlockBlob` for Azure), and the reply is
checked. The object is then named by its URL without the query string (no signature in any ticket), its sha256
and size. A presigned GET URL for the provider is made on request; S3 and GCS V4 signatures last 7 days at most.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from fabricase.errors import BundleError, ConfigError

__all__ = ["MAX_SIGNED_EXPIRY_S", "DEFAULT_EXPIRY_S", "PresignedRequest", "UploadTarget", "Uploaded", "object_id",
           "parse_upload_target", "presign", "upload_bundle", "upload_file"]

DEFAULT_EXPIRY_S = 7 * 24 * 3600
MAX_SIGNED_EXPIRY_S = {"s3": 7 * 24 * 3600, "gs": 7 * 24 * 3600}  # SigV4 and GCS V4; an Azure SAS has no cap
_HINTS = {"s3": "pip install 'fabricase[aws]'", "gs": "pip install 'fabricase[upload-gcs]'",
          "az": "pip install 'fabricase[upload-azure]'"}
_CHUNK = 1 << 20
_PUT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class UploadTarget:
    """Where the full bundle goes: a store (`s3`, `gs`, `az`) with bucket (Azure: `account/container`) and
    key prefix, or `url`, a presigned PUT URL the user made. endpoint: another base URL for the store (an
    S3-compatible one, a GCS or Azurite emulator)."""

    store: str  # "s3" | "gs" | "az" | "url"
    bucket: str = ""
    prefix: str = ""
    url: str = ""
    endpoint: str | None = None
    expires_s: int = DEFAULT_EXPIRY_S
    want_get: bool = False  # also make a presigned GET URL for the provider


@dataclass(frozen=True)
class PresignedRequest:
    url: str
    method: str = "PUT"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Uploaded:
    """The uploaded object as tickets and manifests name it: `object` is its URL without the query string."""

    object: str
    sha256: str
    size: int
    get_url: str | None = None  # presigned GET URL for the provider (a secret until it expires: not in bundles)
    get_expires_at: str | None = None

    def reference(self) -> dict[str, Any]:
        """What a bundle's manifest or a ticket may carry (never the signed URL)."""
        return {"object": self.object, "sha256": self.sha256, "size": self.size}


def parse_upload_target(text: str, *, endpoint: str | None = None, expires_s: int = DEFAULT_EXPIRY_S,
                        want_get: bool = False) -> UploadTarget:
    """`s3://bucket/prefix/`, `gs://bucket/prefix/`, `az://account/container/prefix/`, or an https URL (a
    presigned PUT URL made by the user); a ConfigError naming the forms otherwise."""
    if isinstance(expires_s, bool) or not isinstance(expires_s, int) or expires_s <= 0:
        raise ConfigError(f"upload expiry must be a positive number of seconds, not {expires_s!r}", where="--expires")
    parts = urlsplit(text or "")
    store = parts.scheme.lower()
    if store in ("http", "https"):
        if not parts.netloc or not parts.query:
            raise ConfigError("an upload URL must be a presigned PUT URL (with its signature query)",
                              where="--upload-url")
        if want_get:
            raise ConfigError("a GET URL cannot be made for a presigned PUT URL you made: make it yourself",
                              where="--upload-url")
        return UploadTarget("url", url=text, expires_s=expires_s)
    if store not in _HINTS or not parts.netloc:
        raise ConfigError(f"cannot upload to {text!r}: use s3://bucket/prefix/, gs://bucket/prefix/ or "
                          "az://account/container/prefix/", where="--upload-to")
    cap = MAX_SIGNED_EXPIRY_S.get(store)
    if cap is not None and expires_s > cap:
        raise ConfigError(f"{store}:// signatures last at most {cap} seconds (7 days), not {expires_s}",
                          where="--expires")
    path = parts.path.lstrip("/")
    bucket = parts.netloc
    if store == "az":
        container, _, path = path.partition("/")
        if not container:
            raise ConfigError(f"az:// needs an account and a container: {text!r}", where="--upload-to")
        bucket = f"{parts.netloc}/{container}"
    prefix = path if not path or path.endswith("/") else path + "/"
    return UploadTarget(store, bucket=bucket, prefix=prefix, endpoint=endpoint, expires_s=expires_s,
                        want_get=want_get)


def object_id(url: str) -> str:
    """A presigned URL without its query and fragment: the object's name, with no signature in it."""
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, p.path, "", ""))


def _sdk(store: str, module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"uploading to {store}:// needs {module.split('.')[0]}: {_HINTS[store]}") from exc


def presign(target: UploadTarget, name: str, method: str = "PUT") -> PresignedRequest:
    """A presigned request for object `prefix + name` (PUT to upload, GET for the provider)."""
    if target.store == "url":
        return PresignedRequest(target.url)
    key = target.prefix + name
    signer = {"s3": _presign_s3, "gs": _presign_gcs, "az": _presign_azure}[target.store]
    try:
        return signer(target, key, method)
    except (ConfigError, BundleError):
        raise
    except Exception as exc:  # the SDK's own errors (no credentials, a key that cannot sign) become ours
        raise BundleError(f"cannot sign a {method} URL ({type(exc).__name__}: {str(exc)[:200]})",
                          where=f"{target.store}://{target.bucket}/{key}") from exc


def _presign_s3(target: UploadTarget, key: str, method: str) -> PresignedRequest:
    boto3 = _sdk("s3", "boto3")
    from botocore.config import Config

    # SigV4 always (boto3 may sign a presigned S3 URL with SigV2 otherwise, which newer regions refuse)
    client = boto3.client("s3", config=Config(signature_version="s3v4"),
                          **({"endpoint_url": target.endpoint} if target.endpoint else {}))
    operation = "put_object" if method == "PUT" else "get_object"
    url = client.generate_presigned_url(operation, Params={"Bucket": target.bucket, "Key": key},
                                        ExpiresIn=target.expires_s, HttpMethod=method)
    return PresignedRequest(url, method)


def _presign_gcs(target: UploadTarget, key: str, method: str) -> PresignedRequest:
    storage = _sdk("gs", "google.cloud.storage")
    client = storage.Client()
    blob = client.bucket(target.bucket).blob(key)
    extra = {"api_access_endpoint": target.endpoint} if target.endpoint else {}
    url = blob.generate_signed_url(version="v4", method=method, expiration=timedelta(seconds=target.expires_s),
                                   **extra)
    return PresignedRequest(url, method)


def _azure_key(account: str) -> str | None:
    """The account key of the standard environment (a connection string, else AZURE_STORAGE_KEY), or None."""
    conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "")
    fields = dict(part.split("=", 1) for part in conn.split(";") if "=" in part)
    if fields.get("AccountKey") and fields.get("AccountName", account) == account:
        return fields["AccountKey"]
    return os.environ.get("AZURE_STORAGE_KEY") or None


def _presign_azure(target: UploadTarget, key: str, method: str) -> PresignedRequest:
    blob = _sdk("az", "azure.storage.blob")
    account, container = target.bucket.split("/", 1)
    base = (target.endpoint or f"https://{account}.blob.core.windows.net").rstrip("/")
    now = datetime.now(UTC)
    expiry = now + timedelta(seconds=target.expires_s)
    permission = blob.BlobSasPermissions(write=True, create=True) if method == "PUT" else \
        blob.BlobSasPermissions(read=True)
    account_key = _azure_key(account)
    if account_key is not None:
        sas = blob.generate_blob_sas(account, container, key, account_key=account_key, permission=permission,
                                     expiry=expiry, start=now - timedelta(minutes=5))
    else:  # Entra ID: a user delegation key through the user's DefaultAzureCredential
        identity = _sdk("az", "azure.identity")
        service = blob.BlobServiceClient(base, credential=identity.DefaultAzureCredential())
        delegation = service.get_user_delegation_key(now - timedelta(minutes=5), expiry)
        sas = blob.generate_blob_sas(account, container, key, user_delegation_key=delegation,
                                     permission=permission, expiry=expiry)
    url = f"{base}/{quote(container)}/{quote(key)}?{sas}"
    headers = {"x-ms-blob-type": "BlockBlob"} if method == "PUT" else {}
    return PresignedRequest(url, method, headers)


def _chunks(path: Path, digest: Any) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            yield chunk


def upload_file(path: Path, request: PresignedRequest, *, transport: Any = None) -> Uploaded:
    """PUT the file to the presigned URL, streamed, with its Content-Length; a BundleError naming the object
    (never the signature) when the store refuses it. The sha256 is of the bytes sent."""
    import httpx

    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BundleError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    where = object_id(request.url)
    digest = hashlib.sha256()
    headers = {"Content-Length": str(size), "Content-Type": "application/gzip", **request.headers}
    try:
        with httpx.Client(timeout=_PUT_TIMEOUT_S, transport=transport) as client:
            reply = client.put(request.url, content=_chunks(path, digest), headers=headers)
    except httpx.HTTPError as exc:
        raise BundleError(f"upload failed ({type(exc).__name__}: {str(exc)[:200]})", where=where) from exc
    if not 200 <= reply.status_code < 300:
        raise BundleError(f"upload refused: HTTP {reply.status_code} {reply.text[:200]!r}", where=where)
    return Uploaded(where, digest.hexdigest(), size)


def upload_bundle(path: Path, target: UploadTarget, *, transport: Any = None) -> Uploaded:
    """Upload the bundle file as `prefix + its file name`; with target.want_get, also a presigned GET URL."""
    path = Path(path)
    done = upload_file(path, presign(target, path.name, "PUT"), transport=transport)
    if not target.want_get:
        return done
    get = presign(target, path.name, "GET")
    expires = (datetime.now(UTC) + timedelta(seconds=target.expires_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Uploaded(done.object, done.sha256, done.size, get_url=get.url, get_expires_at=expires)
