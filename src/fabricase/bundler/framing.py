"""The framing around a bundle's members: exactly one gzip member, whole, and a tar that ends where the builder
ends it. Nothing may come after either.

Python's gzip module reads concatenated members as one stream and skips zero bytes after the last, and
tarfile stops quietly at the first block that is not a header; so data appended to a bundle (to the gzip file,
or to the tar inside it) used to verify with the same bundle id. `GzipStream` decompresses one member with
zlib (which checks the CRC and length trailer) and counts what follows it; `tar_end_problems` checks that after
the last member come zero blocks only, as many as tarfile writes (two blocks, padded to a whole record).
"""

from __future__ import annotations

import tarfile
import zlib
from typing import BinaryIO

__all__ = ["GzipStream", "tar_end_problems"]

_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_KEEP = 4  # decompressed chunks kept: tarfile reads at most one buffer beyond the block it parses


class GzipStream:
    """A file-like reader of the single gzip member at the start of `raw`, for tarfile's stream mode. It
    counts the bytes it hands out and keeps the last few chunks, so what tarfile read past the tar's end can
    still be checked; after the member it counts the bytes that follow (`trailing`)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._z = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer, one member
        self._recent: list[bytes] = []
        self.produced = 0
        self.ended = False
        self.trailing = 0
        self.second_member = False

    def read(self, n: int = -1) -> bytes:
        """Up to `n` decompressed bytes (b"" after the member ends); EOFError when the file ends inside it."""
        n = _CHUNK if n is None or n < 0 else n
        out = bytearray()
        while len(out) < n and not self.ended:
            data = self._z.unconsumed_tail or self._raw.read(_CHUNK)
            # with no input left, zlib may still hold output it could not hand out (a match cut by n)
            piece = self._z.decompress(data, n - len(out))
            out += piece
            if self._z.eof:
                self.ended = True
                self._count_trailing(self._z.unused_data)
            elif not data and not piece:
                raise EOFError("compressed file ended before the end of the gzip stream")
        chunk = bytes(out)
        self.produced += len(chunk)
        if chunk:
            self._recent = [*self._recent[-(_KEEP - 1):], chunk]
        return chunk

    def recent(self, n: int) -> bytes | None:
        """The last `n` bytes handed out, or None when more than the kept chunks hold."""
        kept = b"".join(self._recent)
        return kept[len(kept) - n:] if n <= len(kept) else None

    def _count_trailing(self, head: bytes) -> None:
        first = head
        self.trailing = len(head)
        while chunk := self._raw.read(_CHUNK):
            if len(first) < len(_GZIP_MAGIC):
                first += chunk[: len(_GZIP_MAGIC)]
            self.trailing += len(chunk)
        self.second_member = first.startswith(_GZIP_MAGIC)


def _all_zero(data: bytes) -> bool:
    return data.count(0) == len(data)


def tar_end_problems(tar: tarfile.TarFile, stream: GzipStream) -> list[str]:
    """After tarfile has met the end of `tar` (read through `stream`): read the rest and say what is wrong
    with the tar's end and the gzip member's end; [] when both are exactly as the builder writes them."""
    end = tar.offset  # where tarfile met a block that is not a member header
    ahead = stream.produced - end
    seen = stream.recent(ahead) if ahead >= 0 else b""
    if seen is None:
        raise EOFError("cannot check the tar's end: tarfile read too far ahead")
    first_block, nonzero = seen[: tarfile.BLOCKSIZE], not _all_zero(seen)
    while chunk := stream.read(_CHUNK):
        if len(first_block) < tarfile.BLOCKSIZE:
            first_block += chunk[: tarfile.BLOCKSIZE - len(first_block)]
        nonzero = nonzero or not _all_zero(chunk)
    problems = []
    padding = stream.produced - end
    expected = -(-(end + 2 * tarfile.BLOCKSIZE) // tarfile.RECORDSIZE) * tarfile.RECORDSIZE - end
    if ahead < 0:
        problems.append(f"the tar ends at byte {stream.produced}, inside a member that runs to byte {end}")
    elif not _all_zero(first_block):
        problems.append(f"damaged tar: the block at byte {end} is neither a member header nor the archive's end")
    elif nonzero:
        problems.append(f"trailing data after the tar's end-of-archive blocks (byte {end})")
    elif padding < 2 * tarfile.BLOCKSIZE:
        problems.append(f"the tar has no end-of-archive blocks after byte {end} (truncated)")
    elif padding != expected:
        problems.append(f"the tar's end is {padding} zero bytes after byte {end}; fabricase writes {expected}")
    if stream.second_member:
        problems.append(f"a second gzip member after the bundle's ({stream.trailing} bytes)")
    elif stream.trailing:
        problems.append(f"{stream.trailing} bytes of trailing data after the gzip stream")
    return problems
