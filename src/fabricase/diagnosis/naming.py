"""How components, counts and numbers read in suspects, background lines and the verdict line: short, in a fabric
engineer's words (the records themselves are in models.py)."""

from __future__ import annotations

import math

__all__ = ["NOUNS", "component_words", "fmt_number", "part_words", "plural"]

NOUNS = {"rdma": "ports", "netdev": "interfaces", "nvlink": "links", "pcie": "devices", "gpu": "GPUs"}


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
