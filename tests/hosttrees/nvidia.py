"""An 8-GPU HGX host tree (H100 by default) for the nvidia collector, built from real captured formats:

- `nvidia-smi -q`: the real H100 -q section (nvidia-smi_nvidia_gpu_exporter, driver 590.48.01) repeated per GPU
  with its bus id, UUID, serial, minor number and module id changed; bus ids of a real 8xH100 host
  (leptonai-gpud nvidia-smi-query.535.161.08);
- `nvidia-smi -q -x`: the real A100 XML (nvidia-smi-xml_netdata) per GPU, with the same identities and the
  <fabric> block of the v12 schema;
- `nvlink -s` from the real H100 capture, `nvlink -e` in the real ml-engineering H100 format, `topo -m` the real
  8xH100 matrix; the Fabric Manager log is the real leptonai-gpud log's INFO lines; four NVSwitches under
  /proc/driver/nvidia-nvswitch/devices as the driver names them.

degraded: a set of DEGRADATIONS (True: all of DEFAULT_DEGRADED) -
  "nvlink-inactive"     GPU 3 NVLink 5 is <inactive>
  "nvlink-replay"       GPU 2 NVLink 1 replay errors 12 -> 52 between snapshots (and CRC 3 -> 9)
  "fabric-in-progress"  GPU 4 Fabric State "In Progress", Status N/A
  "xid79"               the kernel log has Xid 79 for GPU 6 (PCI 0000:cb:00)
  "fm-down"             systemctl is-active nvidia-fabricmanager says "failed" (not in DEFAULT_DEGRADED)
The kernel log is recorded for the kernel_log collector's journalctl; the Fabric Manager log is a file under
the tree, which the capture script's $FC_ROOT (the --root folder) makes the commands read.
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from hosttrees import record_command, write_file

__all__ = ["BUSES", "DEFAULT_DEGRADED", "DEGRADATIONS", "NVSWITCHES", "add_hgx_gpus", "capture_section",
           "journalctl_args"]

REAL = Path(__file__).parents[1] / "fixtures/real"
BUSES = ("19", "3b", "4c", "5d", "9b", "bb", "cb", "db")  # a real 8xH100 host's GPUs
NVSWITCHES = ("0000:83:00.0", "0000:84:00.0", "0000:85:00.0", "0000:86:00.0")
DEGRADATIONS = frozenset({"nvlink-inactive", "nvlink-replay", "fabric-in-progress", "xid79", "fm-down"})
DEFAULT_DEGRADED = frozenset({"nvlink-inactive", "nvlink-replay", "fabric-in-progress", "xid79"})
INACTIVE, REPLAY, FABRIC_GPU, XID_GPU = (3, 5), (2, 1), 4, 6
_VARIANTS = {"h100": "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt",
             "h200": "linux-x86_64__nvidia-h200__590.48.01.txt"}  # fmt: skip


def capture_section(text: str, title: str) -> str:
    """One command's output from an nvidia_gpu_exporter capture file, by its section title."""
    match = re.search(r"# " + re.escape(title) + r"\n# \$ [^\n]*\n#+\n(.*?)(?=\n#{20,}\n|\Z)", text, re.S)
    assert match, title
    return match.group(1)


def _uuid(i: int) -> str:
    return f"GPU-5e1f{i:04x}-7d1c-4f0a-9b2e-00000000{i:04x}"


def _q_text(capture: str, n: int, fabric_gpu: int | None) -> str:
    q = capture_section(capture, "idle :: query (-q)")
    head, _, block = q.partition("GPU 00000000:00:09.0\n")
    block = "GPU 00000000:00:09.0\n" + block.rstrip("\n") + "\n"
    head = re.sub(r"(Attached GPUs\s+: )\d+", rf"\g<1>{n}", head)
    blocks = []
    for i in range(n):
        bus = BUSES[i % len(BUSES)]
        b = block.replace("00000000:00:09.0", f"00000000:{bus.upper()}:00.0")
        b = re.sub(r"(\n        Bus\s+: )0x00", rf"\g<1>0x{bus.upper()}", b)
        b = re.sub(r"(\n        Device\s+: )0x09", r"\g<1>0x00", b)
        b = b.replace("GPU-00000000-0000-0000-0000-000000000000", _uuid(i))
        b = re.sub(r"(Serial Number\s+: )\d+", rf"\g<1>165012403{i:04d}", b)
        b = re.sub(r"(Minor Number\s+: )\d+", rf"\g<1>{i}", b)
        b = re.sub(r"(Module Id\s+: )\d+", rf"\g<1>{i + 1}", b)
        if i == fabric_gpu:
            b = re.sub(r"(\n        State\s+: )Completed", r"\1In Progress", b)
            b = re.sub(r"(\n        Status\s+: )Success", r"\1N/A", b)
        blocks.append(b)
    return head + "\n".join(blocks) + "\n"


def _set(parent: ET.Element, path: str, text: str) -> None:
    node = parent
    for tag in path.split("/"):
        child = node.find(tag)
        node = child if child is not None else ET.SubElement(node, tag)
    node.text = text


def _xml(n: int, name: str, fabric_gpu: int | None) -> str:
    root = ET.parse(REAL / "nvidia-smi-xml_netdata/nvidia-smi-q-x_a100-sxm4-40gb-mig_510.47.03.xml").getroot()
    template = root.find("gpu")
    root.remove(template)
    _set(root, "driver_version", "590.48.01")
    _set(root, "attached_gpus", str(n))
    for i in range(n):
        gpu = copy.deepcopy(template)
        bus = BUSES[i % len(BUSES)]
        gpu.set("id", f"00000000:{bus.upper()}:00.0")
        gpu.remove(gpu.find("mig_devices"))
        for path, text in (
            ("product_name", name), ("uuid", _uuid(i)), ("serial", f"165012403{i:04d}"), ("minor_number", str(i)),
            ("gpu_module_id", str(i + 1)), ("mig_mode/current_mig", "Disabled"), ("pci/pci_bus", bus.upper()),
            ("pci/pci_device", "00"), ("pci/pci_bus_id", f"00000000:{bus.upper()}:00.0"),
            ("pci/pci_gpu_link_info/pcie_gen/max_link_gen", "5"),
            ("pci/pci_gpu_link_info/pcie_gen/current_link_gen", "5"), ("remapped_rows", ""),
        ):  # fmt: skip
            _set(gpu, path, text)
        for path, text in (("remapped_row_corr", "0"), ("remapped_row_unc", "0"), ("remapped_row_pending", "No"),
                           ("remapped_row_failure", "No")):  # fmt: skip
            _set(gpu.find("remapped_rows"), path, text)
        in_progress = i == fabric_gpu
        for path, text in (("state", "In Progress" if in_progress else "Completed"),
                           ("status", "N/A" if in_progress else "Success"), ("cliqueId", "0"),
                           ("clusterUuid", "00000000-0000-0000-0000-000000000000"), ("health/bandwidth", "N/A"),
                           ("health/route_recovery_in_progress", "N/A"), ("health/route_unhealthy", "N/A"),
                           ("health/access_timeout_recovery", "N/A")):  # fmt: skip
            _set(gpu, f"fabric/{path}", text)
        root.append(gpu)
    return '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n' + ET.tostring(
        root, encoding="unicode") + "\n"


def _nvlink_status(capture: str, n: int, inactive: tuple[int, int] | None) -> str:
    real = capture_section(capture, "capabilities :: nvlink -s").strip("\n").splitlines()
    header, links = real[0], real[1:]
    out = []
    for i in range(n):
        out.append(header.replace("GPU 0:", f"GPU {i}:").replace("GPU-00000000-0000-0000-0000-000000000000", _uuid(i)))
        for line in links:
            if inactive == (i, int(re.search(r"Link (\d+):", line).group(1))):
                line = re.sub(r": .*", ": <inactive>", line)
            out.append(line)
    return "\n".join(out) + "\n"


def _nvlink_errors(n: int, name: str, links: int, bumped: dict[tuple[int, int], tuple[int, int]]) -> str:
    """The ml-engineering `nvidia-smi nvlink -e` format: three counters per link, a blank line between links."""
    out = []
    for i in range(n):
        out.append(f"GPU {i}: {name} (UUID: {_uuid(i)})")
        for link in range(links):
            replay, crc = bumped.get((i, link), (0, 0))
            out += [f"\t Link {link}: Replay Errors: {replay}", f"\t Link {link}: Recovery Errors: 0",
                    f"\t Link {link}: CRC Errors: {crc}", ""]  # fmt: skip
    return "\n".join(out).rstrip("\n") + "\n"


def journalctl_args(since_s: int = 24 * 3600) -> list[str]:
    """The arguments the kernel_log collector gives journalctl (its recorded-output key)."""
    return ["-k", "-q", "--no-pager", "-o", "short-iso-precise", "--since", f"-{since_s}s"]


def _kernel_log(xid_bus: str | None) -> str:
    stamp = "2026-11-29T22:5{}:00.{:06d}+0000 gpu001 kernel: "
    lines = [
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  590.48.01  Mon Dec 30 17:44:08 UTC 2024",
        "nvidia-nvswitch0: open (major=510)",
        "mlx5_core 0000:1b:00.0 enp27s0f0np0: Link up",
    ]
    if xid_bus:
        lines.append(f"NVRM: Xid (PCI:0000:{xid_bus}:00): 79, pid=12345, GPU has fallen off the bus.")
    return "".join(stamp.format(k, k) + line + "\n" for k, line in enumerate(lines))


def _fm_log() -> str:
    real = (REAL / "leptonai-gpud/fabric-manager/fabric-manager.0.log").read_text()
    return "".join(line + "\n" for line in real.splitlines() if "[ERROR]" not in line)


def add_hgx_gpus(root: Path, n: int = 8, variant: str = "h100", degraded=None, since_s: int = 24 * 3600) -> Path:
    """Record an HGX host's GPU fabric under root (see the module docstring); returns root."""
    wanted = DEFAULT_DEGRADED if degraded is True else frozenset(degraded or ())
    assert wanted <= DEGRADATIONS, wanted - DEGRADATIONS
    capture = (REAL / "nvidia-smi_nvidia_gpu_exporter" / _VARIANTS[variant]).read_text()
    name = re.search(r"Product Name\s+: (.*)", capture).group(1).strip()
    fabric_gpu = FABRIC_GPU if "fabric-in-progress" in wanted else None
    write_file(root, "/proc/driver/nvidia/version",
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48.01  Mon Dec 30 17:44:08 UTC 2024\n")
    for number, address in enumerate(NVSWITCHES):
        write_file(root, f"/proc/driver/nvidia-nvswitch/devices/{address}/information",
                   f"BIOS Version: 96.10.6d.00.0{number}\n")
    record_command(root, "nvidia-smi", ["-q"], _q_text(capture, n, fabric_gpu))
    record_command(root, "nvidia-smi", ["-q", "-x"], _xml(n, name, fabric_gpu))
    inactive = INACTIVE if "nvlink-inactive" in wanted else None
    record_command(root, "nvidia-smi", ["nvlink", "-s"], _nvlink_status(capture, n, inactive))
    lifetime = {(0, 0): (0, 2)}  # a CRC count from long ago: present in both snapshots, so no finding
    record_command(root, "nvidia-smi", ["nvlink", "-e"], _nvlink_errors(n, name, 18, {**lifetime, REPLAY: (12, 3)}))
    later = {**lifetime, REPLAY: (52, 9) if "nvlink-replay" in wanted else (12, 3)}
    record_command(root, "nvidia-smi", ["nvlink", "-e"], _nvlink_errors(n, name, 18, later), snapshot=1)
    topo = (REAL / "ml-engineering-excerpts/nvidia-smi_topo-m_8xH100.txt").read_text().split("\n", 1)[1]
    record_command(root, "nvidia-smi", ["topo", "-m"], topo)
    fm_state = ("failed\n", 3) if "fm-down" in wanted else ("active\n", 0)
    record_command(root, "systemctl", ["is-active", "nvidia-fabricmanager"], fm_state[0], rc=fm_state[1])
    write_file(root, "/var/log/fabricmanager.log", _fm_log())
    xid_bus = BUSES[XID_GPU] if "xid79" in wanted and n > XID_GPU else None
    record_command(root, "journalctl", journalctl_args(since_s), _kernel_log(xid_bus))
    return root
