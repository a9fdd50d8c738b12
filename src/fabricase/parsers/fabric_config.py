"""RoCE QoS configuration: `mlnx_qos -i <if>`, `dcb pfc show` / `dcb apptrust show` (iproute2), `dcbtool gc <if>
pfc` (lldpad), and the per-priority ECN enable files of mlx5 (/sys/class/net/<if>/ecn/roce_{np,rp}/enable/<p>)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from fabricase.parsers.sysfs import parse_sysfs_int

__all__ = ["QosConfig", "ecn_enabled_priorities", "parse_dcb", "parse_dcbtool_pfc", "parse_mlnx_qos"]

_PRIO_ON = re.compile(r"\b([0-7]):(on|off)\b", re.ASCII)
_PRIO = re.compile(r"[0-7]", re.ASCII)


@dataclass
class QosConfig:
    """pfc_enabled: the priorities with PFC on, ascending ([] = none; None = not shown).
    trust: the classification the port trusts, "pcp" or "dscp" (dcb: the first of its trust order)."""

    pfc_enabled: list[int] | None = None
    trust: str | None = None
    dcbx_mode: str | None = None
    errors: list[str] = field(default_factory=list)


def _flags(tokens: list[str]) -> list[int] | None:
    return [int(t) for t in tokens] if tokens and all(t in ("0", "1") for t in tokens) else None


def _mlnx_pfc(lines: list[str], cfg: QosConfig) -> None:
    """The 'PFC configuration:' table: a "priority 0 1 ... 7" header and an "enabled 0 0 0 1 ..." row."""
    priorities: list[str] | None = None
    for line in lines:
        words = line.replace(":", " ").split()
        if not words:
            continue
        if words[0] == "priority" and priorities is None:
            priorities = words[1:]
        elif words[0] == "enabled":
            flags = _flags(words[1:])
            columns = priorities if priorities is not None else [str(p) for p in range(len(words) - 1)]
            if flags is None or len(columns) != len(flags) or not all(_PRIO.fullmatch(c) for c in columns):
                cfg.errors.append(f"unreadable PFC enabled row: {line.strip()[:60]!r}")
                return
            cfg.pfc_enabled = sorted(int(p) for p, on in zip(columns, flags, strict=True) if on)
            return
    cfg.errors.append("PFC configuration without an enabled row")


def parse_mlnx_qos(text: str | None) -> QosConfig:
    """`mlnx_qos -i <if>`: DCBX mode, priority trust state and the PFC enabled row."""
    cfg = QosConfig()
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        if key == "Priority trust state":
            cfg.trust = value.strip() or None
        elif key == "DCBX mode":
            cfg.dcbx_mode = value.strip() or None
        elif key == "PFC configuration":
            _mlnx_pfc(lines[i + 1 : i + 4], cfg)
    return cfg


def parse_dcb(text: str | None) -> QosConfig:
    """`dcb pfc show dev <if>` ("prio-pfc 0:off ... 3:on ...") and `dcb apptrust show dev <if>` ("order: dscp pcp")."""
    cfg = QosConfig()
    for line in (text or "").splitlines():
        words = line.split()
        if "prio-pfc" in words:
            pairs = _PRIO_ON.findall(line[line.index("prio-pfc") :])
            if pairs:
                cfg.pfc_enabled = sorted({int(p) for p, state in pairs if state == "on"})
            else:
                cfg.errors.append(f"unreadable prio-pfc: {line.strip()[:60]!r}")
        elif words[:1] in (["order:"], ["trust-order:"]) and len(words) > 1:
            cfg.trust = words[1]
    return cfg


def parse_dcbtool_pfc(text: str | None) -> QosConfig:
    """`dcbtool gc <if> pfc`: the "pfcup:" row, either "0 0 0 1 0 0 0 0" or "00010000" (priorities 0-7)."""
    cfg = QosConfig()
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key == "pfcup":
            tokens = value.split()
            flags = _flags(list(tokens[0]) if len(tokens) == 1 else tokens)
            if flags is None or len(flags) != 8:
                cfg.errors.append(f"unreadable pfcup: {value.strip()[:40]!r}")
            else:
                cfg.pfc_enabled = [p for p, on in enumerate(flags) if on]
    return cfg


def ecn_enabled_priorities(files: Mapping[int, str | None]) -> list[int] | None:
    """The priorities whose ECN enable file reads 1, from {priority: file content}; None when none was read."""
    values = {prio: parse_sysfs_int(text) for prio, text in files.items()}
    if all(v is None for v in values.values()):
        return None
    return sorted(prio for prio, value in values.items() if value == 1)
