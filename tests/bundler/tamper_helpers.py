"""The reference bundle that the tampering tests mutate, and the primitives every mutation is made with.

Everything is mutated in memory from the built bytes: the tar is unpacked and packed again with the builder's
own settings (asserted to give the same bytes back), so each mutation changes only what it names.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bundle_helpers import EXTRA, LONG_NAME, MTIME, make_capture

from fabricase.bundler import build_bundle

# one generator, drawn in a fixed order (the stream's bytes here, then tamper_cases.framing_cases' cuts and
# appended bytes), so that every run makes the same cases
RNG = random.Random(14)
INDEX_1 = {"items": [
    {"source": "cmd:uname", "snapshot": 0, "kind": "command", "rc": 0, "truncated": False, "path": "s0/cmd/uname"},
    {"source": "cmd:ibstat", "snapshot": 0, "kind": "command", "rc": 0, "truncated": True, "path": "s0/cmd/ibstat"},
    {"source": "cmd:ibstat", "snapshot": 1, "kind": "command", "rc": 0, "truncated": False, "path": "s1/cmd/ibstat"},
    {"source": "cmd:nvidia-smi", "snapshot": 0, "kind": "command", "rc": 127, "truncated": False,
     "error": "command not found"},
    {"source": "/proc/net/snmp", "snapshot": 0, "kind": "file", "rc": 0, "path": "s0/fs/proc/net/snmp"},
    {"source": "cmd:uname", "snapshot": 0, "kind": "stderr", "rc": 0, "path": "s0/cmd/uname.stderr"},
]}
INDEX_2 = {"items": [{"source": "cmd:uname", "snapshot": 0, "kind": "command", "rc": 124, "truncated": False}]}
CAPTURE_JSON = {"format": "fabricase-capture", "format_version": 2, "created_at": "2024-05-14T08:30:00Z",
                "hosts": ["gpu001", "gpu002"], "collectors": {"rdma": 2, "netdev": 1, "nvidia": 3}}
FILES = {
    "capture.json": json.dumps(CAPTURE_JSON).encode(),
    "placements.json": b'{"format": "fabricase-placements", "format_version": 1, "placements": []}\n',
    "hosts/gpu001/host.json": b'{"host": "gpu001", "status": "ok"}\n',
    "hosts/gpu001/index.json": json.dumps(INDEX_1).encode(),
    "hosts/gpu001/stream.fc1": RNG.randbytes(3000),
    "hosts/gpu001/s0/cmd/uname": b"Linux gpu001 6.1.0 #1 SMP x86_64 GNU/Linux\n",
    "hosts/gpu001/s0/cmd/uname.stderr": b"",
    "hosts/gpu001/s0/cmd/ibstat": b"CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n" * 40,
    "hosts/gpu001/s1/cmd/ibstat": b"CA 'mlx5_0'\n\tPort 1:\n\t\tState: Down\n" * 40,
    "hosts/gpu001/s0/fs/proc/net/snmp": b"Tcp: RtoAlgorithm RtoMin\nTcp: 1 200\n",
    "hosts/gpu001/s0/fs/sys/class/net/eth\u00e9/statistics/rx_errors": b"17\n",  # non-ASCII: a PAX path
    LONG_NAME: b"0\n",  # over 100 bytes: a PAX path
    "hosts/gpu002/host.json": b'{"host": "gpu002", "status": "ok"}\n',
    "hosts/gpu002/index.json": json.dumps(INDEX_2).encode(),
    "hosts/gpu002/s0/cmd/uname": b"",
}


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes


@dataclass(frozen=True)
class Built:
    gz: bytes  # the bundle as built
    tar: bytes  # its tar, decompressed
    members: list[tuple[tarfile.TarInfo, bytes | None]]
    bundle_id: str


def gzipped(tar: bytes, *, mtime: int = MTIME, level: int = 9, filename: str = "") -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=mtime, filename=filename, compresslevel=level) as gz:
        gz.write(tar)
    return buf.getvalue()


def unpack(tar: bytes) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        out = []
        for m in t.getmembers():
            f = t.extractfile(m) if m.isreg() else None
            out.append((m, f.read() if f else None))
        return out


def pack(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as t:
        for info, data in members:
            info = copied(info)
            if data is not None and info.type in tarfile.REGULAR_TYPES and info.sparse is None:
                info.size = len(data)
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def copied(info: tarfile.TarInfo, **changes) -> tarfile.TarInfo:
    new = tarfile.TarInfo(info.name)
    for attr in ("size", "mtime", "mode", "type", "linkname", "uid", "gid", "uname", "gname", "devmajor", "devminor"):
        setattr(new, attr, getattr(info, attr))
    new.pax_headers = {k: v for k, v in info.pax_headers.items() if k != "path" or "name" not in changes}
    for attr, value in changes.items():
        setattr(new, attr, value)
    return new


def regular_member(name: str, data: bytes, **changes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), MTIME, 0o644
    for attr, value in changes.items():
        setattr(info, attr, value)
    return info, data


def canonical(doc: dict) -> bytes:
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_reference(root: Path) -> Built:
    """The bundle every tampered case is made from, built under `root`."""
    bundle = build_bundle(make_capture(root / "cap", FILES), root / "b.tar.gz", extra=EXTRA, mtime=MTIME)
    gz = bundle.path.read_bytes()
    tar = gzip.decompress(gz)
    members = unpack(tar)
    # the mutations below re-pack with the builder's settings: unchanged, that gives the built bytes back
    assert gzipped(tar) == gz and pack(members) == tar
    return Built(gz=gz, tar=tar, members=members, bundle_id=bundle.bundle_id)


# --- the mutations ------------------------------------------------------------------------------------------


def repacked(b: Built, edit: Callable[[list], None]) -> bytes:
    members = [(copied(m), d) for m, d in b.members]
    edit(members)
    return gzipped(pack(members))


def manifest_edited(b: Built, edit: Callable[[dict], dict | bytes | None]) -> bytes:
    def apply(members):
        doc = json.loads(members[0][1])
        out = edit(doc)  # edits the document in place, or returns the manifest's new bytes
        raw = out if isinstance(out, bytes) else canonical(doc)
        members[0] = (members[0][0], raw)

    return repacked(b, apply)


def resigned(b: Built, name: str, data: bytes, *, size: bool = True, sha: bool = True) -> bytes:
    """Member `name` given new bytes, with the manifest's size and/or sha256 for it recomputed."""
    def apply(members):
        i = next(i for i, (m, _) in enumerate(members) if m.name == name)
        members[i] = (members[i][0], data)
        doc = json.loads(members[0][1])
        entry = next(e for e in doc["members"] if e["path"] == name)
        entry["size"] = len(data) if size else entry["size"]
        entry["sha256"] = sha256_hex(data) if sha else entry["sha256"]
        members[0] = (members[0][0], canonical(doc))

    return repacked(b, apply)


def tar_flip(b: Built, offset: int) -> bytes:
    raw = bytearray(b.tar)
    raw[offset] ^= 0x5A
    return gzipped(bytes(raw))


def special_member(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mtime = kind, linkname, MTIME
    return info, None
