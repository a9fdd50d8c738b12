"""/proc/net tables: the paired header/value lines of snmp and netstat, and the columns of dev."""

from __future__ import annotations

import re

__all__ = ["PROC_NET_DEV_COLUMNS", "parse_proc_net_dev", "parse_proc_net_snmp"]

# At most 40 digits: kernel counters are u64 (20), and int() of thousands of digits raises.
_INT = re.compile(r"[+-]?[0-9]{1,40}", re.ASCII)

# The kernel's own column names (net/core/net-procfs.c), used when the header lines are missing. They are not the
# sysfs statistics: "drop" is rx_dropped + rx_missed_errors, "frame" sums length/over/crc/frame errors.
PROC_NET_DEV_COLUMNS = (
    "rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", "rx_frame", "rx_compressed", "rx_multicast",
    "tx_bytes", "tx_packets", "tx_errs", "tx_drop", "tx_fifo", "tx_colls", "tx_carrier", "tx_compressed",
)  # fmt: skip


def _to_int(token: str) -> int | None:
    return int(token, 10) if _INT.fullmatch(token) else None


def _split_prefixed(line: str) -> tuple[str, list[str]] | None:
    prefix, sep, rest = line.partition(":")
    prefix = prefix.strip()
    if not sep or not prefix or " " in prefix:
        return None
    return prefix, rest.split()


def parse_proc_net_snmp(text: str | None) -> dict[str, dict[str, int]]:
    """/proc/net/snmp or /proc/net/netstat as {"Tcp": {"RetransSegs": 12, ...}, "TcpExt": {...}}.

    Each section is a header line of names followed by a line of values with the same prefix. A value that is
    not an integer is left out (absent, never 0); negative values (Tcp MaxConn -1) are kept.
    """
    tables: dict[str, dict[str, int]] = {}
    if not text:
        return tables
    pending: tuple[str, list[str]] | None = None
    for line in text.splitlines():
        parsed = _split_prefixed(line)
        if parsed is None:
            pending = None
            continue
        prefix, tokens = parsed
        is_values = bool(tokens) and all(_INT.fullmatch(t) for t in tokens)
        if pending is not None and pending[0] == prefix and (is_values or len(tokens) == len(pending[1])):
            table = tables.setdefault(prefix, {})
            for name, token in zip(pending[1], tokens, strict=False):
                value = _to_int(token)
                if value is not None:
                    table[name] = value
            pending = None
        else:
            pending = None if is_values else (prefix, tokens)
    return tables


def _dev_columns(header: str) -> list[str] | None:
    """Column names from the second header line ( face |bytes packets ...|bytes packets ...)."""
    parts = header.split("|")
    if len(parts) != 3:
        return None
    rx, tx = parts[1].split(), parts[2].split()
    return [f"rx_{name}" for name in rx] + [f"tx_{name}" for name in tx]


def parse_proc_net_dev(text: str | None) -> dict[str, dict[str, int]]:
    """/proc/net/dev as {"eth0": {"rx_bytes": 1, "rx_errs": 0, ..., "tx_carrier": 0}}.

    Column names are the kernel's header words prefixed rx_/tx_ (see PROC_NET_DEV_COLUMNS); a field that is
    not an integer is left out.
    """
    devices: dict[str, dict[str, int]] = {}
    if not text:
        return devices
    columns: list[str] = list(PROC_NET_DEV_COLUMNS)
    for line in text.splitlines():
        if "|" in line:
            found = _dev_columns(line)
            if found:
                columns = found
            continue
        name, sep, rest = line.partition(":")
        name = name.strip()
        # Interface names never contain ':' or whitespace (dev_valid_name), so the first colon ends the name.
        if not sep or not name or any(c.isspace() for c in name):
            continue
        counters: dict[str, int] = {}
        for column, token in zip(columns, rest.split(), strict=False):
            value = _to_int(token)
            if value is not None:
                counters[column] = value
        if counters:
            devices[name] = counters
    return devices
