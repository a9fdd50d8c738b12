"""DCGM's `dcgmi` tables: `dcgmi discovery -l` (GPUs and NVSwitches), `dcgmi health -c` (health watches) and
`dcgmi diag` (diagnostic results). All are boxes of `| left | right |` rows; a blank left cell continues the
row above."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricase.parsers.numbers import to_int
from fabricase.parsers.nvidia_smi import normalize_pci

__all__ = ["DcgmDiagResult", "DcgmDiscovery", "DcgmHealth", "parse_dcgmi_diag", "parse_dcgmi_discovery",
           "parse_dcgmi_health"]  # fmt: skip

_HEALTH_WORDS = ("Healthy", "Warning", "Failure", "Failed", "Unknown")


def _rows(text: str | None) -> list[tuple[str, str]]:
    """(left, right) cells of every `| a | b |` row, continuation rows merged into the row above.

    dcgmi wraps long text at the cell width, even inside a word: a continuation that starts right after the
    padding space continues the word of a full line above; one that starts with a second space is a new word."""
    rows: list[tuple[str, str]] = []
    full = False
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= set("|+-= "):
            continue
        raw = line.strip("|").split("|")
        left, right = raw[0].strip(), " ".join(c.strip() for c in raw[1:]).strip()
        if left.startswith("-----"):  # a section divider inside the box ("|-----  Deployment  ---+")
            rows.append((_section_name(left), ""))
            continue
        if not left and rows and right:
            new_word = not full or raw[1].startswith("  ")
            rows[-1] = (rows[-1][0], rows[-1][1] + (" " if new_word else "") + right)
        elif left or right:
            rows.append((left, right))
        width = len(raw[-1]) - 2 if len(raw) > 1 else 0
        full = len(raw) > 1 and len(raw[-1].strip()) >= width - 1
    return rows


def _section_name(divider: str) -> str:
    """ "-----  Deployment  ---+" -> "Deployment": the words between the dash runs ("" when there are none).

    Words, not the regex `-{3,}\\s+(.+?)\\s+-{3,}`, which is quadratic in a long run of dashes or spaces."""
    words = divider.split()
    end = next((i for i, word in enumerate(words[1:], 1) if word.startswith("---")), None)
    if not words or set(words[0]) != {"-"} or len(words[0]) < 3 or end is None or end < 2:
        return ""
    return " ".join(words[1:end])


@dataclass
class DcgmDiscovery:
    gpus: list[dict[str, str | int | None]] = field(default_factory=list)  # id, name, bus_id, uuid
    nvswitches: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_dcgmi_discovery(text: str | None) -> DcgmDiscovery:
    """`dcgmi discovery -l`. Never raises; a connection error ("Unable to connect ...") is kept in errors."""
    found = DcgmDiscovery()
    section = None
    for line in (text or "").splitlines():
        if len(line.strip()) < 3:  # no row, header or message is this short
            continue
        head = re.match(r"\s*([0-9]+) (GPUs?|NvSwitch(?:es)?|CPUs?|CPU Cores?) found", line, re.I)
        if head:
            section = "switch" if head.group(2).lower().startswith("nvswitch") else head.group(2).lower()[:3]
            continue
        if re.search(r"\b(?:error|unable|fail\w*)\b", line, re.I):
            found.errors.append(line.strip()[:160])
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.strip().startswith("|") else []
        if not cells or not cells[0] and len(cells) < 2:
            continue
        number = to_int(cells[0])
        if section == "switch" and number is not None:
            found.nvswitches.append(number)
        elif section == "gpu" and number is not None:
            found.gpus.append({"id": number, "name": None, "bus_id": None, "uuid": None})
            _gpu_detail(found.gpus[-1], cells[1] if len(cells) > 1 else "")
        elif section == "gpu" and not cells[0] and found.gpus and len(cells) > 1:
            _gpu_detail(found.gpus[-1], cells[1])
    return found


def _gpu_detail(gpu: dict, cell: str) -> None:
    key, _, value = cell.partition(":")
    value = value.strip()
    if key.strip() == "Name":
        gpu["name"] = value or None
    elif key.strip() == "PCI Bus ID":
        gpu["bus_id"] = normalize_pci(value)
    elif key.strip() == "Device UUID":
        gpu["uuid"] = value or None


@dataclass
class DcgmHealth:
    overall: str | None = None  # Healthy | Warning | Failure
    entities: dict[str, str] = field(default_factory=dict)  # "GPU 0" / "NvSwitch 3" -> health
    messages: list[str] = field(default_factory=list)  # what DCGM says is wrong, as it says it
    errors: list[str] = field(default_factory=list)


def _health_word(text: str) -> str | None:
    return next((w for w in _HEALTH_WORDS if re.search(rf"\b{w}\b", text)), None)


_EOL = re.compile(r"[\r\n]")
_HEALTH_ERROR = re.compile(r"\b(?:Error:|Unable to|not enabled|failed)\b")


def _lines_matching(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Each line of `text` that holds a match, once, in order: one search over the whole text, not one per line."""
    out, last_end = [], -1
    for m in pattern.finditer(text):
        if m.start() <= last_end:
            continue  # on a line already taken
        low = last_end + 1  # never search back past the line taken last: each character is looked at once
        start = max(text.rfind("\n", low, m.start()), text.rfind("\r", low, m.start()), low - 1) + 1
        eol = _EOL.search(text, m.end())  # the nearer of \n and \r, found by one forward scan
        last_end = eol.start() if eol else len(text)
        out.append(text[start:last_end])
    return out


def parse_dcgmi_health(text: str | None) -> DcgmHealth:
    """`dcgmi health -c`. Never raises."""
    health = DcgmHealth()
    group, entity = "GPU", None
    for left, right in _rows(text):
        inline = re.search(r"Overall Health:\s*(\w+)", f"{left} {right}")
        if left == "Overall Health" or inline:
            health.overall = inline.group(1) if inline else _health_word(right)
        elif left in ("GPU", "GPUs", "NvSwitch", "NvSwitches", "Switch"):
            group = "NvSwitch" if left.startswith(("Nv", "Sw")) else "GPU"
        elif match := re.fullmatch(r"->\s*([0-9]{1,9})", left):
            entity = f"{group} {match.group(1)}"
            if word := _health_word(right):
                health.entities[entity] = word
        elif left.startswith("->") and right:
            detail = right if not _health_word(right) or len(right.split()) > 1 else ""
            if detail:
                health.messages.append(f"{entity or 'host'}: {left.lstrip('-> ').strip()}: {detail}")
    for line in _lines_matching(text or "", _HEALTH_ERROR):
        if "|" not in line:
            health.errors.append(line.strip()[:160])
    return health


@dataclass
class DcgmDiagResult:
    test: str
    result: str  # Pass | Fail | Warn | Skip | Error | Warning | as printed
    gpus: list[int] = field(default_factory=list)
    detail: str = ""


def parse_dcgmi_diag(text: str | None) -> list[DcgmDiagResult]:
    """`dcgmi diag -r N` results, one per test row (and per Error/Warning row). Never raises."""
    results: list[DcgmDiagResult] = []
    last_test = None
    for left, right in _rows(text):
        if left in ("Diagnostic", "Result"):
            continue
        if not right:
            last_test = left or last_test  # a section ("Deployment") names the Error rows under it
            continue
        if left in ("Error", "Warning", "Info"):
            results.append(DcgmDiagResult(last_test or left, left, _gpu_ids(right), right))
            continue
        last_test = left
        for part in re.split(r"\s(?=(?:Pass|Fail|Warn|Skip)\b)", right):
            word = re.match(r"(Pass|Fail|Warn|Skip)\w*", part)
            if word:
                results.append(DcgmDiagResult(left, word.group(1), _gpu_ids(part), part.strip()))
    return results


def _gpu_ids(text: str) -> list[int]:
    match = re.search(r"GPUs?:?\s*((?:[0-9]+\s*,\s*)*[0-9]+)", text)
    ids = [to_int(x) for x in re.findall(r"[0-9]+", match.group(1))] if match else []
    return [x for x in ids if x is not None]
