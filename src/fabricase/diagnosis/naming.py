"""How suspects, background lines and the verdict line read: short, in a fabric engineer's words."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabricase.diagnosis.models import Background, Diagnosis, Suspect

__all__ = ["background_text", "component_words", "fmt_number", "part_words", "plural", "suspect_name", "verdict_line"]

_NOUN = {"rdma": "ports", "netdev": "interfaces", "nvlink": "links", "pcie": "devices", "gpu": "GPUs"}


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def fmt_number(x: float | int | None) -> str:
    """A rate or count as people read it: 0, 0.058, 3.2, 212, 28,800."""
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if float(x).is_integer():
        return str(int(x))
    if abs(x) >= 0.01:
        return f"{x:.3g}"
    return f"{x:.2g}"


_SHARED_WORDS = {"switch": "switch", "rack": "rack", "network-node": "network node", "block": "block",
                 "subblock": "sub-block"}
_UNIT_NOUN = {"nic-port": "NIC port", "nic": "NIC", "pcie-device": "PCI device", "nvswitch": "NVSwitch"}


def _by_family(components: list[str]) -> dict[str, str]:
    by_family: dict[str, str] = {}
    for c in components:
        family, _, name = c.partition(":")
        by_family.setdefault(family, name)
    return by_family


def component_words(components: list[str], unit: str | None = None) -> str:
    """`mlx5_5/1 (ens6np0)` for a port, `GPU 3` for a GPU (`GPU at 0000:5d:00.0` when only its PCI address is
    known), `switch leaf-3` for a shared component."""
    by_family = _by_family(components)
    if "rdma" in by_family:
        netdev = by_family.get("netdev")
        return by_family["rdma"] + (f" ({netdev})" if netdev else "")
    if "netdev" in by_family:
        return by_family["netdev"]
    if "gpu" in by_family:
        return f"GPU {by_family['gpu']}"
    if unit == "gpu" and "pcie" in by_family:
        return f"GPU at {by_family['pcie']}"
    if "nvlink" in by_family:
        return f"NVLink {by_family['nvlink']}"
    first = components[0] if components else "host"
    family, _, name = first.partition(":")
    if family in _SHARED_WORDS and name:
        return f"{_SHARED_WORDS[family]} {name}"
    if family == "nvswitch" and name:
        return f"NVSwitch {name}"
    if family == "pcie":
        return f"PCI device {name}"
    return {"fabric-manager": "fabric manager", "imex": "IMEX"}.get(first, first)


def part_words(components: list[str], unit: str) -> str:
    """The part without its host, with its noun: `NIC port mlx5_5/1 (ens6np0)`, `GPU 3`, `the fabric manager`,
    `switch leaf-3`; `the host` for a host as a whole."""
    if unit == "host":
        return "the host"
    if unit == "fabric-manager":
        return "the fabric manager"
    what = component_words(components, unit)
    noun = _UNIT_NOUN.get(unit)
    if noun and not what.startswith(noun):
        return f"{noun} {what}"
    return what


def suspect_name(s: Suspect) -> str:
    if s.host is None:
        return component_words(s.components[:1]) if s.components else "shared component"
    what = component_words(s.components, s.unit)
    if s.unit == "host" or what == "host":
        return s.host
    return f"{s.host} {what}"


def background_text(b: Background) -> str:
    noun = _NOUN.get(b.family, "components")
    rate = f" (median {fmt_number(b.median_rate)}{b.unit})" if b.median_rate is not None else ""
    metric = b.metric.removeprefix("rdma.")
    return f"{metric} rose on {b.rose_on:,} of {b.compared:,} {noun} at fleet-normal rates{rate}"


def verdict_line(d: Diagnosis) -> str:
    """`8 suspects on 8 of 16 hosts; 8 hosts healthy; 2 hosts not captured`."""
    captured = d.hosts_captured
    suspect_hosts = set(d.hosts_with_suspects) & set(captured) | {s.host for s in d.suspects if s.host}
    shared = [s for s in d.suspects if s.host is None]
    healthy = [h for h in captured if h not in suspect_hosts]
    parts = []
    if d.suspects:
        where = f"on {len(suspect_hosts):,} of {plural(len(captured), 'host')}"
        if shared and not (suspect_hosts - {h for s in shared for h in s.hosts}):
            where = f"({plural(len(shared), 'shared component')}) over {len(suspect_hosts):,} of " \
                    f"{plural(len(captured), 'host')}"
        parts.append(f"{plural(len(d.suspects), 'suspect')} {where}")
    else:
        parts.append(f"no suspect on {plural(len(captured), 'host')}")
    parts.append(f"{plural(len(healthy), 'host')} healthy")
    if d.hosts_not_captured:
        parts.append(f"{plural(len(d.hosts_not_captured), 'host')} not captured")
    return "; ".join(parts)
