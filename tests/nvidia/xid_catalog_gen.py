"""Build src/fabricase/parsers/xid_catalog.csv from NVIDIA's Xid catalog and NVSentinel's Xid/SXid mappings.

    python tests/nvidia/xid_catalog_gen.py        rewrite the packaged catalog from tests/fixtures/real/...

tests/nvidia/test_xid_catalog.py checks that the packaged file is exactly what this builds, so the
severity and component rules below are the single place to change them (and docs/counters-nvidia.md says why).
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

SOURCES = Path(__file__).parents[1] / "fixtures/real/xid-catalog_nvsentinel"
CATALOG = Path(__file__).parents[2] / "src/fabricase/parsers/xid_catalog.csv"
COLUMNS = ("kind", "code", "name", "description", "severity", "component", "action", "fatal")

# The catalog's immediate action says how much a training job suffers: the GPU must be reset or the host
# rebooted (critical), a link or board needs attention (major), the application alone restarts (minor).
_CRITICAL_ACTIONS = {"RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48"}
_MAJOR_ACTIONS = {"WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR", "CHECK_MECHANICALS", "UPDATE_SWFW", "CHECK_UVM",
                  "CONTACT_SUPPORT", "UNEXPECTED_ERR_REPORT_ISSUE"}
_MINOR_ACTIONS = {"RESTART_APP", "WORKFLOW_XID_45", "XID_154"}
# Where the fabric engineer's reading differs from the action bucket alone.
_XID_SEVERITY = {
    63: "minor",  # a row was remapped: memory is wearing, the GPU still works
    92: "minor",  # high single-bit ECC rate: corrected, but a trend to watch
    94: "major",  # contained ECC error: the job on that GPU died
    154: "info",  # only names the recovery action of another Xid
}
_XID_COMPONENT = {
    79: "pcie", 54: "power", 121: "nvlink", 136: "nvlink", 13: "driver", 31: "driver", 43: "driver", 45: "driver",
    154: "driver", 62: "gpu", 119: "gpu", 120: "gpu", 46: "gpu", 109: "gpu", 143: "gpu", 158: "gpu",
}  # fmt: skip
_SXID_UNITS = {
    10: ("host interface", "fabric"), 11: ("NPORT ingress", "fabric"), 12: ("NPORT egress", "fabric"),
    13: ("NPORT fstate", "fabric"), 14: ("NPORT tstate", "fabric"), 15: ("NPORT route", "fabric"),
    16: ("NPORT", "fabric"), 17: ("NVLink controller (NVLCTRL)", "nvlink"), 18: ("NVLink IP (NVLIPT)", "nvlink"),
    19: ("NVLink transaction layer (NVLTLC)", "nvlink"), 20: ("NVLink data-link/physical layer (DLPL)", "nvlink"),
    21: ("AFS", "fabric"), 22: ("MINION link controller", "nvlink"), 23: ("crossbar (NXBAR)", "fabric"),
    24: ("NPORT source track", "fabric"), 25: ("NVLIPT link", "nvlink"), 26: ("SOE management engine", "fabric"),
    27: ("cable/module interface (CCI)", "nvlink"), 28: ("OSFP transceiver thermal", "thermal"),
    29: ("multicast tstate", "fabric"), 30: ("reduction tstate", "fabric"),
}  # fmt: skip


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _xid_severity(code: int, action: str) -> str:
    if code in _XID_SEVERITY:
        return _XID_SEVERITY[code]
    if action == "IGNORE":
        return "info"
    if action in _CRITICAL_ACTIONS:
        return "critical"
    if action in _MINOR_ACTIONS:
        return "minor"
    return "major"


def _xid_component(code: int, name: str, description: str) -> str:
    if code in _XID_COMPONENT:
        return _XID_COMPONENT[code]
    text = f"{name} {description}".upper()
    if "NVLINK" in text:
        return "nvlink"
    if re.search(r"ECC|DRAM|RETIREMENT|SBE|CONTAINED|MEMORY|ROW REMAP", text):
        return "memory"
    if "THERMAL" in text:
        return "thermal"
    if description.lower().startswith("unused"):
        return "unknown"
    if "ROBUST_CHANNEL" in text:
        return "driver"
    return "gpu"


def _sxid_severity(action: str, fatal: str) -> str:
    if action == "IGNORE":
        return "info"
    if fatal == "FATAL":
        return "critical" if action in ("RESET_FABRIC", "RESET_GPU") else "major"
    return "minor"


def _mapping(name: str) -> dict[int, list[str]]:
    rows = csv.reader(io.StringIO((SOURCES / name).read_text(encoding="utf-8")))
    return {int(r[0]): [_clean(x) for x in r[1:4]] for r in rows if r and r[0].strip().isdigit()}


def build_rows() -> list[dict[str, str]]:
    catalog = {}
    with (SOURCES / "Xids.csv").open(encoding="utf-8", newline="") as fh:
        for row in list(csv.reader(fh))[1:]:
            if row[1].strip().isdigit():
                catalog[int(row[1])] = row
    mapping = _mapping("xiderrorsmapping.csv")
    rows = []
    for code in sorted(set(catalog) | set(mapping)):
        cat = catalog.get(code)
        mapped = mapping.get(code, ["", "", ""])
        name = _clean(cat[2]) if cat else mapped[0]
        description = _clean(cat[3]) if cat else ""
        action = (_clean(cat[8]) if cat else "") or mapped[1]
        rows.append({
            "kind": "xid", "code": str(code), "name": name or mapped[0], "description": description,
            "severity": _xid_severity(code, action), "component": _xid_component(code, name, description),
            "action": action, "fatal": mapped[2],
        })  # fmt: skip
    for code, (name, action, fatal) in sorted(_mapping("sxiderrorsmapping.csv").items()):
        unit, component = _SXID_UNITS.get(code // 1000, ("unit", "fabric"))
        component = "thermal" if "THERM" in name else component  # 10004-10006: the switch's own thermal events
        rows.append({
            "kind": "sxid", "code": str(code), "name": name, "description": f"NVSwitch {unit} error",
            "severity": _sxid_severity(action, fatal), "component": component, "action": action, "fatal": fatal,
        })  # fmt: skip
    return rows


def render(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    out.write("# Generated by tests/nvidia/xid_catalog_gen.py from NVIDIA's Xid catalog (Xids.csv) and NVSentinel's\n")
    out.write("# xiderrorsmapping.csv / sxiderrorsmapping.csv (Apache-2.0). See docs/counters-nvidia.md.\n")
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


if __name__ == "__main__":
    CATALOG.write_text(render(build_rows()), encoding="utf-8")
    sys.stdout.write(f"wrote {CATALOG}\n")
