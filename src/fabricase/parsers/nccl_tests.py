"""nccl-tests output (`all_reduce_perf`, `all_gather_perf`, ...) -> one result record.

Reads the full output and the excerpts people paste: rows with mpirun rank tags (`[0]`), digit-group
underscores (`8_589_934_592`), the old `error` column in place of `#wrong`, tables without `redop`/`root`
(all_gather) and abridged tables (`size time algbw busbw`). `parse_busbw_table` reads the Markdown busbw
tables published next to such runs (`| 16GiB | 482.26GBps |`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricase.parsers.numbers import to_float

__all__ = [
    "BusbwRow",
    "BusbwTable",
    "NcclTestsRank",
    "NcclTestsResult",
    "NcclTestsRow",
    "NcclTiming",
    "parse_busbw_table",
    "parse_nccl_tests",
    "parse_size",
]

_TAG = re.compile(r"^\s*\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?")
_INNER_TAG = re.compile(r"\[\d+\]")
_GROUPED = re.compile(r"\b\d+(?:_\d+)+\b")
# Integers of at most 20 digits (sizes and counts are u64); a longer run of digits is not a number here, and
# int() of thousands of digits raises.
_INT = re.compile(r"-?[0-9]{1,20}", re.ASCII)
_FLOAT = re.compile(r"-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?", re.ASCII)
_N = r"[0-9]{1,20}(?![0-9])"
# The GPU name is the rest of the line, stripped in code: `(.*?)\s*$` is quadratic in a run of spaces.
_RANK = re.compile(
    rf"#\s*Rank\s+(?P<rank>{_N})\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>{_N})\s+on\s+(?P<host>\S+)\s+device\s+"
    rf"(?P<dev>{_N})\s+\[(?P<bus>[^\]]*)\](?P<gpu>.*)"
)
_PARAMS = {
    "nthreads": re.compile(rf"\bnThread\s+({_N})"), "ngpus": re.compile(rf"\bnGpus\s+({_N})"),
    "min_bytes": re.compile(rf"\bminBytes\s+({_N})"), "max_bytes": re.compile(rf"\bmaxBytes\s+({_N})"),
    "warmup_iters": re.compile(rf"\bwarmup iters:\s*({_N})"), "iters": re.compile(rf"(?<!warmup )\biters:\s*({_N})"),
}  # fmt: skip
_OOB = re.compile(rf"#\s*Out of bounds values\s*:\s*(?P<n>{_N})\s*(?P<status>\w+)?")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<v>\S+)")
_VERSION = re.compile(r"nccl-tests version\s+(\S+)")
_COLLECTIVE = re.compile(r"\b(?P<name>[a-z]+(?:_[a-z]+)*)_perf\b")
_FAILURE = re.compile(r"(?i)test (?:nccl|cuda) failure|\bnccl error\b|\btest failure\b|\bunhandled \w+ error\b")
_TIMING = ("time_us", "algbw", "busbw", "wrong")
_MAX_ROW_TOKENS = 16  # size count type redop root and two halves of four timings: 13 at most
_SIZE = re.compile(r"(?P<n>[0-9]{1,20}(?:\.[0-9]{1,20})?)\s*(?P<unit>[KMGT]i?B|[KMGT]|B)?", re.ASCII | re.IGNORECASE)
_MAX_SIZE = 2**64 - 1
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


@dataclass(frozen=True)
class NcclTestsRank:
    rank: int
    pid: int
    host: str
    device: int
    bus_id: str  # as printed: "0x00" (old) or "0000:18:00" (new)
    gpu: str | None  # "A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class NcclTiming:
    """One half of a row (out-of-place or in-place). wrong: #wrong (or the old max-error column); None = N/A."""

    time_us: float | None
    algbw: float | None  # GB/s
    busbw: float | None  # GB/s
    wrong: float | None = None


@dataclass(frozen=True)
class NcclTestsRow:
    size: int  # bytes
    count: int | None
    type: str | None
    redop: str | None
    root: int | None
    out_of_place: NcclTiming | None
    in_place: NcclTiming | None

    @property
    def busbw(self) -> float | None:
        """The better of the two halves' busbw, GB/s."""
        values = [t.busbw for t in (self.out_of_place, self.in_place) if t and t.busbw is not None]
        return max(values, default=None)


@dataclass
class NcclTestsResult:
    """collective: "all_reduce", "all_gather", ... (from an echoed command line or given by the caller).

    wrong_column: "#wrong" (a count of wrong elements) or "error" (old versions: the max error); None when the
    table header was not captured. avg_busbw: the first "Avg bus bandwidth" footer; several footers mean
    several independent runs in one file (a non-MPI build started once per rank prints one each).
    """

    collective: str | None = None
    version: str | None = None
    command: str | None = None
    nthreads: int | None = None
    ngpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    warmup_iters: int | None = None
    iters: int | None = None
    ranks: list[NcclTestsRank] = field(default_factory=list)
    rows: list[NcclTestsRow] = field(default_factory=list)
    wrong_column: str | None = None
    avg_busbw: float | None = None
    avg_busbw_values: list[float] = field(default_factory=list)
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return sorted({r.host for r in self.ranks})

    @property
    def nranks(self) -> int | None:
        return len(self.ranks) or None

    @property
    def gpu_models(self) -> list[str]:
        return sorted({r.gpu for r in self.ranks if r.gpu})

    def largest(self) -> NcclTestsRow | None:
        """The last row of the largest size measured: where busbw is compared with a baseline."""
        best: NcclTestsRow | None = None
        for row in self.rows:
            if best is None or row.size >= best.size:
                best = row
        return best

    @property
    def max_busbw(self) -> float | None:
        return max((r.busbw for r in self.rows if r.busbw is not None), default=None)

    @property
    def wrong_total(self) -> float | None:
        """Sum of #wrong over every row and half; None when no row reported it."""
        values = [t.wrong for r in self.rows for t in (r.out_of_place, r.in_place) if t and t.wrong is not None]
        return sum(values) if values else None


def parse_size(text: str) -> int | None:
    """'8G', '16GiB', '32KiB', '2M', '8' -> bytes (binary multiples, as nccl-tests reads -b/-e); None if not a size
    (more than 20 digits, or more bytes than a u64 holds)."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        return None
    unit = (match.group("unit") or "").lower()[:1]
    size = int(float(match.group("n")) * _SIZE_UNITS[unit])
    return size if size <= _MAX_SIZE else None


def _value(token: str) -> float | None:
    """A timing or bandwidth cell; None when it is not a finite number ("N/A", "1e999", 5,000 digits)."""
    return to_float(token) if _FLOAT.fullmatch(token) else None


def _timing(tokens: list[str]) -> NcclTiming:
    values = [_value(t) for t in tokens] + [None] * (4 - len(tokens))
    return NcclTiming(*values[:4])


def _row_from_header(tokens: list[str], columns: list[str]) -> NcclTestsRow | None:
    fields: dict[str, str] = {}
    halves: list[list[str]] = [[], []]
    for name, token in zip(columns, tokens, strict=True):
        key = name.lstrip("#")
        if key in ("time", "algbw", "busbw", "wrong", "error"):
            half = 0 if len(halves[0]) < 4 and not (key == "time" and halves[0]) else 1
            halves[half].append(token)
        else:
            fields[key] = token
    size = fields.get("size", "")
    if not _INT.fullmatch(size):
        return None
    return NcclTestsRow(
        int(size),
        int(fields["count"]) if _INT.fullmatch(fields.get("count", "")) else None,
        fields.get("type"),
        fields.get("redop"),
        int(fields["root"]) if _INT.fullmatch(fields.get("root", "")) else None,
        _timing(halves[0]) if halves[0] else None,
        _timing(halves[1]) if halves[1] else None,
    )


def _row_heuristic(tokens: list[str]) -> NcclTestsRow | None:
    """A row without a usable header: size count type [redop] [root] then 4 or 8 timing values."""
    if len(tokens) > _MAX_ROW_TOKENS:
        return None
    words = [i for i, t in enumerate(tokens) if t != "N/A" and _value(t) is None]
    if len(tokens) < 3 or not words or words[0] != 2 or words != list(range(2, 2 + len(words))) or len(words) > 2:
        return None
    if not (_INT.fullmatch(tokens[0]) and _INT.fullmatch(tokens[1])):
        return None
    tail = tokens[2 + len(words) :]
    root: int | None = None
    if len(tail) in (5, 9):
        if not _INT.fullmatch(tail[0]):
            return None
        root, tail = int(tail[0]), tail[1:]
    if len(tail) not in (4, 8):
        return None
    return NcclTestsRow(
        int(tokens[0]), int(tokens[1]), tokens[2], tokens[3] if len(words) == 2 else None, root,
        _timing(tail[:4]), _timing(tail[4:]) if len(tail) == 8 else None,
    )  # fmt: skip


def _clean(line: str) -> str:
    line = _TAG.sub("", line)
    if "[" in line:
        line = _INNER_TAG.sub(" ", line)
    return _GROUPED.sub(lambda m: m.group().replace("_", ""), line) if "_" in line else line


def _header_columns(line: str) -> list[str] | None:
    tokens = line.lstrip("#").split()
    return tokens if "size" in tokens and "busbw" in tokens else None


def _meta(result: NcclTestsResult, line: str) -> bool:
    """Apply a '#' metadata line; True when it was one."""
    if match := _RANK.search(line):
        gpu = match.group("gpu").strip() or None
        rank = NcclTestsRank(int(match.group("rank")), int(match.group("pid")), match.group("host"),
                             int(match.group("dev")), match.group("bus"), gpu)  # fmt: skip
        result.ranks.append(rank)
    elif match := _OOB.search(line):
        result.out_of_bounds = (result.out_of_bounds or 0) + int(match.group("n"))
        ok = (match.group("status") or "").upper() == "OK"
        result.out_of_bounds_ok = ok if result.out_of_bounds_ok is None else (result.out_of_bounds_ok and ok)
    elif match := _AVG.search(line):
        value = _value(match.group("v"))
        if value is not None:
            result.avg_busbw_values.append(value)
            result.avg_busbw = result.avg_busbw_values[0]
    elif "nThread" in line or "nGpus" in line:
        for name, pattern in _PARAMS.items():
            if (found := pattern.search(line)) and getattr(result, name) is None:
                setattr(result, name, int(found.group(1)))
    elif match := _VERSION.search(line):
        result.version = match.group(1)
    elif "Collective test starting" in line and (match := _COLLECTIVE.search(line)):
        result.collective = result.collective or match.group("name")
    else:
        return False
    return True


def parse_nccl_tests(text: str | None, collective: str | None = None) -> NcclTestsResult:
    """Ranks, rows and footers of nccl-tests output; never raises. `collective` names it when the text does not."""
    result = NcclTestsResult(collective=collective)
    columns: list[str] | None = None
    for raw in (text or "").splitlines():
        line = _clean(raw).strip()
        if len(line) < 5 and not line.startswith(("#", "$")):  # shorter than any row ("1 2 3"), header or footer
            continue
        if line.startswith("$") or (line.startswith("#") and "_perf" in line and " -b " in line):
            result.command = result.command or line.lstrip("$# ")
            if (match := _COLLECTIVE.search(line)) and result.collective is None:
                result.collective = match.group("name")
            continue
        if (found := _header_columns(line)) is not None:
            columns = found
            result.wrong_column = next((c for c in found if c.lstrip("#") in ("wrong", "error")), None)
            if result.wrong_column == "wrong":  # printed as "#wrong" after the leading "#" is stripped
                result.wrong_column = "#wrong"
            continue
        if line.startswith("#"):
            _meta(result, line)
            continue
        if " NCCL INFO " in line or " NCCL TRACE " in line:
            continue  # NCCL_DEBUG=INFO lines between the rows ("comm 0x.. rank 0 nranks 3 ..." has numbers too)
        if _FAILURE.search(line):
            result.errors.append(line[:300])
            continue
        if "NCCL WARN" in line:
            result.warnings.append(line[:300])
            continue
        tokens = line.split()
        if not _INT.fullmatch(tokens[0]) or len(tokens) < 3:
            if sum(_value(t) is not None for t in tokens[:_MAX_ROW_TOKENS]) >= 3:
                result.errors.append(f"parse: unrecognised row: {line[:120]}")
            continue
        row = None
        if columns and len(columns) == len(tokens):
            row = _row_from_header(tokens, columns)
        row = row or _row_heuristic(tokens)
        if row is None:
            result.errors.append(f"parse: unrecognised row: {line[:120]}")
        else:
            result.rows.append(row)
    if len(result.avg_busbw_values) > 1:
        result.warnings.append(
            f"{len(result.avg_busbw_values)} result footers: several independent runs in one output"
            " (a build without MPI started once per rank runs one test per process)"
        )
    if result.out_of_bounds_ok is False:
        result.errors.append(f"out of bounds values: {result.out_of_bounds} FAILED")
    if text and text.strip() and not result.rows and not result.errors:
        result.errors.append("parse: no nccl-tests result rows found")
    return result


@dataclass(frozen=True)
class BusbwRow:
    label: str  # the first cell as printed: "16GiB", "8"
    size_bytes: int | None  # when the label is a size with a unit
    values: dict[str, float | None]  # column -> number (GBps values in GB/s; "2.2x" -> 2.2); None if not a number


@dataclass
class BusbwTable:
    columns: list[str] = field(default_factory=list)
    rows: list[BusbwRow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def column(self, name: str) -> dict[str, float | None]:
        return {row.label: row.values.get(name) for row in self.rows}


_CELL_NUMBER = re.compile(r"(?P<n>-?[0-9]{1,20}(?:\.[0-9]{1,20})?)\s*(?:GBps|GB/s|x)?", re.ASCII)


_MAX_TABLE_ROWS = 4096  # a published table has one row per message size: a few dozen


def parse_busbw_table(text: str | None) -> BusbwTable:
    """A Markdown table of bus bandwidths (`| payload | busbw | ...`); never raises."""
    table = BusbwTable()
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if all(set(c) <= set(":- ") for c in cells):
            continue
        if not table.columns:
            table.columns = cells
            continue
        if len(cells) != len(table.columns):
            table.errors.append(f"parse: row with {len(cells)} cells, header has {len(table.columns)}: {line[:120]}")
            continue
        label = cells[0]
        values: dict[str, float | None] = {}
        for name, cell in zip(table.columns[1:], cells[1:], strict=True):
            match = _CELL_NUMBER.fullmatch(cell)
            values[name] = float(match.group("n")) if match else None
        size = parse_size(label) if re.search(r"[A-Za-z]", label) else None
        table.rows.append(BusbwRow(label, size, values))
        if len(table.rows) >= _MAX_TABLE_ROWS:
            table.errors.append(f"parse: more than {_MAX_TABLE_ROWS} rows: the rest is not read")
            break
    if text and text.strip() and not table.rows:
        table.errors.append("parse: no Markdown table rows found")
    return table
