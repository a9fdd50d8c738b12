"""The packaged Xid/SXid catalog: generated from the real catalog files, and the classes a fabric engineer expects."""

from __future__ import annotations

import csv
import io

import pytest

from fabricase.parsers.xid import COMPONENTS, SEVERITIES, sxid_info, xid_info
from nvidia.xid_catalog_gen import CATALOG, SOURCES, build_rows, render


def test_packaged_catalog_is_what_the_generator_builds():
    assert CATALOG.read_text(encoding="utf-8") == render(build_rows())


def test_full_sxid_mapping_contains_the_shared_excerpt_verbatim():
    full = (SOURCES / "sxiderrorsmapping.csv").read_text()
    excerpt = (SOURCES / "sxiderrorsmapping_DLPL-excerpt.csv").read_text()
    assert excerpt in full and len(full) == 31025


def test_every_row_uses_the_documented_vocabulary():
    rows = list(csv.DictReader(io.StringIO("\n".join(
        line for line in CATALOG.read_text().splitlines() if not line.startswith("#")))))  # fmt: skip
    assert {r["severity"] for r in rows} <= set(SEVERITIES) and {r["component"] for r in rows} <= set(COMPONENTS)
    assert len([r for r in rows if r["kind"] == "xid"]) == 172 and len([r for r in rows if r["kind"] == "sxid"]) == 398


@pytest.mark.parametrize(
    ("code", "name", "severity", "component"),
    [
        (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "critical", "pcie"),
        (74, "NVLINK_ERROR", "major", "nvlink"),
        (136, "ALI_TRAINING_FAIL", "critical", "nvlink"),
        (145, "NVLINK_RLW_ERROR", "major", "nvlink"),
        (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "critical", "memory"),
        (63, "INFOROM_DRAM_RETIREMENT_EVENT", "minor", "memory"),
        (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "critical", "memory"),
        (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "major", "memory"),
        (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "critical", "memory"),
        (119, "GSP_RPC_TIMEOUT", "critical", "gpu"),
        (120, "GSP_ERROR", "critical", "gpu"),
        (13, "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "minor", "driver"),
        (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "info", "driver"),
        (154, "GPU_RECOVERY_ACTION_CHANGED", "info", "driver"),
    ],
)
def test_xid_classes(code, name, severity, component):
    info = xid_info(code)
    assert (info.name, info.severity, info.component, info.known, info.kind) == (name, severity, component, True, "xid")


def test_xid_details_and_unknown_codes():
    info = xid_info(79)
    assert (info.description, info.action, info.fatal) == ("GPU has fallen off the bus", "RESTART_BM", True)
    unknown = xid_info(4242)
    assert (unknown.known, unknown.name, unknown.severity, unknown.component) == (False, None, "major", "unknown")


@pytest.mark.parametrize(
    ("code", "severity", "component", "action"),
    [(20009, "major", "nvlink", "CHECK_LINK_MECHANICAL_CONNECTIONS"), (20001, "info", "nvlink", "IGNORE"),
     (24007, "critical", "fabric", "RESET_GPU"), (12028, "critical", "fabric", "RESET_FABRIC"),
     (26008, "info", "fabric", "IGNORE"), (28001, "major", "thermal", "CHECK_THERMALS"),
     (10004, "major", "thermal", "CHECK_THERMALS")],
)  # fmt: skip
def test_sxid_classes(code, severity, component, action):
    info = sxid_info(code)
    assert (info.severity, info.component, info.action, info.kind) == (severity, component, action, "sxid")
    assert info.description.startswith("NVSwitch ")
