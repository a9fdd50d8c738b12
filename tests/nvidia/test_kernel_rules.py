"""Kernel-log rules (analysis/kernel.py): Xid by catalog class mapped to gpu:<index>, SXid per switch, link
downs, NIC faults, AER and limited PCIe links."""

from __future__ import annotations

from pathlib import Path

from analysis.capture_builder import write_host
from fabricase.analysis import gpu, kernel
from fabricase.models import Evidence, Severity

REAL = Path(__file__).parents[1] / "fixtures/real"
KLOG = REAL / "kernel-log"
H100_8 = REAL / "leptonai-gpud/nvidia-smi/nvidia-smi-query.535.161.08.out.0.valid.txt"


def _findings(tmp_path, log, smi=None, with_samples=True):
    files = {(0, "cmd:kernel-log"): log} | ({(0, "cmd:nvidia-smi-q"): smi} if smi else {})
    hc = write_host(tmp_path, "gpu001", files)
    return kernel.kernel_log_events(hc, gpu.gpu_samples(hc) if with_samples else [])


def test_xid_maps_to_the_gpu_index_and_takes_the_catalog_severity(tmp_path):
    log = (KLOG / "leptonai-gpud/dmesg-with-xid-119.log").read_text()
    for samples in (True, False):  # from the samples, or straight from nvidia-smi when no samples are given
        (finding,) = _findings(tmp_path / str(samples), log, H100_8.read_text(), samples)
        assert (finding.kind, finding.severity, finding.component) == ("nvidia-xid", Severity.CRITICAL, "gpu:4")
        assert finding.summary == ("GPU 4 (0000:9b:00): Xid 119 GSP_RPC_TIMEOUT x5 in the kernel log, last at "
                                   "Sun Feb 23 16:30:13 2025")  # fmt: skip
        assert finding.evidence == [Evidence("xid_119", 5, "events", None, "cmd:kernel-log", 0)]
    (unmapped,) = _findings(tmp_path / "x", log)
    assert unmapped.component == "pcie:0000:9b:00" and unmapped.summary.startswith("GPU at PCI 0000:9b:00: Xid 119")


def test_xid_classes_from_real_lines(tmp_path):
    found = {f.component: f for f in _findings(tmp_path, (KLOG / "nvsentinel-tests/nvrm-xid-lines.txt").read_text())}
    assert found["pcie:0003:00:00"].severity == Severity.MAJOR  # 74 NVLink
    assert "74 NVLINK_ERROR x1 link 14" in found["pcie:0003:00:00"].summary
    assert found["pcie:0000:b5:00"].severity == Severity.MINOR  # 13 application fault
    assert found["pcie:0008:01:00"].severity == Severity.INFO  # 154 only names another Xid's action
    assert found["pcie:0000:00:08.0"].severity == Severity.CRITICAL  # 79 with 145
    assert [e.metric for e in found["pcie:0000:00:08.0"].evidence] == ["xid_79", "xid_145"]


def test_sxid_per_switch_non_fatal_lines_cap_at_major(tmp_path):
    found = {f.component: f for f in _findings(tmp_path, (KLOG / "nvsentinel-tests/nvswitch-sxid-lines.txt")
                                               .read_text())}  # fmt: skip
    assert set(found) == {"nvswitch:0000:c3:00.0", "nvswitch:0000:c1:00.0", "nvswitch:0000:06:00.0",
                          "nvswitch:0004:00:00.0"}  # fmt: skip
    assert found["nvswitch:0000:c3:00.0"].severity == Severity.CRITICAL  # 24007 Fatal, RESET_GPU
    assert found["nvswitch:0004:00:00.0"].severity == Severity.CRITICAL  # SOE halt
    assert found["nvswitch:0000:06:00.0"].severity == Severity.MAJOR  # 20009 link 4 short error rate
    assert [e.metric for e in found["nvswitch:0004:00:00.0"].evidence] == ["sxid_26006", "sxid_26007", "sxid_26008"]
    line = "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Non-fatal, Link 35\n"
    (capped,) = _findings(tmp_path / "b", line)
    assert capped.severity == Severity.MAJOR  # the catalog says RESET_FABRIC; the switch logged it non-fatal


def test_link_down_repeated_is_major(tmp_path):
    log = "".join(f"[ {i}.0] mlx5_core 0000:3b:00.0 eth2: Link {'down' if i % 2 == 0 else 'up'}\n" for i in range(6))
    (finding,) = _findings(tmp_path, log + "[ 9.0] eth3: Link is Down\n[ 9.5] docker0: Link is Down\n")[:1]
    assert (finding.component, finding.severity) == ("netdev:eth2", Severity.MAJOR)
    assert finding.summary == "eth2: 3 link-down message(s) in the kernel log, last at 4.0, came back up"
    once = _findings(tmp_path / "b", "[ 9.0] eth3: Link is Down\n")
    assert [(f.component, f.severity) for f in once] == [("netdev:eth3", Severity.MINOR)]


def test_nic_faults_and_warnings(tmp_path):
    found = _findings(tmp_path, (KLOG / "nvsentinel-tests/mlx5_core-lines.txt").read_text())
    assert [(f.kind, f.component, f.severity) for f in found] == [
        ("nic-firmware-fault", "host", Severity.MAJOR),
        ("nic-firmware-fault", "pcie:0000:03:00.0", Severity.MAJOR),
        ("nic-firmware-fault", "pcie:0000:d2:00.0", Severity.MAJOR),
        ("nic-driver-warning", "netdev:eth0", Severity.MINOR),
        ("nic-driver-warning", "pcie:0000:5c:00.0", Severity.MINOR),
    ]  # slot power and cable unplugged (boot-time noise on healthy hosts), a failed register read: not reported
    assert found[2].evidence == [Evidence("nic_health_compromised", 1, "events", None, "cmd:kernel-log", 0)]


def test_aer_and_limited_links(tmp_path):
    corrected = (KLOG / "issues/pcie-aer_corrected_older-format_archfan-coreboot-issue2.txt").read_text()
    assert _findings(tmp_path, corrected) == []  # three corrected errors: below the burst threshold
    burst = corrected * 4
    (finding,) = _findings(tmp_path / "b", burst)
    assert (finding.kind, finding.severity) == ("kernel-pcie-aer", Severity.MINOR)
    assert finding.component == "pcie:0000:00:1c.1"
    fatal = "pcieport 0000:80:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:9b:00.0\n"
    (finding,) = _findings(tmp_path / "c", fatal, H100_8.read_text())
    assert (finding.severity, finding.component) == (Severity.MAJOR, "gpu:4")
    assert finding.evidence == [Evidence("aer_uncorrected_nonfatal", 1, "events", 0, "cmd:kernel-log", 0)]
    limited = (REAL / "ml-engineering-excerpts/dmesg_pcie-bandwidth-limited_h100.txt").read_text()
    assert [(f.kind, f.component) for f in _findings(tmp_path / "d", limited)] == [
        ("pcie-link-limited", "pcie:0000:04:00.0"), ("pcie-link-limited", "pcie:0000:8b:00.0")]  # fmt: skip


def test_no_log_no_findings(tmp_path):
    hc = write_host(tmp_path, "h", {(0, "cmd:nvidia-smi-q"): H100_8.read_text()})
    assert kernel.kernel_log_events(hc, []) == []


def test_xid_45_takes_the_weight_of_the_xid_it_cleans_up_after(tmp_path):
    log = (KLOG / "issues/nvrm-xid-145-149-45_gb200_open-gpu-kernel-modules-issue-1150.txt").read_text()
    found = {f.component: f for f in _findings(tmp_path, log)}
    assert set(found) == {"pcie:0000:dc:00", "pcie:0000:ed:00", "pcie:0000:ba:00", "pcie:0000:97:00"}
    assert {f.severity for f in found.values()} == {Severity.MAJOR}  # 145/149 NVLink, not 45's own minor
    assert found["pcie:0000:dc:00"].summary == (
        "GPU at PCI 0000:dc:00: Xid 45 ROBUST_CHANNEL_PREEMPTIVE_REMOVAL x2 after Xid 149 in the kernel log")
    (solo,) = _findings(tmp_path / "b", "NVRM: Xid (PCI:0000:9b:00): 45, pid=1, name=python3, Ch 00000001\n")
    assert solo.severity == Severity.MINOR
