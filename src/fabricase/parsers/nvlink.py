"""`nvidia-smi nvlink -s` (link speed or inactive), `nvidia-smi nvlink -e` (error counters per link) and
`nvidia-smi topo -m` (the GPU/NIC affinity matrix)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from fabricase.parsers.numbers import to_int

__all__ = [
    "NVLINK_COUNTERS", "CounterLayout", "CounterPlan", "NvlinkGpu", "NvlinkLink", "NvlinkReport", "Topology",
    "counter_layout", "pair_error_counters", "parse_nvlink_errors", "parse_nvlink_status", "parse_topo_matrix",
    "split_error_counters",
]  # fmt: skip

# GPU and link numbers are small (a bounded count of digits keeps int() from raising). The name, the UUID and a
# link's state are split off in code (_name_uuid, str.strip): a lazy group before `\s*` is quadratic in a run of
# spaces.
_GPU = re.compile(r"GPU (?P<index>[0-9]{1,9}): (?P<rest>.*)")
_STATUS = re.compile(r"\s*Link (?P<link>[0-9]{1,9}): (?P<value>.*)")
_COUNTER = re.compile(r"\s*Link (?P<link>[0-9]{1,9}): (?P<name>[^:]+?): (?P<value>\S+)(?: .*)?")
_SPEED = re.compile(r"(?P<num>[0-9]{1,9}(?:\.[0-9]{1,9})?) GB/s")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ALL_INACTIVE = re.compile(r"all links are inactive", re.I)
# "Device does not have or support Nvlink" (L40S), "Nvlink queries are not supported for Devices in MIG mode"
_UNSUPPORTED = re.compile(r"not supported|does not have or support", re.I)

# nvidia-smi's counter names -> the normalized metric (telemetry.md section c.1; NVML nvmlNvLinkErrorCounter_t).
# "CRC Errors" is the flow-control-unit CRC count (NVML DL_CRC_FLIT), the one `nvlink -e` prints.
NVLINK_COUNTERS = {
    "replay errors": "nvlink.replay_errors",
    "recovery errors": "nvlink.recovery_errors",
    "crc errors": "nvlink.crc_flit_errors",
    "crc flit errors": "nvlink.crc_flit_errors",
    "flit crc errors": "nvlink.crc_flit_errors",
    "crc data errors": "nvlink.crc_data_errors",
    "data crc errors": "nvlink.crc_data_errors",
    "ecc data errors": "nvlink.ecc_data_errors",
}


@dataclass
class NvlinkLink:
    link: int
    state: str | None = None  # "active" | "inactive" (from -s); None when only counters were read
    speed_gbps: float | None = None
    counters: dict[str, int] = field(default_factory=dict)  # as nvidia-smi names them: {"Replay Errors": 0}

    def metric(self, name: str) -> int | None:
        """A normalized counter (nvlink.replay_errors, ...) or None when nvidia-smi did not print it."""
        return next((v for k, v in self.counters.items() if NVLINK_COUNTERS.get(k.lower()) == name), None)


@dataclass
class NvlinkGpu:
    index: int
    name: str | None = None
    uuid: str | None = None
    links: dict[int, NvlinkLink] = field(default_factory=dict)
    all_inactive: bool = False  # nvidia-smi said so instead of listing links
    unsupported: str | None = None  # why nvidia-smi printed no links (no NVLink, MIG mode), as it said it


@dataclass
class NvlinkReport:
    gpus: dict[int, NvlinkGpu] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _name_uuid(rest: str) -> tuple[str | None, str | None]:
    """ "NVIDIA H100 80GB HBM3 (UUID: GPU-4f2c...)" -> (name, uuid); either is None when empty."""
    rest = rest.rstrip()
    name, sep, uuid = rest.rpartition(" (UUID: ")
    if sep and uuid.endswith(")") and ")" not in uuid[:-1]:
        return name or None, uuid[:-1] or None
    return rest or None, None


def _gpus(text: str | None, report: NvlinkReport):
    """(gpu, line) for every non-header line under a `GPU N:` header."""
    current: NvlinkGpu | None = None
    text = text or ""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    for raw in text.splitlines():
        line = raw.rstrip()
        header = _GPU.fullmatch(line) if line.startswith("GPU ") else None
        if header:
            index = int(header.group("index"))
            current = report.gpus.setdefault(index, NvlinkGpu(index, *_name_uuid(header.group("rest"))))
        elif current is not None and line.strip():
            yield current, line


def parse_nvlink_status(text: str | None) -> NvlinkReport:
    """`nvidia-smi nvlink -s`: per GPU, per link, speed in GB/s or inactive. Never raises."""
    report = NvlinkReport()
    for gpu, line in _gpus(text, report):
        if _ALL_INACTIVE.search(line):
            gpu.all_inactive = True
            continue
        if _UNSUPPORTED.search(line):
            gpu.unsupported = line.strip()
            continue
        match = _STATUS.fullmatch(line)
        if not match:
            if not line.strip().startswith("[..."):
                report.errors.append(f"GPU {gpu.index}: unrecognized line {line.strip()[:80]!r}")
            continue
        link = gpu.links.setdefault(int(match.group("link")), NvlinkLink(int(match.group("link"))))
        value = match.group("value").strip()
        speed = _SPEED.fullmatch(value)
        if speed:
            link.state, link.speed_gbps = "active", float(speed.group("num"))
        elif "inactive" in value.lower():
            link.state = "inactive"
        else:
            report.errors.append(f"GPU {gpu.index} link {link.link}: unrecognized state {value[:40]!r}")
    for raw in (text or "").splitlines():
        if _ALL_INACTIVE.search(raw) and not report.gpus:
            report.errors.append(raw.strip()[:120])  # said for the whole host, before any GPU line
    return report


# The usual `nvlink -e` output, whole: GPU headers and "Link N: Name: count" lines only. A host prints a few
# hundred of these per snapshot, so they are read in one regex pass; anything else takes the line-by-line path.
_FAST = re.compile(r"^GPU ([0-9]{1,9}): ([^\n]*)$|^[ \t]*Link ([0-9]{1,9}): ([^:\n]+?): ([0-9]{1,20})[ \t\r]*$",
                   re.M | re.A)  # fmt: skip
_NONBLANK = re.compile(r"^[ \t\r]*\S", re.M)


def _fast_errors(text: str) -> NvlinkReport | None:
    """The report when every non-blank line is a header or a numeric counter, under a header; else None."""
    matches = _FAST.findall(text)
    if not matches or not matches[0][0] or len(matches) != len(_NONBLANK.findall(text)):
        return None
    report = NvlinkReport()
    gpu = None
    for index, rest, link, counter, value in matches:
        if index:
            gpu = report.gpus.get(int(index))
            if gpu is None:
                gpu = report.gpus[int(index)] = NvlinkGpu(int(index), *_name_uuid(rest))
            continue
        number = int(link)
        rec = gpu.links.get(number)
        if rec is None:
            rec = gpu.links[number] = NvlinkLink(number)
        rec.counters[counter.strip()] = int(value)
    return report


def parse_nvlink_errors(text: str | None) -> NvlinkReport:
    """`nvidia-smi nvlink -e`: per GPU, per link, every counter printed (unknown names kept). Never raises."""
    if text and "\x1b" not in text and (fast := _fast_errors(text)) is not None:
        return fast
    report = NvlinkReport()
    for gpu, line in _gpus(text, report):
        match = _COUNTER.fullmatch(line)
        value = match.group("value") if match else ""
        if (count := to_int(value)) is not None:  # the common case first: a host prints thousands of these
            link = gpu.links.get(number := int(match.group("link")))
            if link is None:
                link = gpu.links[number] = NvlinkLink(number)
            link.counters[match.group("name").strip()] = count
            continue
        if _UNSUPPORTED.search(line) or _ALL_INACTIVE.search(line):
            gpu.unsupported = line.strip()
            continue
        if not match:
            if not line.strip().startswith("[..."):
                report.errors.append(f"GPU {gpu.index}: unrecognized line {line.strip()[:80]!r}")
            continue
        link = gpu.links.setdefault(int(match.group("link")), NvlinkLink(int(match.group("link"))))
        if value.upper() not in ("N/A", "[N/A]"):
            report.errors.append(f"GPU {gpu.index} link {link.link}: {match.group('name')}: not a count {value!r}")
    return report


# A counter value at the end of its line, and a GPU header's name and UUID: what differs between hosts of one
# layout. Cut out, they leave the layout (headers, link numbers and counter names), read once per layout. The
# header pattern starts with a literal newline: the regex engine then skips to candidates instead of trying `^`
# at every character.
_VALUE = re.compile(r": ([0-9]{1,20})[ \t\r]*$", re.M | re.A)
_HEADER_LINE = re.compile(r"\nGPU ([0-9]{1,9}): [^\n]*", re.A)


@dataclass(frozen=True, eq=False)
class CounterLayout:
    """Where each counter of one `nvlink -e` layout sits among its values: (GPU index, link, counter name) ->
    position. One object per distinct layout (counter_layout is memoized), compared by identity: a cheap key for
    what callers derive from a layout once."""

    at: dict[tuple[int, int, str], int]


def split_error_counters(text: str | None) -> tuple[CounterLayout, list[str]] | None:
    """`nvidia-smi nvlink -e` in its usual shape as (its layout, the counter values as digit strings); None when
    the text is not in that shape (parse_nvlink_errors then reads it in full). A fleet's hosts share a few layouts:
    each is parsed once, not once per host."""
    if not text or "\x1b" in text:
        return None
    parts = _HEADER_LINE.split("\n" + text)  # a leading blank line changes nothing _fast_errors reads
    bare = parts[0] + "".join(f"\nGPU {index}: {body}" for index, body in zip(parts[1::2], parts[2::2], strict=True))
    pieces = _VALUE.split(bare)
    layout = counter_layout(tuple(pieces[0::2]))
    return None if layout is None else (layout, pieces[1::2])


@functools.lru_cache(maxsize=64)
def counter_layout(skeleton: tuple[str, ...]) -> CounterLayout | None:
    """The layout of a text cut at its counter values (the pieces between them), or None when it is not the usual
    shape. The text is rebuilt with each value replaced by its position and read by _fast_errors itself, so the
    same lines are accepted, a repeated counter keeps its last value and names are stripped alike (header names
    and UUIDs are left out: no sample reads them)."""
    template = "".join(f"{piece}: {position}" for position, piece in enumerate(skeleton[:-1])) + skeleton[-1]
    report = _fast_errors(template)
    if report is None:
        return None
    return CounterLayout({(gpu.index, link.link, name): position for gpu in report.gpus.values()
                          for link in gpu.links.values() for name, position in link.counters.items()})  # fmt: skip


_Counters = dict[tuple[int, int, str], int]


class CounterPlan(NamedTuple):
    """Per counter of either snapshot, by GPU, link and counter name (the order samples list them in): component
    (nvlink:<gpu>/<link>), normalized metric and position in each snapshot's values (-1 where absent); complete
    when none is absent."""

    components: tuple[str, ...]
    metrics: tuple[str, ...]
    at0: tuple[int, ...]
    at1: tuple[int, ...]
    complete: bool


def pair_error_counters(text0: str | None, text1: str | None) -> tuple[CounterPlan, list[int], list[int]]:
    """Two `nvlink -e` snapshots as (plan, values of snapshot 0, values of snapshot 1). Hosts of one layout share
    the plan (worked out once per pair of layouts); a text in another shape is parsed in full."""
    layout0, at0, values0 = _error_counters(text0)
    layout1, at1, values1 = _error_counters(text1)
    plan = _layout_plan(layout0, layout1) if layout0 is not None and layout1 is not None else _plan(at0, at1)
    return plan, values0, values1


def _error_counters(text: str | None) -> tuple[CounterLayout | None, _Counters, list[int]]:
    """(layout or None, (GPU, link, counter) -> position in the values, values) of one snapshot."""
    if not text:
        return None, {}, []
    split = split_error_counters(text)
    if split is not None:
        layout, values = split
        return layout, layout.at, list(map(int, values))
    at: _Counters = {}
    counts: list[int] = []
    for gpu in parse_nvlink_errors(text).gpus.values():
        for link in gpu.links.values():
            for name, value in link.counters.items():
                at[(gpu.index, link.link, name)] = len(counts)
                counts.append(value)
    return None, at, counts


@functools.lru_cache(maxsize=64)
def _layout_plan(layout0: CounterLayout, layout1: CounterLayout) -> CounterPlan:
    return _plan(layout0.at, layout1.at)


def _plan(at0: _Counters, at1: _Counters) -> CounterPlan:
    keys = sorted(at0.keys() | at1.keys())
    positions0, positions1 = tuple(at0.get(k, -1) for k in keys), tuple(at1.get(k, -1) for k in keys)
    return CounterPlan(tuple(f"nvlink:{gpu}/{link}" for gpu, link, _ in keys), tuple(_metric(k[2]) for k in keys),
                       positions0, positions1, -1 not in positions0 and -1 not in positions1)  # fmt: skip


@functools.lru_cache(maxsize=256)
def _metric(name: str) -> str:
    """The normalized metric of a counter name, `raw:<name>` for one not in NVLINK_COUNTERS."""
    return NVLINK_COUNTERS.get(name.lower(), f"raw:{name}")


# ---------------------------------------------------------------------------------------------- topo -m

# Closest first: the path between two devices (nvidia-smi topo -m legend).
_PATH_RANK = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}


@dataclass
class Topology:
    devices: list[str] = field(default_factory=list)  # column order: GPU0.., NIC0.. (or mlx5_0.. on old drivers)
    paths: dict[tuple[str, str], str] = field(default_factory=dict)  # ("GPU0", "NIC0") -> "PIX"
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)  # "NIC0" -> "mlx5_0" (the NIC Legend)
    errors: list[str] = field(default_factory=list)

    def nearest_nics(self, gpu: str) -> list[tuple[str, str]]:
        """(RDMA device or NIC column, path) for a GPU column, closest first."""
        nics = [d for d in self.devices if not d.startswith("GPU")]
        found = [(self.nic_names.get(n, n), self.paths[(gpu, n)]) for n in nics if (gpu, n) in self.paths]
        return sorted(found, key=lambda item: _PATH_RANK.get(re.sub(r"\d+$", "", item[1]), 9))


def parse_topo_matrix(text: str | None) -> Topology:
    """`nvidia-smi topo -m`. Never raises; rows that do not fit the header are recorded in errors."""
    topo = Topology()
    text = text or ""
    if "\x1b" in text:  # colour codes of a terminal capture; one pass over the text, not one per line
        text = _ANSI.sub("", text)
    lines = [line.rstrip() for line in text.splitlines() if not line.isspace() and line]
    for index, line in enumerate(lines):
        if not line.lstrip().startswith("GPU"):
            continue
        tokens = line.split()
        if not topo.devices and tokens and tokens[0].startswith("GPU") and "CPU" in tokens:
            topo.devices = tokens[: tokens.index("CPU")]
            _rows(topo, lines[index + 1 :])
            break
    for line in lines:
        legend = re.fullmatch(r"\s*(NIC[0-9]+): (\S+)", line) if "NIC" in line else None
        if legend:
            topo.nic_names[legend.group(1)] = legend.group(2)
    if text and text.strip() and not topo.devices:
        topo.errors.append("no device header line (GPU0 ... CPU Affinity)")
    return topo


def _rows(topo: Topology, lines: list[str]) -> None:
    width = len(topo.devices)
    devices = set(topo.devices)  # a set: a list's `in` per row is quadratic in a hostile header's width
    for line in lines:
        tokens = line.split()
        if not tokens or tokens[0] not in devices:
            if tokens and tokens[0] == "Legend:":
                return
            continue
        row, cells = tokens[0], tokens[1 : 1 + width]
        if len(cells) < width:
            topo.errors.append(f"{row}: {len(cells)} of {width} columns")
        for column, cell in zip(topo.devices, cells, strict=False):
            topo.paths[(row, column)] = cell
        rest = tokens[1 + width :]
        if rest:
            topo.cpu_affinity[row] = rest[0]
        if len(rest) > 1:
            topo.numa_affinity[row] = rest[1]
