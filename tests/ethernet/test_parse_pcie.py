"""PCIe parsers against every real lspci capture and the sysfs link/AER files of the procfs and node_exporter
fixtures."""

from __future__ import annotations

from collections import Counter

import pytest

from fabricase.parsers.pcie import (
    is_fabric_class,
    normalize_bdf,
    parse_aer_counters,
    parse_lspci_vvv,
    parse_pci_class,
    parse_pci_tree,
    parse_pcie_speed,
)

from .conftest import FIXTURES

PCIE = FIXTURES / "pcie"
GPUD = PCIE / "leptonai-gpud"


def test_real_lspci_vvv_h100_host():
    report = parse_lspci_vvv((GPUD / "lspci-vvv.txt").read_text())
    assert report.errors == [] and len(report.devices) == 517
    gpu = report.devices["0000:19:00.0"]
    assert (gpu.class_name, gpu.driver, gpu.cap_speed_gts, gpu.cap_width, gpu.sta_speed_gts, gpu.sta_width) == (
        "3D controller", "nvidia", 32.0, 16, 32.0, 16)
    assert (gpu.speed_downgraded, gpu.width_downgraded) == (False, False)
    cx7 = report.devices["0000:1a:00.0"]
    assert (cx7.name, cx7.driver, cx7.sta_speed_gts, cx7.sta_width) == (
        "Mellanox Technologies MT2910 Family [ConnectX-7]", "mlx5_core", 32.0, 16)
    # the on-board 1G NIC trained x1 of x2, a Gen5 switch upstream port runs at Gen4 speed
    bcm = report.devices["0000:01:00.0"]
    assert (bcm.cap_width, bcm.sta_width, bcm.width_downgraded, bcm.speed_downgraded) == (2, 1, True, False)
    switch = report.devices["0000:17:00.0"]
    assert (switch.cap_speed_gts, switch.sta_speed_gts, switch.speed_downgraded) == (32.0, 16.0, True)
    downgraded = sorted(b for b, d in report.devices.items() if d.speed_downgraded or d.width_downgraded)
    assert len(downgraded) == 16 and "0000:81:00.1" in downgraded
    classes = Counter(d.class_name for d in report.devices.values())
    assert (classes["3D controller"], classes["Ethernet controller"], classes["PCI bridge"]) == (8, 14, 59)
    assert sum(d.driver == "mlx5_core" for d in report.devices.values()) == 12


def test_real_lspci_with_domains_and_nn_codes():
    gb200 = parse_lspci_vvv((GPUD / "lspci_gb200.txt").read_text())
    assert gb200.errors == [] and len(gb200.devices) == 87
    ib = gb200.devices["0002:03:00.0"]
    assert (ib.class_name, ib.name, ib.sta_speed_gts) == (
        "Infiniband controller", "Mellanox Technologies MT2910 Family [ConnectX-7]", None)
    a100 = parse_lspci_vvv((GPUD / "lspci-nn_a100-with-nvswitch.txt").read_text())
    assert a100.errors == [] and len(a100.devices) == 31
    codes = Counter((d.class_name, d.class_code) for d in a100.devices.values())
    assert codes[("3D controller", 0x0302)] == 8 and codes[("Infiniband controller", 0x0207)] == 8
    assert codes[("Bridge", 0x0680)] == 6
    a10 = parse_lspci_vvv((GPUD / "lspci-nn_a10.txt").read_text())
    assert a10.errors == [] and len(a10.devices) == 20


def test_lspci_older_link_lines_and_garbage():
    text = ("3b:00.0 3D controller: NVIDIA Corporation GA100\n"
            "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
            "\t\tLnkCap2: Supported Link Speeds: 2.5-16GT/s, Crosslink- Retimer+\n"
            "\t\tLnkSta:\tSpeed 2.5GT/s, Width x16, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-\n"
            "\t\tLnkSta2: Current De-emphasis Level: -3.5dB\n"
            "garbage line\n\tLnkSta: orphan\n"
            "3c:00.0 Ethernet controller: X\n\t\tLnkSta:\tSpeed unknown, Width x0\n\t\tLnkCap:\tnonsense\n")
    report = parse_lspci_vvv(text)
    gpu = report.devices["0000:3b:00.0"]
    assert (gpu.cap_speed_gts, gpu.sta_speed_gts, gpu.sta_width, gpu.speed_downgraded) == (16.0, 2.5, 16, None)
    nic = report.devices["0000:3c:00.0"]
    assert (nic.sta_speed_gts, nic.sta_width, nic.cap_speed_gts) == (None, 0, None)
    assert report.errors == ["not a device line: 'garbage line'", "0000:3c:00.0: unreadable LnkCap: '\\tnonsense'"]


def _sysfs(root, bdf_dir: str, attr: str) -> str:
    return next(PCIE.glob(f"{root}/sys/devices/*/**/{bdf_dir}/{attr}")).read_text()


@pytest.mark.parametrize("root,bdf,speeds,widths", [
    ("prometheus-procfs-sysfs", "0000:00:02.1", (8.0, 8.0), (4, 8)),
    ("prometheus-procfs-sysfs", "0000:a2:00.0", (16.0, 16.0), (8, 8)),
    ("prometheus-node_exporter-sysfs", "0000:01:00.0", (8.0, 16.0), (4, 4)),
    ("prometheus-node_exporter-sysfs", "0000:45:00.0", (5.0, 5.0), (4, 4)),
])  # fmt: skip
def test_real_sysfs_link_attributes(root, bdf, speeds, widths):
    from fabricase.parsers.sysfs import parse_sysfs_int

    assert (parse_pcie_speed(_sysfs(root, bdf, "current_link_speed")),
            parse_pcie_speed(_sysfs(root, bdf, "max_link_speed"))) == speeds
    assert (parse_sysfs_int(_sysfs(root, bdf, "current_link_width")),
            parse_sysfs_int(_sysfs(root, bdf, "max_link_width"))) == widths


def test_link_speed_strings():
    assert [parse_pcie_speed(t) for t in ("16.0 GT/s PCIe\n", "8 GT/s", "2.5 GT/s PCIe", "32GT/s", "64.0 GT/s PCIe",
                                          "Unknown", "Unknown speed", "", None)] == [
        16.0, 8.0, 2.5, 32.0, 64.0, None, None, None, None]


def test_real_aer_files():
    nic = "prometheus-procfs-sysfs"
    correctable = parse_aer_counters(_sysfs(nic, "0000:00:1f.6", "aer_dev_correctable"))
    assert correctable.total == 9 and correctable.errors == []
    assert correctable.counters == {"RxErr": 1, "BadTLP": 2, "BadDLLP": 3, "Rollover": 4, "Timeout": 5,
                                    "NonFatalErr": 6, "CorrIntErr": 7, "HeaderOF": 8}
    fatal = parse_aer_counters(_sysfs(nic, "0000:00:1f.6", "aer_dev_fatal"))
    assert (fatal.total, fatal.counters["DLP"], fatal.counters["PoisonTLPBlocked"], len(fatal.counters)) == (
        28, 11, 27, 18)
    # this kernel labels the nonfatal file's total TOTAL_ERR_FATAL; the file, not the label, says what it counts
    assert parse_aer_counters(_sysfs(nic, "0000:00:1f.6", "aer_dev_nonfatal")).total == 48
    healthy = parse_aer_counters(_sysfs("prometheus-node_exporter-sysfs", "0000:45:00.0", "aer_dev_correctable"))
    assert healthy.total == 0 and set(healthy.counters.values()) == {0}
    assert parse_aer_counters(_sysfs(nic, "0000:00:03.0", "aer_rootport_total_err_cor")).total == 0
    broken = parse_aer_counters("RxErr 1\nBadTLP x\n")
    assert broken.counters == {"RxErr": 1} and broken.total is None and broken.errors == [
        "not an AER counter line: 'BadTLP x'"]


def test_classes_and_addresses():
    codes = {name: parse_pci_class(_sysfs(root, bdf, "class")) for name, root, bdf in (
        ("nic", "prometheus-procfs-sysfs", "0000:00:1f.6"), ("bridge", "prometheus-procfs-sysfs", "0000:00:02.1"),
        ("nvme", "prometheus-procfs-sysfs", "0000:01:00.0"), ("sas", "prometheus-procfs-sysfs", "0000:03:00.0"))}
    assert codes == {"nic": 0x020000, "bridge": 0x060400, "nvme": 0x010802, "sas": 0x010700}
    assert [is_fabric_class(c) for c in (0x020000, 0x020700, 0x030200, 0x030000, 0x060400, 0x068000, 0x010802,
                                         None)] == [True, True, True, True, True, False, False, False]
    assert parse_pci_class("0x0200") is None and parse_pci_class("junk") is None
    assert normalize_bdf("3B:00.0") == "0000:3b:00.0" and normalize_bdf("0002:03:00.0") == "0002:03:00.0"
    assert normalize_bdf("3b:00.9") is None and normalize_bdf("eth0") is None


def test_pci_tree_from_ls_l():
    text = ("total 0\n"
            "lrwxrwxrwx 1 root root 0 Nov 29 23:06 0000:15:01.0 -> ../../../devices/pci0000:15/0000:15:01.0\n"
            "lrwxrwxrwx 1 root root 0 Nov 29 23:06 0000:19:00.0 -> "
            "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:19:00.0\n"
            "not a link line\n")  # fmt: skip
    assert parse_pci_tree(text) == {"0000:19:00.0": "0000:17:00.0"}
    assert parse_pci_tree(None) == {}
