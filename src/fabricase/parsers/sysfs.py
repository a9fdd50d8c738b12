"""sysfs attribute values: one value per file, newline-terminated ("12345\n", "up\n")."""

from __future__ import annotations

import re

__all__ = ["SPEED_UNKNOWN", "parse_sysfs_int", "parse_sysfs_speed", "parse_sysfs_str"]

# ASCII only: Python's \d and int() also accept other scripts' digits, which no kernel writes.
# At most 40 decimal or 32 hex digits: an attribute is at most 64 bits wide (20 digits), and int() of thousands of
# decimal digits raises.
_DECIMAL = re.compile(r"[+-]?[0-9]{1,40}", re.ASCII)
_HEX = re.compile(r"0[xX][0-9a-fA-F]{1,32}", re.ASCII)

# What drivers write for "no link / unknown" in /sys/class/net/<if>/speed: SPEED_UNKNOWN (-1) printed as %d,
# and the same value seen through 16- or 32-bit unsigned fields by older drivers.
SPEED_UNKNOWN = frozenset({-1, 65535, 4294967295})


def parse_sysfs_str(text: str | None) -> str | None:
    """The attribute's value without surrounding whitespace; None when the file was empty or not read."""
    if text is None:
        return None
    value = text.strip()
    return value or None


def parse_sysfs_int(text: str | None) -> int | None:
    """A decimal (or 0x-prefixed hex, as in `flags`) integer attribute; None when empty or not a number.

    A negative value is returned as is: "-1" means "unknown" only for some attributes (speed), which the
    caller knows and this function does not.
    """
    value = parse_sysfs_str(text)
    if value is None:
        return None
    if _DECIMAL.fullmatch(value):
        return int(value, 10)
    if _HEX.fullmatch(value):
        return int(value, 16)
    return None


def parse_sysfs_speed(text: str | None) -> int | None:
    """/sys/class/net/<if>/speed in Mb/s; None when unreadable or the driver's "unknown" sentinel."""
    speed = parse_sysfs_int(text)
    if speed is None or speed in SPEED_UNKNOWN:
        return None
    return speed
