"""Property tests: every GPU-fabric parser reads any text without raising, and every value it returns was in
the text (nothing invented); cut-short real outputs keep only what was complete."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from fabricase.parsers.dcgm import parse_dcgmi_diag, parse_dcgmi_discovery, parse_dcgmi_health
from fabricase.parsers.fabric_manager import parse_daemon_log, parse_fabric_manager_state
from fabricase.parsers.imex import parse_imex_status
from fabricase.parsers.kernel_log import parse_kernel_log
from fabricase.parsers.nvidia_smi import parse_nvidia_smi, parse_nvidia_smi_q, parse_nvidia_smi_xml
from fabricase.parsers.nvlink import parse_nvlink_errors, parse_nvlink_status, parse_topo_matrix

REAL = Path(__file__).parents[1] / "fixtures/real"
H100_8 = (REAL / "leptonai-gpud/nvidia-smi/nvidia-smi-query.535.161.08.out.0.valid.txt").read_text()
XML = (REAL / "nvidia-smi-xml_netdata/nvidia-smi-q-x_tesla-p100.xml").read_text()

_WORDS = st.sampled_from([
    "GPU 00000000:3B:00.0\n", "GPU 0: NVIDIA H100 (UUID: GPU-1)\n", "    ", "\t ", " : ", ": ", "\n", "Link 3: ",
    "26.562 GB/s", "<inactive>", "Replay Errors: ", "CRC Errors: ", "99999999999999999999999", "0", "16x", "N/A",
    "Fabric\n", "        State                 : ", "In Progress", "Completed", "PCI\n", "Replays Since Reset : ",
    "Attached GPUs : 8\n", "GPU0\tGPU1\tCPU Affinity\n", "GPU0\t X \tNV18\t0-51\t0\n", "NV18", "PIX", "|", "-> 0",
    "Overall Health", "Warning", "[Jul 23 2024 07:53:55] [ERROR] [tid 841] ", "detected NVSwitch fatal error 20034 "
    "on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 33", "Node #0   - 10.0.0.1   - READY",
    " Nodes From\\To  0\n       0        C\n", "Domain State: UP", "### systemctl is-active nvidia-fabricmanager\n",
    "NVRM: Xid (PCI:0000:3b:00): ", "79", "SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28", "mlx5_core 0000:3b:00.0: ",
    "health compromised", "AER: Uncorrected (Fatal) error received: 0000:3b:00.0", "<gpu id=\"1\">", "</gpu>",
    "<nvidia_smi_log>", "\ufffd", "\x00",
])  # fmt: skip
TEXT = st.one_of(st.text(), st.lists(st.one_of(_WORDS, st.text(max_size=3))).map("".join))
ALL = (parse_nvidia_smi, parse_nvidia_smi_q, parse_nvidia_smi_xml, parse_nvlink_status, parse_nvlink_errors,
       parse_topo_matrix, parse_daemon_log, parse_fabric_manager_state, parse_imex_status, parse_dcgmi_discovery,
       parse_dcgmi_health, parse_dcgmi_diag, parse_kernel_log)  # fmt: skip


@settings(max_examples=300)
@given(TEXT)
def test_no_parser_raises(text):
    for parse in ALL:
        parse(text)
        parse(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))


@given(st.binary())
def test_non_utf8_bytes(data):
    text = data.decode("utf-8", errors="replace")
    for parse in ALL:
        parse(text)


@settings(max_examples=200)
@given(TEXT)
def test_nvidia_smi_values_come_from_the_text(text):
    report = parse_nvidia_smi_q(text)
    for gpu in report.gpus:
        for value in (gpu.pcie_replays, gpu.pcie_width_current, gpu.pcie_gen_max):
            assert value is None or str(value) in text
        if gpu.fabric:
            assert gpu.fabric.state is None or gpu.fabric.state in text
        for key, value in gpu.raw.items():
            assert key.split("/")[-1] in text and value in text


@settings(max_examples=200)
@given(TEXT)
def test_nvlink_values_come_from_the_text(text):
    for gpu in parse_nvlink_status(text).gpus.values():
        for link in gpu.links.values():
            assert f"Link {link.link}:" in text
            assert link.speed_gbps is None or (f"{link.speed_gbps:g}" in text or str(link.speed_gbps) in text)
    for gpu in parse_nvlink_errors(text).gpus.values():
        for link in gpu.links.values():
            for name, value in link.counters.items():
                assert f"{name}: {value}" in text
    topo = parse_topo_matrix(text)
    assert all(cell in text for cell in topo.paths.values()) and all(d in text for d in topo.devices)


@settings(max_examples=200)
@given(TEXT)
def test_daemon_values_come_from_the_text(text):
    for event in parse_daemon_log(text).events:
        assert event.message in text
    status = parse_imex_status(text)
    assert all(n.address in text and n.state in text for n in status.nodes)
    health = parse_dcgmi_health(text)
    assert health.overall is None or health.overall in text


def test_huge_numbers_are_kept_exactly():
    big = "99999999999999999999999"
    (gpu,) = parse_nvidia_smi_q(f"GPU 00000000:3B:00.0\n    PCI\n        Replays Since Reset : {big}\n").gpus
    assert gpu.pcie_replays == int(big)
    report = parse_nvlink_errors(f"GPU 0: X (UUID: GPU-1)\n\t Link 0: Replay Errors: {big}\n")
    assert report.gpus[0].links[0].counters == {"Replay Errors": int(big)}


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=len(H100_8)))
def test_cut_short_text_keeps_complete_gpus_and_says_so(cut):
    full = {g.bus_id for g in parse_nvidia_smi_q(H100_8).gpus}
    report = parse_nvidia_smi_q(H100_8[:cut])
    assert {g.bus_id for g in report.gpus} <= full
    if report.attached_gpus is not None and len(report.gpus) < 8:
        assert report.errors


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=len(XML)))
def test_cut_short_xml(cut):
    report = parse_nvidia_smi_xml(XML[:cut])
    assert len(report.gpus) <= 1
    if cut < len(XML.rstrip()):
        assert report.errors


_NVLINK_WORDS = st.sampled_from([
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n", "GPU 1: X\n", "GPU 2: Y  (UUID: GPU-2)  \n", "\t Link 0: ",
    "  Link 17: ", "Link 3: ", "Replay Errors: ", "CRC Errors: ", "Recovery Errors: ", "0", "42", "N/A", "\n", "\r\n",
    " ", "\t", "all links are inactive", "not supported", "[...]", ": ", "\x1b[1m", "\u0663",
])  # fmt: skip


@settings(max_examples=400)
@given(st.lists(_NVLINK_WORDS).map("".join))
@example("GPU 0: X\n\t Link 0: Replay Errors: 42\n\n")
@example("GPU 2: Y  (UUID: GPU-2)  \n  Link 17: CRC Errors: 0\r\nGPU 1: X\n")
def test_nvlink_errors_fast_path_agrees_with_the_line_parser(text):
    import fabricase.parsers.nvlink as nvlink

    fast = nvlink._fast_errors(text)
    if text.startswith("GPU 0: X\n\t Link 0"):
        assert fast is not None and fast.gpus[0].links[0].counters == {"Replay Errors": 42}
    if fast is not None:
        saved, nvlink._fast_errors = nvlink._fast_errors, lambda _text: None
        try:
            assert fast == parse_nvlink_errors(text)
        finally:
            nvlink._fast_errors = saved
