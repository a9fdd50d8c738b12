"""Who a host is: /etc/os-release, `uname -a`, DMI strings, hostname and kernel release."""

from __future__ import annotations

import re
from typing import Any

from fabricase.errors import CaptureError
from fabricase.models import HostCapture
from fabricase.parsers.kvp import KVP_POOL_3, PHYSICAL_HOST_KEY, parse_kvp_pool
from fabricase.parsers.sysfs import parse_sysfs_str

__all__ = ["DMI_FIELDS", "host_identity", "parse_os_release", "parse_uname"]

DMI_FIELDS = (
    "sys_vendor", "product_name", "product_version", "board_vendor", "board_name", "board_asset_tag",
    "bios_vendor", "bios_version", "chassis_asset_tag",
)  # fmt: skip

_OS_RELEASE_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)")
_SHELL_ESCAPE = re.compile(r"\\([\\$\"`])")
# `uname -a` prints machine, then processor and hardware platform when known, then the operating system.
_ARCH = re.compile(r"x86_64|i[3-6]86|aarch64|arm\w*|ppc64(le)?|s390x?|riscv(32|64)|mips\w*|loongarch64|unknown")
_UNAME_FIELDS = ("kernel_name", "nodename", "kernel_release", "kernel_version", "machine", "operating_system")


def _unquote(value: str) -> str | None:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return _SHELL_ESCAPE.sub(r"\1", value[1:-1])
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if value[:1] in ('"', "'"):
        return None  # an unterminated quote: the value is not readable, so it is not reported
    return value


def parse_os_release(text: str | None) -> dict[str, str]:
    """os-release(5) as {"ID": "debian", "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", ...}.

    Comments, blank lines and lines that are not KEY=VALUE are skipped.
    """
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        match = _OS_RELEASE_LINE.fullmatch(line.strip())
        if match:
            value = _unquote(match.group(2))
            if value is not None:
                fields[match.group(1)] = value
    return fields


def parse_uname(text: str | None) -> dict[str, str | None]:
    """`uname -a` as kernel_name, nodename, kernel_release, kernel_version, machine, operating_system.

    The kernel version string holds spaces, so it is what lies between the release and the trailing
    machine/OS words; a field that cannot be told apart is None.
    """
    result: dict[str, str | None] = dict.fromkeys(_UNAME_FIELDS)
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return result
    tokens = lines[0].split()
    for name, token in zip(_UNAME_FIELDS[:3], tokens, strict=False):
        result[name] = token
    rest = tokens[3:]
    if rest and not _ARCH.fullmatch(rest[-1]) and ("/" in rest[-1] or rest[-1] in ("Linux", "GNU", "Android")):
        result["operating_system"] = rest.pop()
    arch: list[str] = []
    while rest and _ARCH.fullmatch(rest[-1]) and len(arch) < 3:
        arch.insert(0, rest.pop())
    if arch:
        result["machine"] = arch[0]
    if rest:
        result["kernel_version"] = " ".join(rest)
    return result


def _text(hc: HostCapture, source: str) -> str | None:
    try:
        return hc.text(source, 0)
    except (OSError, ValueError) as exc:
        item = hc.item(source, 0)
        where = f"{hc.host}:{item.path if item else source}"
        raise CaptureError(f"cannot read captured item {source}: {exc}", where=where) from exc


def host_identity(hc: HostCapture) -> dict[str, Any]:
    """The host's identity from snapshot 0: hostname, kernel, OS and DMI strings (None when not captured).

    DMI strings are kept verbatim, placeholders such as "To Be Filled By O.E.M." included.
    """
    uname = parse_uname(_text(hc, "cmd:uname"))
    os_release = parse_os_release(_text(hc, "/etc/os-release"))
    os_name = os_release.get("PRETTY_NAME")
    if os_name is None and "NAME" in os_release:
        os_name = " ".join(v for v in (os_release["NAME"], os_release.get("VERSION")) if v)
    identity: dict[str, Any] = {
        "host": hc.host,
        "hostname": parse_sysfs_str(_text(hc, "/proc/sys/kernel/hostname"))
        or parse_sysfs_str(_text(hc, "cmd:hostname"))
        or uname["nodename"],
        "kernel": parse_sysfs_str(_text(hc, "/proc/sys/kernel/osrelease")) or uname["kernel_release"],
        "kernel_version": parse_sysfs_str(_text(hc, "/proc/version")),
        "machine": uname["machine"],
        "os": os_name,
        "os_id": os_release.get("ID"),
        "os_version_id": os_release.get("VERSION_ID"),
    }
    for name in DMI_FIELDS:
        identity[name] = parse_sysfs_str(_text(hc, f"/sys/class/dmi/id/{name}"))
    # Azure: the physical host the VM runs on, from the Hyper-V KVP pool (binary; absent elsewhere).
    kvp = hc.item(KVP_POOL_3)
    pool = parse_kvp_pool(hc.read(kvp)) if kvp is not None and kvp.bytes else {}
    identity["physical_host_name"] = pool.get(PHYSICAL_HOST_KEY) or None
    return identity
