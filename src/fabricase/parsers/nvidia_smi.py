"""`nvidia-smi -q` (text) and `nvidia-smi -q -x` (XML) -> one record per GPU.

Both forms give the same GpuInfo fields; every value nvidia-smi printed is also kept, flattened, in `raw`
("PCI/GPU Link Info/Link Width/Max" for text, "pci/pci_gpu_link_info/link_widths/max_link_width" for XML).
N/A, "Requested functionality has been deprecated" and the like are None, never 0. A GPU's index is its
position in the output, which is nvidia-smi's own index order (not the minor number).
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from fabricase import native
from fabricase.parsers.numbers import to_float, to_int

__all__ = [
    "FabricInfo", "GpuInfo", "NvidiaSmiReport", "normalize_pci", "parse_nvidia_smi", "parse_nvidia_smi_q",
    "parse_nvidia_smi_xml",
]  # fmt: skip

_PCI = re.compile(r"(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})(?:\.(?P<fn>[0-7]))?")
_NUMBER = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")
_LEADING_INT = re.compile(r"[-+]?[0-9]+(?=[^0-9]|$)")
_HEX = re.compile(r"0x[0-9a-fA-F]{1,16}")
# A flattened key longer than this is no nvidia-smi field (theirs are under 100 characters); it is left out, so a
# hostile nesting cannot make every key as long as the whole text (quadratic).
_MAX_PATH = 512
# Every "&" that does not start a predefined entity or a valid character reference: nvidia-smi writes no other.
_AMPERSAND = re.compile(r"&(?:(?P<char>#[0-9]{1,7};|#x[0-9a-fA-F]{1,6};)|(?P<name>[A-Za-z_:][\w.:-]{0,63};))?")
_PREDEFINED = frozenset({"amp;", "lt;", "gt;", "quot;", "apos;"})
_GPU_HEADER = re.compile(r"GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*")
_KEY_VALUE = re.compile(r"(?P<indent>[ \t]*)(?P<key>\S(?:.*?\S)?)\s*:(?: (?P<value>.*))?")


def normalize_pci(address: str | None) -> str | None:
    """'00000000:3B:00.0' -> '0000:3b:00.0'; keeps a missing function missing ('0000:3b:00'); None if not one."""
    match = _PCI.fullmatch((address or "").strip())
    if not match:
        return None
    domain = int(match.group("dom") or "0", 16)
    out = f"{domain:04x}:{match.group('bus').lower()}:{match.group('dev').lower()}"
    return out + (f".{match.group('fn')}" if match.group("fn") is not None else "")


@dataclass
class FabricInfo:
    """The Fabric section (NVSwitch / NVLink-domain GPUs): state Not Started / In Progress / Completed."""

    state: str | None = None
    status: str | None = None
    clique_id: int | None = None
    cluster_uuid: str | None = None
    health: dict[str, str] = field(default_factory=dict)  # summary, bandwidth, route_unhealthy, ... as printed


@dataclass
class GpuInfo:
    index: int
    bus_id: str | None = None
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    minor_number: int | None = None
    module_id: int | None = None
    performance_state: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_gen_host_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None
    pcie_replay_rollovers: int | None = None
    ecc_mode: str | None = None
    ecc: dict[str, int] = field(default_factory=dict)  # "volatile.dram_uncorrectable": 0, ...
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    recovery_action: str | None = None
    fabric: FabricInfo | None = None
    raw: dict[str, str] = field(default_factory=dict)


@dataclass
class NvidiaSmiReport:
    source: str | None = None  # "xml" | "text"
    timestamp: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[GpuInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def gpu_at(self, address: str | None) -> GpuInfo | None:
        """The GPU at a PCI address, matched with or without the function ('0000:9b:00' from an Xid line)."""
        wanted = normalize_pci(address)
        if wanted is None:
            return None
        for gpu in self.gpus:
            if gpu.bus_id and (gpu.bus_id == wanted or gpu.bus_id.rsplit(".", 1)[0] == wanted):
                return gpu
        return None


_ABSENT = ("n/a", "[n/a]", "not supported", "[not supported]", "requested functionality has been deprecated",
           "unknown error", "[unknown error]", "none", "")  # fmt: skip


def _text(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if value.lower() in _ABSENT or value.startswith("[") or value.lower().startswith("unable"):
        return None
    return value


def _number(value: str | None) -> float | None:
    """The leading number of a reading ("45 C", "312.52 W"); None when absent or not finite."""
    value = _text(value)
    match = _NUMBER.match(value) if value else None
    return to_float(match.group()) if match else None


def _int(value: str | None) -> int | None:
    """A count ("0", "0x0000001b", "12 pages"); None when absent, fractional or over MAX_DIGITS digits."""
    value = _text(value)
    if value is None:
        return None
    if _HEX.fullmatch(value):
        return int(value, 16)
    match = _LEADING_INT.match(value)
    if match is None or "." in value[match.end() : match.end() + 1]:
        return None
    return to_int(match.group(), signed=True)


def _flag(value: str | None) -> bool | None:
    value = (_text(value) or "").lower()
    return {"yes": True, "no": False, "true": True, "false": False}.get(value)


def _get(raw: dict[str, str], *keys: str) -> str | None:
    return next((raw[k] for k in keys if k in raw), None)


def _norm(name: str) -> str:
    """'SRAM Uncorrectable SEC-DED' -> 'sram_uncorrectable_secded', the XML tag's spelling."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower().replace("-", "")).strip("_")


# ---------------------------------------------------------------------------------------------- text (-q)


def _text_blocks(text: str, report: NvidiaSmiReport) -> list[tuple[str, list[str]]]:
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        header = _GPU_HEADER.fullmatch(line)
        if header:
            blocks.append((header.group("bus"), []))
        elif blocks and line[:1] in (" ", "\t"):
            blocks[-1][1].append(line)
        elif line.strip() and not line.startswith("="):
            kv = _KEY_VALUE.fullmatch(line)
            if kv and not kv.group("indent"):
                _top_level(report, kv.group("key"), kv.group("value"))
    return blocks


def _top_level(report: NvidiaSmiReport, key: str, value: str | None) -> None:
    if key == "Timestamp":
        report.timestamp = _text(value)
    elif key == "Driver Version":
        report.driver_version = _text(value)
    elif key == "CUDA Version":
        report.cuda_version = _text(value)
    elif key == "Attached GPUs":
        report.attached_gpus = _int(value)


def _flatten_text(lines: list[str]) -> tuple[dict[str, str], bool]:
    """{"Section/Sub/Key": value} by indentation, and whether keys over _MAX_PATH characters were left out."""
    raw: dict[str, str] = {}
    stack: list[tuple[int, str | None]] = []  # (indent, the section's path + "/"; None when over _MAX_PATH)
    cut = False
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        kv = _KEY_VALUE.fullmatch(line)
        name = kv.group("key") if kv else line.strip()
        path = None if parent is None or len(parent) + len(name) > _MAX_PATH else parent + name
        cut = cut or path is None
        if kv is None:
            stack.append((indent, None if path is None else path + "/"))
        elif path is not None:
            raw.setdefault(path, (kv.group("value") or "").strip())
    return raw, cut


_TEXT_FIELDS = {
    "name": ("Product Name",), "uuid": ("GPU UUID",), "serial": ("Serial Number",),
    "performance_state": ("Performance State",), "ecc_mode": ("ECC Mode/Current",),
    "recovery_action": ("GPU Recovery Action",),
}  # fmt: skip
_TEXT_INTS = {
    "minor_number": ("Minor Number",), "module_id": ("Module ID", "Module Id", "Platform Info/Module Id"),
    "pcie_gen_current": ("PCI/GPU Link Info/PCIe Generation/Current",),
    "pcie_gen_max": ("PCI/GPU Link Info/PCIe Generation/Max",),
    "pcie_gen_host_max": ("PCI/GPU Link Info/PCIe Generation/Host Max",),
    "pcie_width_current": ("PCI/GPU Link Info/Link Width/Current",),
    "pcie_width_max": ("PCI/GPU Link Info/Link Width/Max",),
    "pcie_replays": ("PCI/Replays Since Reset", "PCI/Replays since reset"),
    "pcie_replay_rollovers": ("PCI/Replay Number Rollovers",),
    "retired_pages_sbe": ("Retired Pages/Single Bit ECC", "Retired Pages/Single Bit ECC/Count"),
    "retired_pages_dbe": ("Retired Pages/Double Bit ECC", "Retired Pages/Double Bit ECC/Count"),
    "remapped_rows_correctable": ("Remapped Rows/Correctable Error",),
    "remapped_rows_uncorrectable": ("Remapped Rows/Uncorrectable Error",),
}  # fmt: skip
_TEXT_FLAGS = {
    "retired_pages_pending": ("Retired Pages/Pending Page Blacklist", "Retired Pages/Pending Page Retirement",
                              "Retired Pages/Pending"),
    "remapped_rows_pending": ("Remapped Rows/Pending",),
    "remapped_rows_failure": ("Remapped Rows/Remapping Failure Occurred",),
}  # fmt: skip
_TEXT_FLOATS = {
    "temperature_c": ("Temperature/GPU Current Temp",),
    "memory_temperature_c": ("Temperature/Memory Current Temp",),
    "power_draw_w": ("GPU Power Readings/Average Power Draw", "GPU Power Readings/Power Draw",
                     "Power Readings/Power Draw", "GPU Power Readings/Instantaneous Power Draw"),
    "power_limit_w": ("GPU Power Readings/Current Power Limit", "GPU Power Readings/Power Limit",
                      "Power Readings/Power Limit", "Power Readings/Enforced Power Limit"),
}  # fmt: skip


def _fill(gpu: GpuInfo, raw: dict[str, str], tables: tuple[dict, dict, dict, dict]) -> None:
    texts, ints, flags, floats = tables
    for attr, keys in texts.items():
        setattr(gpu, attr, _text(_get(raw, *keys)))
    for attr, keys in ints.items():
        setattr(gpu, attr, _int(_get(raw, *keys)))
    for attr, keys in flags.items():
        setattr(gpu, attr, _flag(_get(raw, *keys)))
    for attr, keys in floats.items():
        setattr(gpu, attr, _number(_get(raw, *keys)))


def _ecc(raw: dict[str, str], prefix: str, separator: str) -> dict[str, int]:
    out = {}
    for key, value in raw.items():
        if key.startswith(prefix) and (number := _int(value)) is not None:
            out[".".join(_norm(part) for part in key[len(prefix) :].split(separator))] = number
    return out


def _fabric(raw: dict[str, str], prefix: str, keys: tuple[str, str, str, str]) -> FabricInfo | None:
    """None when the GPU has no fabric (no section, or State and Status both N/A: not an NVSwitch system)."""
    state, status, clique, cluster = (_text(raw.get(prefix + k)) for k in keys)
    if state is None and status is None:
        return None
    health = {_norm(k[len(prefix) :].split("/", 1)[1]): v for k, v in raw.items()
              if k.startswith(prefix) and k[len(prefix) :].lower().startswith("health/")}  # fmt: skip
    return FabricInfo(state, status, _int(clique), cluster, health)


MAX_GPUS = 1024  # GPU sections read from one output: a host has 8 or 16, an NVL72 rack's tray fewer


def parse_nvidia_smi_q(text: str | None) -> NvidiaSmiReport:
    """Parse `nvidia-smi -q` text. Never raises; a cut-short output is recorded in errors."""
    report = NvidiaSmiReport(source="text")
    blocks = _text_blocks(text or "", report)
    if not blocks and re.search(r"^[ \t]+\S.* : ", text or "", re.M):
        report.errors.append("GPU attributes without a 'GPU <bus id>' line (an excerpt?): not attributed to a GPU")
    if len(blocks) > MAX_GPUS:
        report.errors.append(f"{len(blocks)} GPU sections: only the first {MAX_GPUS} are read")
        blocks = blocks[:MAX_GPUS]
    for index, (bus, lines) in enumerate(blocks):
        raw, cut = _flatten_text(lines)
        if cut:
            report.errors.append(f"GPU {bus}: fields nested past {_MAX_PATH} characters of key left out")
        gpu = GpuInfo(index, normalize_pci(_get(raw, "PCI/Bus Id")) or normalize_pci(bus), raw=raw)
        _fill(gpu, raw, (_TEXT_FIELDS, _TEXT_INTS, _TEXT_FLAGS, _TEXT_FLOATS))
        gpu.ecc = _ecc(raw, "ECC Errors/", "/")
        gpu.fabric = _fabric(raw, "Fabric/", ("State", "Status", "CliqueId", "ClusterUUID"))
        report.gpus.append(gpu)
    _check_count(report)
    return report


def _check_count(report: NvidiaSmiReport) -> None:
    if report.attached_gpus is not None and report.attached_gpus != len(report.gpus):
        report.errors.append(f"Attached GPUs says {report.attached_gpus}, found {len(report.gpus)} GPU sections "
                             "(output cut short?)")


# ---------------------------------------------------------------------------------------------- XML (-q -x)


def _flatten_xml(element: ET.Element) -> tuple[dict[str, str], bool]:
    """{"pci/pci_gpu_link_info/...": text} of the leaves, in document order, and whether leaves with keys over
    _MAX_PATH characters were left out. Recursive, and bounded: a path grows by at least two characters a level
    and stops at _MAX_PATH, so XML nested 1,000 deep is walked at most _MAX_PATH // 2 levels down."""
    out: dict[str, str] = {}
    cut = False
    add = out.setdefault

    def walk(parent: ET.Element, prefix: str) -> None:
        nonlocal cut
        room = _MAX_PATH - len(prefix)
        for child in parent:
            tag = child.tag
            if len(tag) > room:
                cut = True
            elif len(child):
                walk(child, f"{prefix}{tag}/")
            else:
                add(prefix + tag, (child.text or "").strip())

    walk(element, "")
    return out, cut


_XML_FIELDS = {
    "name": ("product_name",), "uuid": ("uuid",), "serial": ("serial",), "performance_state": ("performance_state",),
    "ecc_mode": ("ecc_mode/current_ecc",), "recovery_action": ("gpu_recovery_action",),
}  # fmt: skip
_LINK = "pci/pci_gpu_link_info/"
_XML_INTS = {
    "minor_number": ("minor_number",), "module_id": ("platformInfo/module_id", "gpu_module_id"),
    "pcie_gen_current": (_LINK + "pcie_gen/current_link_gen",), "pcie_gen_max": (_LINK + "pcie_gen/max_link_gen",),
    "pcie_gen_host_max": (_LINK + "pcie_gen/max_host_link_gen",),
    "pcie_width_current": (_LINK + "link_widths/current_link_width",),
    "pcie_width_max": (_LINK + "link_widths/max_link_width",),
    "pcie_replays": ("pci/replay_counter",), "pcie_replay_rollovers": ("pci/replay_rollover_counter",),
    "retired_pages_sbe": ("retired_pages/multiple_single_bit_retirement/retired_count",),
    "retired_pages_dbe": ("retired_pages/double_bit_retirement/retired_count",),
    "remapped_rows_correctable": ("remapped_rows/remapped_row_corr",),
    "remapped_rows_uncorrectable": ("remapped_rows/remapped_row_unc",),
}  # fmt: skip
_XML_FLAGS = {
    "retired_pages_pending": ("retired_pages/pending_retirement", "retired_pages/pending_blacklist"),
    "remapped_rows_pending": ("remapped_rows/remapped_row_pending",),
    "remapped_rows_failure": ("remapped_rows/remapped_row_failure",),
}  # fmt: skip
_XML_FLOATS = {
    "temperature_c": ("temperature/gpu_temp",), "memory_temperature_c": ("temperature/memory_temp",),
    "power_draw_w": ("gpu_power_readings/average_power_draw", "gpu_power_readings/power_draw",
                     "power_readings/power_draw", "gpu_power_readings/instant_power_draw"),
    "power_limit_w": ("gpu_power_readings/current_power_limit", "power_readings/power_limit",
                      "gpu_power_readings/power_limit", "power_readings/enforced_power_limit"),
}  # fmt: skip


_XML_TOP = {"timestamp": "Timestamp", "driver_version": "Driver Version", "cuda_version": "CUDA Version",
            "attached_gpus": "Attached GPUs"}  # fmt: skip


def _gpu_from_xml(index: int, element: ET.Element, errors: list[str]) -> GpuInfo:
    raw, cut = _flatten_xml(element)
    return _gpu_from_raw(index, raw, cut, element.get("id"), errors)


def _gpu_from_raw(index: int, raw: dict[str, str], cut: bool, element_id: str | None, errors: list[str]) -> GpuInfo:
    if cut:
        errors.append(f"XML: GPU {index}: elements nested past {_MAX_PATH} characters of path left out")
    gpu = GpuInfo(index, normalize_pci(raw.get("pci/pci_bus_id")) or normalize_pci(element_id), raw=raw)
    _fill(gpu, raw, (_XML_FIELDS, _XML_INTS, _XML_FLAGS, _XML_FLOATS))
    gpu.ecc = _ecc(raw, "ecc_errors/", "/")
    gpu.fabric = _fabric(raw, "fabric/", ("state", "status", "cliqueId", "clusterUuid"))
    return gpu


def _events(parser: ET.XMLPullParser) -> list[tuple[str, ET.Element]]:
    """The events before a syntax error (read_events re-raises the error feed() already reported)."""
    events: list[tuple[str, ET.Element]] = []
    with contextlib.suppress(ET.ParseError):
        events.extend(parser.read_events())  # extend keeps what came before the error
    return events


def _escape_entities(text: str, errors: list[str]) -> str:
    """The text with every entity reference but the five predefined ones (and every stray "&") escaped, so that
    it reads as the characters written: "&nbsp;" stays "&nbsp;" instead of failing the parse where it stands and
    dropping every GPU after it. Entities a DOCTYPE defines are never expanded either: an expansion bomb or an
    external (SYSTEM) entity is text, never fetched."""
    named: dict[str, None] = {}
    stray = 0

    def escape(match: re.Match[str]) -> str:
        nonlocal stray
        if (char := match.group("char")) is not None:
            if _xml_char(char):
                return match.group()
            stray += 1
        elif (name := match.group("name")) is not None:
            if name in _PREDEFINED:
                return match.group()
            named.setdefault(name[:-1])
        else:
            stray += 1
        return "&amp;" + match.group()[1:]

    escaped = _AMPERSAND.sub(escape, text)
    if named:
        listed = ", ".join(f"&{name};" for name in list(named)[:5])
        errors.append(f"XML: {len(named)} undefined or DTD-defined entities read as text: {listed}")
    if stray:
        errors.append(f"XML: {stray} '&' that start no entity or a character reference XML forbids, read as text")
    return escaped


def _xml_char(reference: str) -> bool:
    """Whether "#65;" or "#x41;" names a character XML 1.0 allows (expat rejects the others)."""
    code = int(reference[2:-1], 16) if reference[1] == "x" else int(reference[1:-1])
    return code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF


def _top_elements(text: str, errors: list[str]) -> list[ET.Element]:
    """The children of the document's root element, complete ones only. A whole document is parsed in one call
    into expat and the C tree builder; only one that does not parse is read again event by event, to keep the
    elements complete before the cut or the syntax error (a host's report: 8 GPUs, about 4,000 elements, the
    pull parser's events cost more than the parse itself)."""
    try:
        return list(ET.fromstring(text))
    except ET.ParseError:
        pass
    parser = ET.XMLPullParser(events=("start", "end"))
    try:
        parser.feed(text)
        parser.close()
    except ET.ParseError as exc:
        errors.append(f"XML: {exc}")
    out, depth = [], 0
    for event, element in _events(parser):
        depth += 1 if event == "start" else -1
        if event == "end" and depth == 1:  # only the children of <nvidia_smi_log>
            out.append(element)
    return out


def parse_nvidia_smi_xml(text: str | None) -> NvidiaSmiReport:
    """Parse `nvidia-smi -q -x`. Never raises: GPUs complete before a cut or a syntax error are kept, entity
    references are read as text (see _escape_entities), and no DTD is fetched."""
    report = NvidiaSmiReport(source="xml")
    text = text or ""
    if "<!ENTITY" in text:
        report.errors.append("XML: entity declarations in the DOCTYPE ignored (nvidia-smi writes none)")
    if "&" in text:
        text = _escape_entities(text, report.errors)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 (surrogates after a lossless decode): expat needs UTF-8
        text = text.encode("utf-8", "replace").decode("utf-8")
        report.errors.append("XML: bytes that are not UTF-8 read as '?'")
    tops = native.xml_tops(text, "gpu", _MAX_PATH) if native.xml_tops is not None else None
    if tops is not None:  # C: the plain document nvidia-smi writes, in one pass (fabricase._native)
        for tag, element_id, body, raw, cut in tops:
            if tag == "gpu":
                report.gpus.append(_gpu_from_raw(len(report.gpus), raw, cut, element_id, report.errors))
            elif tag in _XML_TOP:
                _top_level(report, _XML_TOP[tag], body)
        _check_count(report)
        return report
    for element in _top_elements(text, report.errors):
        if element.tag == "gpu":
            report.gpus.append(_gpu_from_xml(len(report.gpus), element, report.errors))
        elif element.tag in _XML_TOP:
            _top_level(report, _XML_TOP[element.tag], element.text)
    _check_count(report)
    return report


def parse_nvidia_smi(text: str | None) -> NvidiaSmiReport:
    """XML or text, whichever `text` is."""
    head = (text or "").lstrip()[:200]
    if head.startswith("<?xml") or head.startswith("<nvidia_smi_log") or head.startswith("<!DOCTYPE"):
        return parse_nvidia_smi_xml(text)
    return parse_nvidia_smi_q(text)
