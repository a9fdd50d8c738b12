"""The Hyper-V KVP pool an Azure VM's guest sees: where the physical host's name lives.

hv_kvp_daemon writes each pool (`/var/lib/hyperv/.kvp_pool_<n>`) as fixed records of a 512-byte key and a
2048-byte value, NUL-padded (HV_KVP_EXCHANGE_MAX_KEY_SIZE / _VALUE_SIZE, linux include/uapi/linux/hyperv.h).
Pool 3 (KVP_POOL_AUTO_EXTERNAL) holds the host's keys: `PhysicalHostName` is the node Azure support and
Guest Health Reporting ask for. ARM has no field for it: only the guest knows. Pure.
"""

from __future__ import annotations

__all__ = ["KVP_KEY_BYTES", "KVP_POOL_3", "KVP_RECORD_BYTES", "PHYSICAL_HOST_KEY", "parse_kvp_pool"]

KVP_POOL_3 = "/var/lib/hyperv/.kvp_pool_3"
KVP_KEY_BYTES = 512
KVP_VALUE_BYTES = 2048
KVP_RECORD_BYTES = KVP_KEY_BYTES + KVP_VALUE_BYTES
PHYSICAL_HOST_KEY = "PhysicalHostName"


def _field(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()


def _encode(text: str) -> bytes:
    """A pool read as text back to its bytes: surrogateescape undoes a lossless decode; any other lone surrogate
    (no decoder makes one) is replaced."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace")


def parse_kvp_pool(data: bytes | str | None) -> dict[str, str]:
    """A KVP pool file as {key: value}; {} for nothing. A trailing partial record (a file read while the
    daemon wrote it) is ignored; records with an empty key are skipped; a repeated key keeps its last value,
    as the daemon does on update."""
    if not data:
        return {}
    raw = _encode(data) if isinstance(data, str) else bytes(data)
    pool: dict[str, str] = {}
    for start in range(0, len(raw) - KVP_RECORD_BYTES + 1, KVP_RECORD_BYTES):
        key = _field(raw[start:start + KVP_KEY_BYTES])
        if key:
            pool[key] = _field(raw[start + KVP_KEY_BYTES:start + KVP_RECORD_BYTES])
    return pool
