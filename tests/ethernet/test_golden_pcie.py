"""Golden end-to-end tests of the pcie collector: recorded hosts (a synthetic 8-GPU/8-NIC tree, the real lspci of
an H100 host, the real sysfs of the procfs fixture) through the real capture script, then analysis.pcie."""

from __future__ import annotations

import os
import shutil

from fabricase.analysis import pcie
from fabricase.models import Severity
from hosttrees import record_command
from hosttrees.ethernet import GPU_BDFS, NIC_BDFS, add_pcie_devices

from .conftest import FIXTURES


def _by(samples, component, metric):
    return next(s for s in samples if s.component == component and s.metric == metric)


def _findings(hc):
    samples = pcie.samples(hc)
    return samples, [f for rule in pcie.RULES for f in rule(hc, samples)]


def test_healthy_host(tmp_path, capture_tree):
    root = tmp_path / "host"
    add_pcie_devices(root)
    hc = capture_tree(root, "pcie")
    samples, findings = _findings(hc)
    assert findings == []
    components = {s.component for s in samples}
    # 8 NICs, 8 GPUs, and per pair a root port, a switch upstream and two downstream ports; the NVMe is left out
    assert len(components) == 16 + 8 * 4 and "pcie:0000:01:00.0" not in components
    nic = f"pcie:{NIC_BDFS[0]}"
    assert _by(samples, nic, "pcie.class_code").value == 0x020000
    assert _by(samples, nic, "pcie.link_speed_gts.current").value == 32.0
    assert _by(samples, nic, "pcie.link_width.max").source == f"/sys/bus/pci/devices/{NIC_BDFS[0]}/max_link_width"
    aer = _by(samples, f"pcie:{GPU_BDFS[0]}", "pcie.aer_correctable")
    assert (aer.value, aer.delta) == (0, 0)
    assert _by(samples, "pcie:0000:15:01.0", "pcie.aer_rootport_correctable").value == 0


def test_degraded_host_names_the_device(tmp_path, capture_tree):
    root = tmp_path / "host"
    add_pcie_devices(root, downgraded_bdf=NIC_BDFS[2], aer_bdf=GPU_BDFS[1])
    hc = capture_tree(root, "pcie")
    _, findings = _findings(hc)
    assert [(f.kind, f.severity, f.component) for f in findings] == [
        ("pcie-downgraded", Severity.MAJOR, "pcie:0000:4d:00.0"),
        ("pcie-aer", Severity.MINOR, "pcie:0000:3b:00.0"),
    ]
    down, aer = findings
    assert down.summary == "NIC 0000:4d:00.0: PCIe link x8 (capable x16)" and down.confidence == 0.9
    assert [(e.metric, e.value, e.baseline, e.source) for e in down.evidence] == [
        ("pcie.link_width.current", 8, 16, "/sys/bus/pci/devices/0000:4d:00.0/current_link_width")]
    assert aer.summary.startswith("GPU 0000:3b:00.0: aer_correctable +12 (RxErr +10, BadTLP +2) in ")
    assert [(e.metric, e.value, e.snapshot) for e in aer.evidence] == [("pcie.aer_correctable.delta", 12, 1)]


def test_real_lspci_of_an_h100_host(tmp_path, capture_tree):
    """Only lspci: every downgraded endpoint is named, the bridges (partner speed unknown) are not judged."""
    root = tmp_path / "host"
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    record_command(root, "lspci", ["-vvv"], (FIXTURES / "pcie/leptonai-gpud/lspci-vvv.txt").read_bytes())
    hc = capture_tree(root, "pcie")
    samples, findings = _findings(hc)
    assert len({s.component for s in samples}) == 8 + 14 + 59 + 1  # 3D, Ethernet, PCI bridges, the BMC's VGA
    assert _by(samples, "pcie:0000:19:00.0", "pcie.link_speed_gts.current").source == "cmd:lspci"
    assert [(f.kind, f.component, f.severity, f.confidence) for f in findings] == [
        ("pcie-downgraded", "pcie:0000:01:00.0", Severity.MAJOR, 0.7),
        ("pcie-downgraded", "pcie:0000:01:00.1", Severity.MAJOR, 0.7),
    ]
    assert findings[0].summary == "NIC 0000:01:00.0: PCIe link x1 (capable x2)"


def _sysfs_tree(tmp_path, fixture: str):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "pcie" / fixture / "sys", root / "sys")
    links = root / "sys/bus/pci/devices"
    links.mkdir(parents=True)
    for device in sorted((root / "sys/devices").glob("pci*/**/????:??:??.?")):
        os.symlink("../../../" + str(device.relative_to(root / "sys")), links / device.name)
    return root


def test_real_sysfs_of_the_procfs_fixture(tmp_path, capture_tree):
    hc = capture_tree(_sysfs_tree(tmp_path, "prometheus-procfs-sysfs"), "pcie")
    samples, findings = _findings(hc)
    assert findings == []
    # NVMe and SAS controllers are not fabric devices; the NIC without link files still reports its AER totals
    assert sorted({s.component for s in samples}) == ["pcie:0000:00:02.1", "pcie:0000:00:03.0", "pcie:0000:00:1f.6",
                                                      "pcie:0000:a2:00.0"]
    assert [_by(samples, "pcie:0000:00:1f.6", m).value for m in ("pcie.aer_correctable", "pcie.aer_nonfatal",
                                                                 "pcie.aer_fatal")] == [9, 48, 28]
    assert _by(samples, "pcie:0000:00:02.1", "pcie.link_width.current").value == 4
    assert _by(samples, "pcie:0000:00:03.0", "pcie.aer_rootport_correctable").value == 0


def test_real_sysfs_partner_capability_excuses_a_slow_link(tmp_path, capture_tree):
    """node_exporter's NVMe (Gen4 x4) runs Gen3 below a Gen3 port: judged as a NIC, it would not be downgraded."""
    root = _sysfs_tree(tmp_path, "prometheus-node_exporter-sysfs")
    nvme = next((root / "sys/devices").glob("pci0000:00/*/0000:01:00.0"))
    (nvme / "class").write_text("0x020000\n")  # pretend it is a NIC to put it in scope
    hc = capture_tree(root, "pcie")
    _, findings = _findings(hc)
    assert findings == []
    (root / "sys/bus/pci/devices/0000:00:02.1").unlink()  # without the port, only its own capability is known
    hc = capture_tree(root, "pcie")
    _, findings = _findings(hc)
    assert [(f.component, f.confidence, f.summary) for f in findings] == [
        ("pcie:0000:01:00.0", 0.7, "NIC 0000:01:00.0: PCIe link 8 GT/s (capable 16 GT/s)")]
