"""nvidia-smi nvlink -s / -e and topo -m against every real capture of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricase.parsers.nvlink import parse_nvlink_errors, parse_nvlink_status, parse_topo_matrix
from hosttrees.nvidia import capture_section

REAL = Path(__file__).parents[1] / "fixtures/real"
EXPORTER = sorted((REAL / "nvidia-smi_nvidia_gpu_exporter").glob("linux-*.txt"))
ML = REAL / "ml-engineering-excerpts"


def test_azure_v100_bad_sample_names_the_inactive_links():
    report = parse_nvlink_status((REAL / "azhpc-diagnostics-samples/nvlink.bad.out").read_text())
    assert report.errors == [] and sorted(report.gpus) == list(range(7))
    inactive = {i: [n for n, link in g.links.items() if link.state == "inactive"] for i, g in report.gpus.items()}
    assert inactive == {0: [], 1: [], 2: [], 3: [3, 5], 4: [1], 5: [0, 4], 6: [1]}
    assert report.gpus[0].name == "Tesla V100-SXM2-32GB"
    assert report.gpus[3].uuid == "GPU-50b1bd2e-77ee-2731-fd2f-17c44103b7b9"
    assert {link.speed_gbps for g in report.gpus.values() for link in g.links.values()} == {25.781, None}


def test_a100_twelve_links_at_25():
    report = parse_nvlink_status((REAL / "leptonai-gpud/nvidia-smi/nvidia-smi_nvlink_status_8xA100.txt").read_text())
    assert report.errors == [] and len(report.gpus) == 8
    assert all(len(g.links) == 12 and {x.speed_gbps for x in g.links.values()} == {25.0} for g in report.gpus.values())


@pytest.mark.parametrize("path", EXPORTER, ids=lambda p: p.name)
def test_exporter_nvlink_status(path):
    report = parse_nvlink_status(capture_section(path.read_text(), "capabilities :: nvlink -s"))
    assert report.errors == []
    (gpu,) = report.gpus.values()
    if "mig" in path.name:
        assert gpu.links == {} and gpu.unsupported == "Nvlink queries are not supported for Devices in MIG mode"
    elif "l40s" in path.name:
        assert gpu.links == {} and gpu.unsupported == "Device does not have or support Nvlink"
    else:  # H100/H200 SXM: 18 links at 26.562 GB/s
        assert sorted(gpu.links) == list(range(18)) and gpu.unsupported is None
        assert {(x.state, x.speed_gbps) for x in gpu.links.values()} == {("active", 26.562)}


def test_abridged_h100_status_and_errors():
    status = parse_nvlink_status((ML / "nvidia-smi_nvlink-status_h100_abridged.txt").read_text())
    assert status.errors == [] and sorted(status.gpus[0].links) == [0, 17]
    errors = parse_nvlink_errors((ML / "nvidia-smi_nvlink-e_h100_abridged.txt").read_text())
    assert errors.errors == [] and sorted(errors.gpus[0].links) == [0, 1, 17]
    link = errors.gpus[0].links[17]
    assert link.counters == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
    assert (link.metric("nvlink.replay_errors"), link.metric("nvlink.crc_flit_errors")) == (0, 0)
    assert link.metric("nvlink.crc_data_errors") is None  # not printed: unknown, not 0


def test_errors_keep_unknown_counters_and_flag_bad_values():
    text = ("GPU 0: NVIDIA B200 (UUID: GPU-x)\n\t Link 0: Replay Errors: 7\n\t Link 0: Rx Errors: 3\n"
            "\t Link 0: Effective BER: N/A\n\t Link 1: CRC Errors: lots\n")  # fmt: skip
    report = parse_nvlink_errors(text)
    assert report.gpus[0].links[0].counters == {"Replay Errors": 7, "Rx Errors": 3}
    assert report.errors == ["GPU 0 link 1: CRC Errors: not a count 'lots'"]


def test_all_links_inactive_message():
    report = parse_nvlink_status("GPU 0: NVIDIA H100 (UUID: GPU-x)\nNVML: Unable to retrieve NVLink information as "
                                 "all links are inActive\n")  # fmt: skip
    assert report.gpus[0].all_inactive and report.gpus[0].links == {}


@pytest.mark.parametrize(("name", "nv"), [("nvidia-smi_topo-m_8xA100.txt", "NV12"), ("nvidia-smi_topo-m_8xH100.txt",
                                                                                   "NV18")])  # fmt: skip
def test_topo_eight_gpus(name, nv):
    topo = parse_topo_matrix((ML / name).read_text())
    assert topo.errors == [] and topo.devices == [f"GPU{i}" for i in range(8)]
    assert {topo.paths[(a, b)] for a in topo.devices for b in topo.devices if a != b} == {nv}
    assert topo.paths[("GPU3", "GPU3")] == "X"
    assert (topo.numa_affinity["GPU0"], topo.numa_affinity["GPU7"]) == ("0", "1")


@pytest.mark.parametrize("path", EXPORTER, ids=lambda p: p.name)
def test_exporter_topo_single_gpu_with_ansi_header(path):
    topo = parse_topo_matrix(capture_section(path.read_text(), "capabilities :: topo -m"))
    assert topo.errors == [] and topo.devices == ["GPU0"] and topo.paths == {("GPU0", "GPU0"): "X"}
    assert topo.numa_affinity == {"GPU0": "0"} and topo.cpu_affinity["GPU0"].startswith("0-")


def test_topo_with_nics_and_legend():
    text = ("\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tNV18\tPIX\tSYS\t0-51\t0\t\tN/A\nGPU1\tNV18\t X \tSYS\tPIX\t52-103\t1\t\tN/A\n"
            "NIC0\tPIX\tSYS\t X \tSYS\nNIC1\tSYS\tPIX\tSYS\t X \n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n"
            "  NIC0: mlx5_0\n  NIC1: mlx5_1\n")  # fmt: skip
    topo = parse_topo_matrix(text)
    assert topo.devices == ["GPU0", "GPU1", "NIC0", "NIC1"] and topo.errors == []
    assert topo.nearest_nics("GPU1") == [("mlx5_1", "PIX"), ("mlx5_0", "SYS")]
    assert topo.cpu_affinity == {"GPU0": "0-51", "GPU1": "52-103"}
    assert parse_topo_matrix("garbage\n").errors == ["no device header line (GPU0 ... CPU Affinity)"]


def test_device_h200_vm_outputs():
    device = REAL / "device-h200-vm_580.159.04"
    empty = parse_nvlink_status((device / "nvidia-smi_nvlink_-s.out").read_text())
    assert empty.gpus == {} and empty.errors == []  # a passed-through GPU: nvidia-smi prints nothing, exit 0
    topo = parse_topo_matrix((device / "nvidia-smi_topo_-m.out").read_text())
    assert (topo.devices, topo.cpu_affinity, topo.errors) == (["GPU0"], {"GPU0": "0-15"}, [])
