"""PCIe link and error state: `lspci -vvv` (LnkCap/LnkSta), the sysfs link attributes ("16.0 GT/s PCIe"), the AER
counter files, the class code, and `ls -l /sys/bus/pci/devices/` (which device sits below which port)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricase.parsers.ethtool import parse_int

__all__ = [
    "AerCounters",
    "LspciReport",
    "PciDevice",
    "is_fabric_class",
    "normalize_bdf",
    "parse_aer_counters",
    "parse_lspci_vvv",
    "parse_pci_class",
    "parse_pci_tree",
    "parse_pcie_speed",
]

_BDF = re.compile(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", re.ASCII)
# "3b:00.0 3D controller: NVIDIA ...", "0000:03:00.0 Infiniband controller [0207]: Mellanox ..." (-nn): the
# address here, the class and name in _device_line (a lazy `(.+?)` before `\s+\[` was quadratic in spaces).
_DEVICE_HEAD = re.compile(rf"({_BDF.pattern})\s+", re.ASCII)
_CLASS_END = re.compile(r":\s", re.ASCII)
_CLASS_CODE = re.compile(r"\s\[([0-9a-fA-F]{4})\]", re.ASCII)
_AER_LINE = re.compile(r"^[ \t]*([^\s0-9][^\s]*)[ \t]+([0-9]{1,40})[ \t\r]*$", re.ASCII | re.MULTILINE)
_CONTENT = re.compile(r"^[ \t]*\S", re.MULTILINE)
_SPEED = re.compile(r"([0-9]{1,3}(?:\.[0-9]{1,3})?)\s*GT/s", re.ASCII)
_LINK = re.compile(
    r"Speed\s+(?P<speed>[0-9.]+GT/s|unknown)(?:\s+\((?P<smark>ok|downgraded)\))?"
    r"(?:,\s*Width\s+x(?P<width>[0-9]{1,2})(?:\s+\((?P<wmark>ok|downgraded)\))?)?",
    re.ASCII,
)


def normalize_bdf(text: str) -> str | None:
    """A PCI address with its domain, lower case ("3b:00.0" -> "0000:3b:00.0"); None when it is not one."""
    match = _BDF.fullmatch(text.strip())
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    return f"{(domain or '0000').lower():0>4}:{bus.lower()}:{dev.lower()}.{fn}"


def parse_pcie_speed(text: str | None) -> float | None:
    """A link speed in GT/s: sysfs "16.0 GT/s PCIe", "8 GT/s", lspci "32GT/s"; "Unknown" is None."""
    match = _SPEED.search(text or "")
    return float(match.group(1)) if match else None


def parse_pci_class(text: str | None) -> int | None:
    """The 24-bit class code of sysfs `class` ("0x020000")."""
    value = (text or "").strip()
    if re.fullmatch(r"0x[0-9a-fA-F]{6}", value, re.ASCII):
        return int(value, 16)
    return None


def is_fabric_class(class_code: int | None) -> bool:
    """Network (0x02xxxx), display/3D (0x03xxxx) and PCI-to-PCI bridges (0x0604xx): the devices whose links carry
    fabric traffic, and the ports above them."""
    if class_code is None:
        return False
    return (class_code >> 16) in (0x02, 0x03) or (class_code >> 8) == 0x0604


@dataclass
class AerCounters:
    """An AER sysfs file: per error type counts ("RxErr", "BadTLP", ...) and the TOTAL_ERR_* line.

    The root-port totals (aer_rootport_total_err_cor) hold a single number, which becomes `total`.
    """

    counters: dict[str, int] = field(default_factory=dict)
    total: int | None = None
    errors: list[str] = field(default_factory=list)


def parse_aer_counters(text: str | None) -> AerCounters:
    aer = AerCounters()
    text = text or ""
    pairs = _AER_LINE.findall(text)
    if not pairs and parse_int(text) is not None:
        aer.total = parse_int(text)
        return aer
    for name, value in pairs:
        if name.startswith("TOTAL_"):
            aer.total = int(value)  # some kernels label the nonfatal file's total TOTAL_ERR_FATAL; the file says which
        else:
            aer.counters.setdefault(name, int(value))
    if len(pairs) != len(_CONTENT.findall(text)):
        aer.errors += [f"not an AER counter line: {line.strip()[:60]!r}" for line in text.splitlines()
                       if line.strip() and not _AER_LINE.fullmatch(line)][:20]
    return aer


@dataclass
class PciDevice:
    """One device of `lspci -vvv`. Speeds in GT/s, widths in lanes; None when lspci did not show them.

    speed_downgraded/width_downgraded: lspci's own "(downgraded)"/"(ok)" marks (pciutils >= 3.6), None when
    absent. Compare the numbers to judge older output.
    """

    bdf: str
    class_name: str
    name: str
    class_code: int | None = None  # the 16-bit class of `lspci -nn`, e.g. 0x0207
    driver: str | None = None
    cap_speed_gts: float | None = None
    cap_width: int | None = None
    sta_speed_gts: float | None = None
    sta_width: int | None = None
    speed_downgraded: bool | None = None
    width_downgraded: bool | None = None


@dataclass
class LspciReport:
    devices: dict[str, PciDevice] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _device_line(line: str) -> tuple[str, str, str, int | None] | None:
    """ "0000:03:00.0 Infiniband controller [0207]: Mellanox ..." -> (address, class, name, class code or None).

    The class ends at the first colon followed by a space; a "[xxxx]" at its end is the -nn class code."""
    head = _DEVICE_HEAD.match(line)
    end = _CLASS_END.search(line, head.end()) if head else None
    if head is None or end is None:
        return None
    class_name, code = line[head.end() : end.start()], None
    if (found := _CLASS_CODE.search(class_name, len(class_name) - 7)) and found.end() == len(class_name):
        class_name, code = class_name[: found.start()].rstrip(), int(found.group(1), 16)
    if not class_name:
        return None
    return head.group(1), class_name, line[end.end() :].lstrip(), code


def _mark(mark: str | None) -> bool | None:
    return None if mark is None else mark == "downgraded"


def _read_link(device: PciDevice, kind: str, body: str, errors: list[str]) -> None:
    match = _LINK.search(body)
    if match is None:
        errors.append(f"{device.bdf}: unreadable {kind}: {body[:60]!r}")
        return
    speed = parse_pcie_speed(match.group("speed"))
    width = parse_int(match.group("width"))
    if kind == "LnkCap":
        device.cap_speed_gts, device.cap_width = speed, width
    else:
        device.sta_speed_gts, device.sta_width = speed, width
        device.speed_downgraded, device.width_downgraded = _mark(match.group("smark")), _mark(match.group("wmark"))


def parse_lspci_vvv(text: str | None) -> LspciReport:
    """Every device of `lspci -vvv` (or `-nn -vvv`, or plain `lspci`) by its domain-qualified address."""
    report = LspciReport()
    device: PciDevice | None = None
    for raw in (text or "").splitlines():
        if raw[:1] not in ("", " ", "\t"):
            found = _device_line(raw.rstrip())
            bdf = normalize_bdf(found[0]) if found else None
            if found is None or bdf is None:
                report.errors.append(f"not a device line: {raw[:60]!r}")
                device = None
                continue
            device = PciDevice(bdf, found[1], found[2], found[3])
            report.devices.setdefault(bdf, device)
            continue
        line = raw.strip()
        if device is None or not line:
            continue
        label, _, body = line.partition(":")
        if label in ("LnkCap", "LnkSta"):
            _read_link(device, label, body, report.errors)
        elif label == "Kernel driver in use":
            device.driver = body.strip() or None
    return report


def parse_pci_tree(text: str | None) -> dict[str, str]:
    """{device: the bridge it sits below} from `ls -l /sys/bus/pci/devices/` (links into /sys/devices/pci*/...).

    A device right below a host bridge (a root port, a root-complex integrated device) has no entry.
    """
    parents: dict[str, str] = {}
    for line in (text or "").splitlines():
        _, arrow, target = line.partition(" -> ")
        if not arrow:
            continue
        chain = [bdf for part in target.strip().split("/") if (bdf := normalize_bdf(part))]
        if len(chain) >= 2:
            parents[chain[-1]] = chain[-2]
    return parents
