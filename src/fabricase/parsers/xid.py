"""The NVIDIA Xid (GPU) and SXid (NVSwitch) code catalog: code -> name, meaning, severity, likely component.

The data is package data (parsers/xid_catalog.csv), generated from NVIDIA's Xid catalog spreadsheet and
NVIDIA NVSentinel's Xid/SXid action mappings by tests/nvidia/xid_catalog_gen.py; the severity and component
rules are documented in docs/counters-nvidia.md.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib import resources

__all__ = ["COMPONENTS", "SEVERITIES", "XidInfo", "sxid_info", "xid_info"]

SEVERITIES = ("critical", "major", "minor", "info")
COMPONENTS = ("nvlink", "pcie", "memory", "gpu", "driver", "fabric", "thermal", "power", "unknown")


@dataclass(frozen=True)
class XidInfo:
    """What a code means. known is False for a code the catalog does not list: name, description, action
    and fatal are then None, and severity is "major" (an unlisted error is still an error)."""

    code: int
    name: str | None
    description: str | None
    severity: str
    component: str
    action: str | None
    fatal: bool | None = None
    kind: str = "xid"
    known: bool = True


@functools.cache
def _catalog() -> dict[tuple[str, int], XidInfo]:
    text = resources.files("fabricase.parsers").joinpath("xid_catalog.csv").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    table: dict[tuple[str, int], XidInfo] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        code = int(row["code"])
        fatal = {"FATAL": True, "NONFATAL": False}.get(row["fatal"])
        table[(row["kind"], code)] = XidInfo(
            code, row["name"] or None, row["description"] or None, row["severity"], row["component"],
            row["action"] or None, fatal, row["kind"],
        )  # fmt: skip
    return table


def _lookup(kind: str, code: int) -> XidInfo:
    found = _catalog().get((kind, code))
    if found is not None:
        return found
    return XidInfo(code, None, None, "major", "unknown", None, None, kind, known=False)


def xid_info(code: int) -> XidInfo:
    """The catalog entry of a GPU Xid (`NVRM: Xid (PCI:...): <code>`)."""
    return _lookup("xid", code)


def sxid_info(code: int) -> XidInfo:
    """The catalog entry of an NVSwitch SXid (`nvidia-nvswitchN: SXid (PCI:...): <code>`)."""
    return _lookup("sxid", code)
