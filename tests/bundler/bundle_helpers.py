"""Shared helpers for the bundler tests: a small capture directory and tar crafting."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

MTIME = 1715675400  # 2024-05-14T08:30:00Z
LONG_NAME = "hosts/gpu001/s0/fs/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0/net/eth2/statistics/rx_missed_errors"

FILES = {
    "capture.json": json.dumps(
        {"format": "fabricase-capture", "format_version": 1, "created_at": "2024-05-14T08:30:00Z", "hosts": ["gpu001"]}
    ).encode(),
    "hosts/gpu001/host.json": b'{"host": "gpu001", "status": "ok"}\n',
    "hosts/gpu001/index.json": b'{"items": []}\n',
    "hosts/gpu001/s0/fs/sys/class/net/eth0/statistics/rx_errors": b"17\n",
    "hosts/gpu001/s1/fs/sys/class/net/eth0/statistics/rx_errors": b"42\n",
    "hosts/gpu001/s0/cmd/uname": b"Linux gpu001 6.1.0 #1 SMP x86_64 GNU/Linux\n",
    "hosts/gpu001/s0/cmd/uname.stderr": b"",
    LONG_NAME: b"0\n",  # longer than 100 characters: stored through a PAX header
}
EXTRA = {"findings.json": b'{"findings": []}\n', "ticket.md": b"# ticket\n", "summary.md": b"# summary\n"}


def make_capture(root: Path, files: dict[str, bytes] | None = None) -> Path:
    for rel, data in (FILES if files is None else files).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def members_of(bundle: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(bundle, "r:gz") as tar:
        out = []
        for m in tar.getmembers():
            f = tar.extractfile(m) if m.isreg() else None
            out.append((m, f.read() if f else None))
        return out


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    """Write a tar.gz from (TarInfo, data) pairs; TarInfo.size follows the data for regular members."""
    with gzip.open(path, "wb") as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def manifest_for(members: dict[str, bytes], **overrides) -> bytes:
    doc = {
        "format": "fabricase-bundle",
        "format_version": 1,
        "capture_format_version": None,
        "members": [
            {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in sorted(members.items())
        ],
    }
    doc.update(overrides)
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()


def crafted(path: Path, files: dict[str, bytes], *specials: tarfile.TarInfo) -> Path:
    """A bundle with a correct manifest for `files`, plus special (non-file or hostile) members."""
    members = [regular("MANIFEST.json", manifest_for(files))]
    members += [regular(name, data) for name, data in files.items()]
    members += [(info, None) for info in specials]
    return write_tar(path, members)
