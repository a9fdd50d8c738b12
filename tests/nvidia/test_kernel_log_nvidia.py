"""Kernel log classification added for the GPU fabric: Xid/SXid catalog class, NVLink number, fatality,
AER severity, NIC firmware faults and warnings, PCIe links trained below capability."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricase.parsers.kernel_log import parse_kernel_line, parse_kernel_log

REAL = Path(__file__).parents[1] / "fixtures/real"
KLOG = REAL / "kernel-log"


@pytest.mark.parametrize(
    ("line", "kind", "device", "code", "category", "nvlink", "fatal"),
    [
        ("NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link "
         "14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", "nvidia-xid", "0003:00:00", 74, "nvlink", 14, True),
        ("NVRM: Xid (PCI:0000:00:08.0): 145, RLW_REMAP Nonfatal XC1 i0 Link 10 (0x00000004 0x00000040 0x00000000 "
         "0x00000000 0x00000000 0x00000000)", "nvidia-xid", "0000:00:08.0", 145, "nvlink", 10, False),
        ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 "
         "0x00000000 0x00000000)", "nvidia-xid", "0019:01:00", 149, "nvlink", None, True),
        ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to "
         "activate.", "nvidia-xid", "0000:10:1c", 63, "memory", None, None),
        ("[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack timeout error "
         "(First)", "nvswitch-sxid", "0000:c3:00.0", 24007, "fabric", 28, True),
        ("[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate",
         "nvswitch-sxid", "0000:06:00.0", 20009, "nvlink", 4, False),
        ("mlx5_core 0000:d2:00.0: poll_health:825: device's health compromised - reached miss count.",
         "nic-fatal", "0000:d2:00.0", None, "health-compromised", None, None),
        ("mlx5_core: INFO: synd 0x8: unrecoverable hardware error.", "nic-fatal", None, None, "unrecoverable-error",
         None, None),
        ("mlx5_core 0000:03:00.0: wait_func:1195:(pid 1967079): ENABLE_HCA(0x104) timeout. Will cause a leak of a "
         "command resource", "nic-fatal", "0000:03:00.0", None, "command-timeout", None, None),
        ("mlx5_core 0000:5c:00.0: Port module event[error]: module 0, Cable error, High Temperature", "nic-warning",
         "0000:5c:00.0", None, "module-temperature", None, None),
        ("[   10.735323] pci 0000:04:00.0: 252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 "
         "link at 0000:01:00.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)", "pcie-link-limited",
         "0000:04:00.0", None, "bandwidth-limited", None, None),
        ("pcieport 0000:00:1c.1: AER: Corrected error received: 0000:00:1c.1", "pcie-aer", "0000:00:1c.1", None,
         "corrected", None, None),
        ("pcieport 0000:80:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:81:00.0", "pcie-aer",
         "0000:81:00.0", None, "uncorrected-nonfatal", None, None),
        ("pcieport 0000:80:01.0: AER: Multiple Uncorrected (Fatal) error received: 0000:81:00.0", "pcie-aer",
         "0000:81:00.0", None, "uncorrected-fatal", None, None),
    ],
)  # fmt: skip
def test_classified_lines(line, kind, device, code, category, nvlink, fatal):
    event = parse_kernel_line(line)
    assert (event.kind, event.device, event.code, event.category, event.nvlink, event.fatal) == (
        kind, device, code, category, nvlink, fatal)  # fmt: skip


def test_xid_event_carries_its_catalog_entry():
    event = parse_kernel_line("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s")
    assert (event.xid.name, event.xid.severity, event.category) == ("GSP_RPC_TIMEOUT", "critical", "gpu")
    assert parse_kernel_line("eth0: Link is Down").xid is None


def test_netdev_watchdog_names_the_interface():
    event = parse_kernel_line("NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 0 timed out")
    assert (event.kind, event.interface, event.category) == ("nic-warning", "eth0", "tx-timeout")


def test_real_mlx5_lines_nvsentinel():
    log = parse_kernel_log((KLOG / "nvsentinel-tests/mlx5_core-lines.txt").read_text())
    assert [(e.kind, e.category) for e in log] == [
        ("nic-warning", "tx-timeout"), ("nic-warning", "command-error"), ("nic-fatal", "command-timeout"),
        ("nic-warning", "pcie-slot-power"), ("nic-warning", "cable-unplugged"), ("nic-warning", "module-temperature"),
        ("nic-fatal", "health-compromised"), ("nic-fatal", "unrecoverable-error"),
    ]  # fmt: skip


def test_real_xid_lines_catalog_components():
    log = parse_kernel_log((KLOG / "nvsentinel-tests/nvrm-xid-lines.txt").read_text())
    assert {(e.code, e.category) for e in log} == {
        (46, "gpu"), (32, "driver"), (8, "driver"), (13, "driver"), (69, "driver"), (74, "nvlink"), (154, "driver"),
        (149, "nvlink"), (145, "nvlink"), (79, "pcie"),
    }  # fmt: skip


def test_real_aer_lines_are_corrected():
    for name in ("issues/pcie-aer_correctable_new-format_dasharo-coreboot-pr815.txt",
                 "issues/pcie-aer_corrected_older-format_archfan-coreboot-issue2.txt"):  # fmt: skip
        assert {e.category for e in parse_kernel_log((KLOG / name).read_text())} == {"corrected"}


def test_real_ml_engineering_dmesg():
    limited = parse_kernel_log((REAL / "ml-engineering-excerpts/dmesg_pcie-bandwidth-limited_h100.txt").read_text())
    assert [(e.kind, e.device) for e in limited] == [("pcie-link-limited", "0000:04:00.0"),
                                                     ("pcie-link-limited", "0000:8b:00.0")]  # fmt: skip
    (xid,) = parse_kernel_log((REAL / "ml-engineering-excerpts/dmesg_xid63_a100.txt").read_text())
    assert (xid.code, xid.device, xid.xid.name) == (63, "0000:10:1c", "INFOROM_DRAM_RETIREMENT_EVENT")
