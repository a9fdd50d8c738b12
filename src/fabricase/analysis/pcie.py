"""PCIe links of NICs, GPUs and the bridges above them: negotiated vs capable speed and width, AER counters; the
rules pcie-downgraded and pcie-aer. sysfs is preferred; `lspci -vvv` fills in devices sysfs did not show."""

from __future__ import annotations

import functools
from collections import defaultdict

from fabricase.analysis._items import HostItems, by_family, per_samples
from fabricase.analysis.rates import counter_delta
from fabricase.models import Evidence, Finding, HostCapture, MetricSample, Severity
from fabricase.parsers.pcie import (
    is_fabric_class,
    parse_aer_counters,
    parse_lspci_vvv,
    parse_pci_class,
    parse_pci_tree,
    parse_pcie_speed,
)
from fabricase.parsers.sysfs import parse_sysfs_int

__all__ = ["RULES", "pcie_aer", "pcie_downgraded", "samples"]

PCI_ROOT = "/sys/bus/pci/devices/"
LSPCI, TREE = "cmd:lspci", "cmd:pci-tree"
# (sysfs attribute, metric, parser, unit) of the link gauges
_LINK = (
    ("current_link_speed", "pcie.link_speed_gts.current", parse_pcie_speed, "GT/s"),
    ("max_link_speed", "pcie.link_speed_gts.max", parse_pcie_speed, "GT/s"),
    ("current_link_width", "pcie.link_width.current", parse_sysfs_int, "lanes"),
    ("max_link_width", "pcie.link_width.max", parse_sysfs_int, "lanes"),
)
_AER = {
    "aer_dev_correctable": "pcie.aer_correctable", "aer_dev_nonfatal": "pcie.aer_nonfatal",
    "aer_dev_fatal": "pcie.aer_fatal", "aer_rootport_total_err_cor": "pcie.aer_rootport_correctable",
    "aer_rootport_total_err_nonfatal": "pcie.aer_rootport_nonfatal",
    "aer_rootport_total_err_fatal": "pcie.aer_rootport_fatal",
}  # fmt: skip
# lspci class names -> class code, for devices seen only there (lspci without -nn prints no code)
_LSPCI_CLASSES = {
    "Ethernet controller": 0x020000, "Network controller": 0x028000, "Infiniband controller": 0x020700,
    "VGA compatible controller": 0x030000, "3D controller": 0x030200, "Display controller": 0x038000,
    "PCI bridge": 0x060400,
}  # fmt: skip


def _kind(class_code: float | None) -> str:
    top = int(class_code or 0) >> 16
    return {0x02: "NIC", 0x03: "GPU"}.get(top, "bridge")


def _sysfs_devices(items: HostItems) -> dict[str, dict[str, str]]:
    """{bdf: {attribute: source}} for every device sysfs showed."""
    devices: dict[str, dict[str, str]] = defaultdict(dict)
    for source in items.sources(PCI_ROOT):
        bdf, _, attr = source[len(PCI_ROOT) :].partition("/")
        if bdf and attr and "/" not in attr:
            devices[bdf][attr] = source
    return devices


def _sysfs_samples(hc: HostCapture, items: HostItems, bdf: str, attrs: dict[str, str],
                   interval: float | None) -> list[MetricSample]:
    component, out = f"pcie:{bdf}", []
    for attr, metric, parse, unit in _LINK:
        if attr in attrs:
            value = parse(items.text(attrs[attr]))
            out.append(MetricSample(hc.host, component, metric, value, unit, attrs[attr]))
    for attr, metric in _AER.items():
        if attr in attrs:
            t0, t1 = items.text(attrs[attr], 0), items.text(attrs[attr], 1)
            v0, v1 = _aer_total(t0), _aer_total(t1)
            d = counter_delta(v0, v1, interval)
            out.append(MetricSample(hc.host, component, metric, v1 if v1 is not None else v0, "errors", attrs[attr],
                                    d.delta, d.rate, d.note))
    return out


def _aer_total(text: str | None) -> int | None:
    """An AER file's total. A host's AER files are nearly all the same few texts (all zeros), read hundreds of
    times per host: a short one is parsed once per process (a long, odd one is not kept)."""
    if text is None:
        return None
    return _short_aer_total(text) if len(text) <= _AER_MEMO_CHARS else parse_aer_counters(text).total


_AER_MEMO_CHARS = 2048  # a real AER file is a few hundred bytes


@functools.lru_cache(maxsize=1024)
def _short_aer_total(text: str) -> int | None:
    return parse_aer_counters(text).total


def samples(hc: HostCapture) -> list[MetricSample]:
    """Per NIC, GPU and PCI bridge (component `pcie:<bdf>`): `pcie.class_code`, link speed and width (current and
    max) and AER totals with their increase. Other device classes are left out."""
    items = HostItems(hc)
    out: list[MetricSample] = []
    seen: set[str] = set()
    interval = hc.interval_s  # a property that works the interval out on each read
    for bdf, attrs in sorted(_sysfs_devices(items).items()):
        code = parse_pci_class(items.text(attrs["class"])) if "class" in attrs else None
        if is_fabric_class(code):
            seen.add(bdf)
            out.append(MetricSample(hc.host, f"pcie:{bdf}", "pcie.class_code", code, "class", attrs["class"]))
            out += _sysfs_samples(hc, items, bdf, attrs, interval)
    for bdf, dev in sorted(parse_lspci_vvv(items.text(LSPCI)).devices.items()):
        code = dev.class_code << 8 if dev.class_code is not None else _LSPCI_CLASSES.get(dev.class_name)
        if bdf in seen or not is_fabric_class(code):
            continue
        component = f"pcie:{bdf}"
        out.append(MetricSample(hc.host, component, "pcie.class_code", code, "class", LSPCI))
        for metric, value, unit in (("pcie.link_speed_gts.current", dev.sta_speed_gts, "GT/s"),
                                    ("pcie.link_speed_gts.max", dev.cap_speed_gts, "GT/s"),
                                    ("pcie.link_width.current", dev.sta_width, "lanes"),
                                    ("pcie.link_width.max", dev.cap_width, "lanes")):
            if value is not None:
                out.append(MetricSample(hc.host, component, metric, value, unit, LSPCI))
    return out


def _devices(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    """bdf -> metric -> sample, built once per host for both rules (shared: callers must not change it)."""
    return per_samples(hc, "pcie_devices", samples, lambda: _group_devices(hc, samples))


def _group_devices(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    devices: dict[str, dict[str, MetricSample]] = defaultdict(dict)
    for s in by_family(hc, samples).get("pcie:", ()):
        if s.component.startswith("pcie:"):
            devices[s.component.removeprefix("pcie:")][s.metric] = s
    return devices


def _expected(dev: dict, parent: dict | None, what: str) -> tuple[float | None, bool]:
    """What the link should run at: the lower of the device's and its upstream port's capability; and whether
    the port's capability was known."""
    own = dev.get(f"pcie.{what}.max")
    port = parent.get(f"pcie.{what}.max") if parent else None
    values = [s.value for s in (own, port) if s is not None and s.value]
    return (min(values) if values else None), bool(port and port.value)


def pcie_downgraded(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """A NIC or GPU whose link trained below what it and its upstream port can do (speed or width)."""
    devices = _devices(hc, samples)
    parents = parse_pci_tree(HostItems(hc).text(TREE))
    findings = []
    for bdf in sorted(devices):
        dev = devices[bdf]
        kind = _kind(dev["pcie.class_code"].value if "pcie.class_code" in dev else None)
        if kind == "bridge":
            continue
        parent = devices.get(parents.get(bdf, ""))
        low, evidence, partner_known = [], [], True
        for what, unit, fmt in (("link_speed_gts", "GT/s", "{:g} GT/s"), ("link_width", "lanes", "x{:g}")):
            current = dev.get(f"pcie.{what}.current")
            expected, known = _expected(dev, parent, what)
            if current is None or current.value is None or expected is None or current.value >= expected:
                continue
            partner_known &= known
            low.append((what, f"{fmt.format(current.value)} (capable {fmt.format(expected)})"))
            evidence.append(Evidence(f"pcie.{what}.current", current.value, unit, expected, current.source, 0))
        if not low:
            continue
        speed_only = [w for w, _ in low] == ["link_speed_gts"]
        severity, confidence = Severity.MAJOR, 0.9 if partner_known else 0.7
        note = ""
        if kind == "GPU" and speed_only:
            # GPUs lower their link speed when idle to save power; width loss has no such excuse.
            severity, confidence, note = Severity.MINOR, 0.5, "; GPUs slow their link when idle: re-check under load"
        summary = f"{kind} {bdf}: PCIe link " + ", ".join(text for _, text in low) + note
        findings.append(Finding("pcie-downgraded", severity, hc.host, f"pcie:{bdf}", summary, evidence, confidence))
    return findings


def _types_grown(items: HostItems, source: str) -> str:
    t0, t1 = items.text(source, 0), items.text(source, 1)
    c0, c1 = parse_aer_counters(t0).counters, parse_aer_counters(t1).counters
    grown = [f"{name} +{c1[name] - c0[name]}" for name in c1 if name in c0 and c1[name] > c0[name]]
    return f" ({', '.join(grown)})" if grown else ""


def pcie_aer(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """AER error counters of a NIC, GPU or port rose: fatal/non-fatal are major, correctable minor."""
    items = HostItems(hc)
    findings = []
    within = None  # worked out for the first finding: most hosts have none
    for bdf, dev in sorted(_devices(hc, samples).items()):
        grown = [s for m in _AER.values() if (s := dev.get(m)) is not None and s.delta]
        if not grown:
            continue
        if within is None:
            within = f"in {hc.interval_s:g} s" if hc.interval_s else "between snapshots"
        uncorrectable = any("fatal" in s.metric for s in grown)
        parts = [f"{s.metric.removeprefix('pcie.')} +{s.delta}" + _types_grown(items, s.source) for s in grown]
        kind = _kind(dev["pcie.class_code"].value if "pcie.class_code" in dev else None)
        summary = f"{kind} {bdf}: " + ", ".join(parts) + f" {within}"
        evidence = [Evidence(f"{s.metric}.delta", s.delta, "errors", 0, s.source, 1) for s in grown]
        severity = Severity.MAJOR if uncorrectable else Severity.MINOR
        confidence = 0.8 if any(s.note == "wrap" for s in grown) else 0.95
        findings.append(Finding("pcie-aer", severity, hc.host, f"pcie:{bdf}", summary, evidence, confidence))
    return findings


RULES = [pcie_downgraded, pcie_aer]
