"""nvidia-smi -q (text) and -q -x (XML) against every real capture of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricase.parsers.nvidia_smi import normalize_pci, parse_nvidia_smi, parse_nvidia_smi_q, parse_nvidia_smi_xml
from hosttrees.nvidia import capture_section

REAL = Path(__file__).parents[1] / "fixtures/real"
EXPORTER = REAL / "nvidia-smi_nvidia_gpu_exporter"
LEPTON = REAL / "leptonai-gpud/nvidia-smi"


@pytest.mark.parametrize(
    ("address", "expected"),
    [("00000000:3B:00.0", "0000:3b:00.0"), ("0000:9b:00", "0000:9b:00"), ("00000001:00:00.0", "0001:00:00.0"),
     ("3b:00.0", "0000:3b:00.0"), ("GPU-1234", None), ("", None), (None, None)],
)  # fmt: skip
def test_normalize_pci(address, expected):
    assert normalize_pci(address) == expected


# file, driver, product, bus id, (gen cur, gen max, width cur, width max), replays, fabric (state, status) or None,
# power limit W
EXPORTER_CASES = [
    ("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt", "NVIDIA H100 80GB HBM3", "0000:00:09.0", 9, 700.0),
    ("linux-x86_64__nvidia-h100-mig__590.48.01.txt", "NVIDIA H100 80GB HBM3", "0000:00:09.0", 9, 700.0),
    ("linux-x86_64__nvidia-h200__590.48.01.txt", "NVIDIA H200", "0000:83:00.0", 0, 700.0),
    ("linux-x86_64__nvidia-h200-mig__590.48.01.txt", "NVIDIA H200", "0000:83:00.0", 0, 700.0),
    ("linux-x86_64__nvidia-l40s__595.80.txt", "NVIDIA L40S", "0000:01:00.0", 0, 350.0),
]


@pytest.mark.parametrize("state", ["idle", "load"])
@pytest.mark.parametrize(("name", "product", "bus", "replays", "limit"), EXPORTER_CASES)
def test_exporter_captures(name, product, bus, replays, limit, state):
    report = parse_nvidia_smi(capture_section((EXPORTER / name).read_text(), f"{state} :: query (-q)"))
    assert report.source == "text" and report.errors == [] and report.attached_gpus == 1
    assert report.driver_version == name.rsplit("__", 1)[1].removesuffix(".txt")
    (gpu,) = report.gpus
    assert (gpu.index, gpu.name, gpu.bus_id, gpu.pcie_replays, gpu.power_limit_w) == (0, product, bus, replays, limit)
    gen = 4 if "l40s" in name else 5
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (gen, gen, 16, 16)
    assert gpu.performance_state == "P0" and gpu.ecc_mode == "Enabled"
    assert gpu.ecc["volatile.dram_uncorrectable"] == 0 and gpu.ecc["aggregate.sram_uncorrectable_parity"] == 0
    assert gpu.remapped_rows_failure in (False, None) and gpu.retired_pages_sbe is None  # N/A, not 0
    if "l40s" in name:
        assert gpu.fabric is None  # State/Status N/A: not an NVSwitch GPU
    else:
        assert (gpu.fabric.state, gpu.fabric.status, gpu.fabric.clique_id) == ("Completed", "Success", 0)
        assert gpu.fabric.cluster_uuid == "00000000-0000-0000-0000-000000000000"
        assert gpu.fabric.health["route_unhealthy"] == "N/A"
    assert gpu.raw["PCI/GPU Link Info/PCIe Generation/Device Max"] == str(gen)


def test_hgx_h100_535_eight_gpus():
    report = parse_nvidia_smi_q((LEPTON / "nvidia-smi-query.535.161.08.out.0.valid.txt").read_text())
    assert report.errors == [] and report.driver_version == "535.161.08" and report.cuda_version == "12.2"
    assert [g.bus_id[5:7] for g in report.gpus] == ["19", "3b", "4c", "5d", "9b", "bb", "cb", "db"]
    assert [g.pcie_replays for g in report.gpus] == [67, 63, 52, 43, 49, 53, 82, 67]
    assert all((g.fabric.state, g.fabric.status) == ("Completed", "Success") for g in report.gpus)
    assert report.gpus[0].fabric.clique_id is None and report.gpus[0].fabric.health == {}  # 535 prints no more
    assert report.gpus[0].uuid == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa" and report.gpus[0].module_id == 2
    assert report.gpu_at("0000:9b:00").index == 4 and report.gpu_at("0000:9B:00.0").index == 4
    assert report.gpu_at("0000:01:00") is None


def test_hgx_h100_535_183_and_its_cut_short_twin():
    valid = parse_nvidia_smi_q((LEPTON / "nvidia-smi-query.535.183.01.out.0.valid.txt").read_text())
    assert [g.pcie_replays for g in valid.gpus] == [120, 111, 58, 60, 63, 93, 69, 78]
    cut = parse_nvidia_smi_q((LEPTON / "nvidia-smi-query.535.183.01.out.0.invalid.txt").read_text())
    assert cut.errors == ["Attached GPUs says 8, found 1 GPU sections (output cut short?)"]
    (gpu,) = cut.gpus
    assert (gpu.bus_id, gpu.pcie_replays, gpu.fabric, gpu.temperature_c) == ("0000:53:00.0", 120, None, None)


def test_a10_with_pending_row_remap():
    (gpu,) = parse_nvidia_smi_q((LEPTON / "nvidia-smi-query.535.129.03.out.0.valid.a10.txt").read_text()).gpus
    assert gpu.name == "NVIDIA A10" and gpu.performance_state == "P8"
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable) == (0, 4)
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (True, False)
    assert gpu.fabric is None and gpu.ecc["volatile.dram_uncorrectable"] == 0


@pytest.mark.parametrize(
    ("name", "gpus", "product", "gen"),
    [("nvidia-smi-query.535.154.05.out.0.valid.4090.txt", 8, "NVIDIA GeForce RTX 4090", (1, 4)),
     ("nvidia-smi-query.560.35.03.out.0.valid.txt", 1, "NVIDIA TITAN V", (1, 3))],
)  # fmt: skip
def test_idle_consumer_gpus_report_a_lowered_link_gen(name, gpus, product, gen):
    report = parse_nvidia_smi_q((LEPTON / name).read_text())
    assert len(report.gpus) == gpus and report.errors == []
    gpu = report.gpus[0]
    assert (gpu.name, gpu.performance_state, (gpu.pcie_gen_current, gpu.pcie_gen_max)) == (product, "P8", gen)
    assert gpu.ecc == {} and gpu.fabric is None


def test_azure_a100_460_with_pci_domains():
    report = parse_nvidia_smi_q((REAL / "azhpc-diagnostics-samples/nvidia-smi-q.out").read_text())
    assert report.driver_version == "460.32.03" and report.errors == []
    assert [g.bus_id for g in report.gpus][:5] == ["0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0004:00:00.0",
                                                  "000b:00:00.0"]  # fmt: skip
    assert {(g.pcie_gen_current, g.pcie_width_current, g.fabric) for g in report.gpus} == {(4, 16, None)}
    assert report.gpus[0].name == "A100-SXM4-40GB" and report.gpus[0].module_id is None


def test_ml_engineering_excerpts():
    remap = parse_nvidia_smi_q((REAL / "ml-engineering-excerpts/nvidia-smi-q_a100-sxm4-80gb_ecc-remap_excerpt.txt")
                               .read_text())  # fmt: skip
    (gpu,) = remap.gpus
    assert gpu.bus_id == "0000:10:1c.0" and gpu.ecc["volatile.dram_correctable"] == 177
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (1, True, False)
    assert remap.errors == ["Attached GPUs says 8, found 1 GPU sections (output cut short?)"]
    text = (REAL / "ml-engineering-excerpts/nvidia-smi-q_ecc_sram-uncorrectable_excerpt.txt").read_text()
    fragment = parse_nvidia_smi_q(text)
    assert fragment.gpus == [] and "without a 'GPU <bus id>' line" in fragment.errors[0]
    (gpu,) = parse_nvidia_smi_q("GPU 00000000:00:00.0\n" + text).gpus
    assert (gpu.ecc["volatile.sram_uncorrectable"], gpu.ecc["aggregate.sram_uncorrectable"]) == (1, 5)


def test_xml_a100_mig():
    report = parse_nvidia_smi_xml((REAL / "nvidia-smi-xml_netdata/nvidia-smi-q-x_a100-sxm4-40gb-mig_510.47.03.xml")
                                  .read_text())  # fmt: skip
    assert (report.source, report.driver_version, report.attached_gpus, report.errors) == ("xml", "510.47.03", 1, [])
    (gpu,) = report.gpus
    assert (gpu.bus_id, gpu.name, gpu.uuid) == ("0000:00:04.0", "NVIDIA A100-SXM4-40GB",
                                                "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a")  # fmt: skip
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (4, 4, 16, 16)
    assert (gpu.pcie_replays, gpu.power_draw_w, gpu.power_limit_w, gpu.temperature_c) == (0, 66.92, 400.0, 36.0)
    assert gpu.module_id == 3 and gpu.minor_number == 0 and gpu.remapped_rows_pending is None  # "N/A"
    assert gpu.ecc == {"aggregate.sram_correctable": 0, "aggregate.sram_uncorrectable": 0,
                       "aggregate.dram_correctable": 0, "aggregate.dram_uncorrectable": 0}  # volatile N/A
    assert gpu.fabric is None and gpu.raw["mig_mode/current_mig"] == "Enabled"


def test_xml_p100_old_schema():
    (gpu,) = parse_nvidia_smi((REAL / "nvidia-smi-xml_netdata/nvidia-smi-q-x_tesla-p100.xml").read_text()).gpus
    assert gpu.name == "Tesla P100-PCIE-16GB" and (gpu.pcie_gen_current, gpu.pcie_gen_max) == (3, 3)
    assert gpu.ecc["aggregate.single_bit.device_memory"] == 3 and gpu.ecc["aggregate.double_bit.total"] == 0
    assert gpu.retired_pages_sbe == 0 and gpu.power_limit_w == 250.0


def test_xml_cut_short_keeps_the_complete_gpus():
    text = (REAL / "nvidia-smi-xml_netdata/nvidia-smi-q-x_tesla-p100.xml").read_text()
    whole = text.replace("<attached_gpus>1</attached_gpus>", "<attached_gpus>2</attached_gpus>")
    gpu = whole[whole.index("<gpu "):whole.index("</gpu>") + 6]
    doubled = whole.replace("</gpu>", "</gpu>\n" + gpu.replace("00000000:00:04.0", "00000000:00:05.0"), 1)
    cut = parse_nvidia_smi_xml(doubled[: doubled.rindex("<fan_speed>")])
    assert [g.bus_id for g in cut.gpus] == ["0000:00:04.0"] and len(cut.errors) == 2
    assert cut.errors[0].startswith("XML: ") and "found 1 GPU sections" in cut.errors[1]
    assert parse_nvidia_smi_xml("not xml").errors[0].startswith("XML: ")


DEVICE = REAL / "device-h200-vm_580.159.04"


def test_device_h200_vm_580_text_and_xml_agree():
    xml = parse_nvidia_smi_xml((DEVICE / "nvidia-smi_-q_-x.out").read_text())
    text = parse_nvidia_smi_q((DEVICE / "nvidia-smi_-q.out").read_text())
    assert xml.errors == text.errors == [] and xml.driver_version == text.driver_version == "580.159.04"
    (x,), (t,) = xml.gpus, text.gpus
    fields = ("bus_id", "name", "uuid", "serial", "minor_number", "module_id", "performance_state", "pcie_gen_current",
              "pcie_gen_max", "pcie_width_current", "pcie_width_max", "pcie_replays", "ecc_mode", "ecc",
              "remapped_rows_correctable", "remapped_rows_uncorrectable", "remapped_rows_pending",
              "remapped_rows_failure", "retired_pages_pending", "temperature_c", "fabric")  # fmt: skip
    assert {f: getattr(x, f) for f in fields} == {f: getattr(t, f) for f in fields}
    assert (x.bus_id, x.name, x.pcie_replays, x.fabric) == ("0000:00:06.0", "NVIDIA H200", 1, None)
    assert x.ecc["volatile.sram_uncorrectable_secded"] == 0 and x.remapped_rows_pending is False
    assert x.raw["fabric/health/partition_assigned"] == "N/A"  # schema v12 with the 580 additions
