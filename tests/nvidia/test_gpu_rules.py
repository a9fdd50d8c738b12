"""GPU-fabric rules on small captures built from real outputs (and the edge cases between them)."""

from __future__ import annotations

from pathlib import Path

from test_parse_fabric_daemons import IMEX

from analysis.capture_builder import write_host
from fabricase.analysis import gpu
from fabricase.models import Severity
from hosttrees.nvidia import capture_section

REAL = Path(__file__).parents[1] / "fixtures/real"
LEPTON = REAL / "leptonai-gpud/nvidia-smi"
H100 = REAL / "nvidia-smi_nvidia_gpu_exporter/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"


def _findings(tmp_path, files, rule=None):
    hc = write_host(tmp_path, "gpu001", files)
    rules = [rule] if rule else gpu.RULES
    return [f for r in rules for f in r(hc, gpu.gpu_samples(hc))]


def _q(text):
    return {(0, "cmd:nvidia-smi-q"): text}


def test_real_healthy_outputs_give_no_findings(tmp_path):
    h100 = H100.read_text()
    files = {(0, "cmd:nvidia-smi-q"): capture_section(h100, "load :: query (-q)"),
             (0, "cmd:nvlink-status"): capture_section(h100, "capabilities :: nvlink -s"),
             (0, "cmd:nvidia-topo"): capture_section(h100, "capabilities :: topo -m")}  # fmt: skip
    assert _findings(tmp_path, files) == []
    # idle consumer GPUs at Gen1 of Gen4 in P8 lower their link speed on purpose: not a downgrade
    rtx4090 = (LEPTON / "nvidia-smi-query.535.154.05.out.0.valid.4090.txt").read_text()
    assert _findings(tmp_path / "b", _q(rtx4090)) == []


def test_real_a10_pending_row_remap(tmp_path):
    (finding,) = _findings(tmp_path, _q((LEPTON / "nvidia-smi-query.535.129.03.out.0.valid.a10.txt").read_text()))
    assert (finding.kind, finding.severity, finding.component) == ("gpu-memory-remap", Severity.MINOR, "gpu:0")
    assert finding.summary == "GPU 0: remapped rows pending (4 uncorrectable)"


def test_pcie_width_and_busy_gen_downgrade(tmp_path):
    q = capture_section(H100.read_text(), "load :: query (-q)")
    narrow = q.replace("Current                                : 16x", "Current                                : 8x")
    (finding,) = _findings(tmp_path, _q(narrow), gpu.gpu_pcie_downgraded)
    assert (finding.summary, finding.confidence) == ("GPU 0: PCIe link x8 of x16", 0.9)
    assert (finding.evidence[0].metric, finding.evidence[0].value, finding.evidence[0].baseline) == (
        "pcie.link_width", 8, 16)  # fmt: skip
    slow = q.replace("Current                                : 5\n", "Current                                : 4\n")
    (finding,) = _findings(tmp_path / "b", _q(slow), gpu.gpu_pcie_downgraded)
    assert (finding.summary, finding.confidence) == ("GPU 0: PCIe link Gen4 of Gen5", 0.6)


def test_fabric_health_problem_is_major(tmp_path):
    q = capture_section(H100.read_text(), "load :: query (-q)").replace(
        "Route Unhealthy                            : N/A", "Route Unhealthy                            : True")
    (finding,) = _findings(tmp_path, _q(q))
    assert (finding.kind, finding.severity, finding.summary) == (
        "gpu-fabric-unhealthy", Severity.MAJOR, "GPU 0: fabric health.route_unhealthy True")  # fmt: skip


def test_nvlink_inactive_edge_cases(tmp_path):
    bad = (REAL / "azhpc-diagnostics-samples/nvlink.bad.out").read_text()
    found = _findings(tmp_path, {(0, "cmd:nvlink-status"): bad}, gpu.nvlink_inactive)
    assert [f.component for f in found] == ["nvlink:3/3", "nvlink:3/5", "nvlink:4/1", "nvlink:5/0", "nvlink:5/4",
                                            "nvlink:6/1"]  # fmt: skip
    assert found[0].summary == "GPU 3 NVLink 3 inactive while 4 of 6 links are active at 25.781 GB/s"
    one_gpu_dark = bad.replace("25.781 GB/s", "<inactive>", 6)  # GPU 0 loses every link
    found = _findings(tmp_path / "b", {(0, "cmd:nvlink-status"): one_gpu_dark}, gpu.nvlink_inactive)
    assert found[0].component == "gpu:0" and found[0].summary.startswith("GPU 0: no active NVLink (6 links inactive)")
    everything_dark = "GPU 0: X (UUID: GPU-a)\n\t Link 0: <inactive>\nGPU 1: X (UUID: GPU-b)\n\t Link 0: <inactive>\n"
    assert _findings(tmp_path / "c", {(0, "cmd:nvlink-status"): everything_dark}, gpu.nvlink_inactive) == []


def _errors(replay, crc):
    return f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n\t Link 7: Replay Errors: {replay}\n" \
           f"\t Link 7: Recovery Errors: 0\n\t Link 7: CRC Errors: {crc}\n"  # fmt: skip


def test_nvlink_errors_crc_only_is_minor_and_a_reset_is_not_an_increase(tmp_path):
    (finding,) = _findings(tmp_path, {(0, "cmd:nvlink-errors"): _errors(5, 1), (1, "cmd:nvlink-errors"): _errors(5, 4)},
                           gpu.nvlink_errors)  # fmt: skip
    assert (finding.severity, finding.component) == (Severity.MINOR, "nvlink:0/7")
    assert finding.summary == "GPU 0 NVLink 7: nvlink.crc_flit_errors +3 (0.3/s) in 10 s"
    reset = {(0, "cmd:nvlink-errors"): _errors(500, 9), (1, "cmd:nvlink-errors"): _errors(0, 0)}
    assert _findings(tmp_path / "b", reset, gpu.nvlink_errors) == []


def test_fabric_manager_needs_nvswitches(tmp_path):
    fm = {(0, "cmd:fabric-manager"): "### systemctl is-active nvidia-fabricmanager\ninactive\n"}
    assert _findings(tmp_path, fm, gpu.fabric_manager_down) == []  # a PCIe host: nothing expects it
    switch = {(0, "/proc/driver/nvidia-nvswitch/devices/0000:05:00.0/information"): "BIOS Version: 96.10.6d.00.01\n"}
    (finding,) = _findings(tmp_path / "b", fm | switch, gpu.fabric_manager_down)
    assert finding.summary == "nvidia-fabricmanager is inactive on a host with 1 NVSwitches"


def test_imex(tmp_path):
    (finding,) = _findings(tmp_path, {(0, "cmd:imex-status"): IMEX})
    assert (finding.kind, finding.component, finding.severity, finding.confidence) == (
        "imex-unhealthy", "imex", Severity.MAJOR, 0.9)  # fmt: skip
    assert finding.summary == "IMEX: domain DEGRADED, 1 of 3 nodes not READY, 5 connections not C (connected)"
    down = _findings(tmp_path / "b", {(0, "cmd:imex-status"): "IMEX daemon is not running\n"})
    assert [(f.summary, f.confidence) for f in down] == [("IMEX: domain IMEX daemon is not running", 0.7)]


def test_dcgm_health(tmp_path):
    text = ("| Overall Health | Failure |\n| GPU            |         |\n| -> 3           | Failure |\n"
            "| -> 10          | Warning |\n")  # fmt: skip
    switches = {(0, f"/proc/driver/nvidia-nvswitch/devices/0000:{bus}:00.0/information"): "BIOS Version: N/A\n"
                for bus in ("86", "a8")}  # fmt: skip
    found = _findings(tmp_path, {(0, "cmd:dcgm-health"): text} | switches)
    assert [(f.kind, f.component, f.severity) for f in found] == [
        ("dcgm-health", "gpu:3", Severity.MAJOR), ("dcgm-health", "gpu:10", Severity.MINOR)]  # fmt: skip


def test_nvswitch_errors_in_the_fabric_manager_log(tmp_path):
    log = (REAL / "leptonai-gpud/fabric-manager/fm-log-lines_from-unit-tests.txt").read_text()
    found = _findings(tmp_path, {(0, "cmd:fabric-manager-log"): log}, gpu.nvswitch_fm_errors)
    assert [(f.component, f.severity, f.summary) for f in found] == [
        ("nvswitch:0000:86:00.0", Severity.MAJOR,
         "NVSwitch 0000:86:00.0: Fabric Manager log has 1 fatal, 1 nonfatal NVSwitch error entries"),
    ]
    assert found[0].evidence[0].metric == "nvswitch.fm_fatal_errors" and found[0].confidence == 0.6
