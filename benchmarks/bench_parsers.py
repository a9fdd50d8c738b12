"""Hostile input for every parser: exceptions, slow inputs and the worst time per parser.

    python benchmarks/bench_parsers.py [--quick] [--inputs 10000] [--size 1000000] [--seed 14] [--only TEXT]

Every `parse_*` function of the fabricase.parsers modules is found by introspection (a new parser is covered
without a change here); INPUT_KINDS says how to call the few that do not take one text. Two parts:

- fuzz: --inputs inputs per parser, random mutations of the real captures (../shared/fixtures/real and
  tests/fixtures) mixed with the adversarial shapes at small sizes. Counts exceptions (must be 0) and inputs
  over SLOW_S (must be 0).
- worst case: every adversarial shape at --size characters (1 MB): long runs of one character, long lines
  after a format's own keywords, huge numbers, deep nesting, XML entities, non-UTF-8, and each parser's
  real captures repeated to the size. The slowest shape per parser is printed (target under 1 s).

--quick: 300 inputs per parser and 100 KB shapes. The exit status is 1 when an exception or a slow input was
seen. The same discovery, shapes and mutations serve tests/parsers/test_parser_fuzz.py and
test_parser_linear.py, the short versions in the suite.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import pkgutil
import random
import re
import signal
import sys
import time
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fabricase.parsers

REPO = Path(__file__).resolve().parents[1]
FIXTURE_ROOTS = (REPO.parent / "shared" / "fixtures" / "real", REPO / "tests" / "fixtures")
SLOW_S = 2.0
TARGET_S = 1.0
MAX_SEED_BYTES = 4 * 1024 * 1024

Input = str | bytes

# How to call a parser that does not take one text; every other parse_* gets the text as its only argument.
INPUT_KINDS = {
    "kvp.parse_kvp_pool": "bytes",  # a binary pool file (it also takes str)
    "nccl_log.parse_nccl_log_lines": "lines",  # an iterable of lines (a file object)
    "rdma.parse_rdma_port": "port-files",  # device, port and {path in the port folder: file content}
}

# The sysfs files of one RDMA port that parse_rdma_port reads, all given the same hostile content.
_PORT_FILES = ("state", "phys_state", "rate", "link_layer", "counters/symbol_error", "counters/port_rcv_data",
               "hw_counters/out_of_buffer", "gid_attrs/ndevs/0")  # fmt: skip


@dataclass(frozen=True)
class Parser:
    """One parse_* function: `name` is "module.function", `kind` a key of CALLERS."""

    name: str
    function: Callable[..., Any]
    kind: str = "text"

    def __call__(self, data: Input) -> Any:
        return CALLERS[self.kind](self.function, data)


def as_text(data: Input) -> str:
    """Bytes as a parser of text sees them after a lossless decode (undecodable bytes become surrogates)."""
    return data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")


def as_bytes(data: Input) -> bytes:
    return data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")


CALLERS: dict[str, Callable[[Callable[..., Any], Input], Any]] = {
    "text": lambda f, data: f(as_text(data)),
    "bytes": lambda f, data: f(data),  # str and bytes both: the parser takes either
    "lines": lambda f, data: f(as_text(data).splitlines(keepends=True)),
    "port-files": lambda f, data: f("mlx5_0", 1, dict.fromkeys(_PORT_FILES, as_text(data))),
}


def discover() -> list[Parser]:
    """Every parse_* function defined in a fabricase.parsers module (an alias is listed once)."""
    found: list[Parser] = []
    seen: set[int] = set()
    for info in sorted(pkgutil.iter_modules(fabricase.parsers.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"fabricase.parsers.{info.name}")
        for name, obj in sorted(vars(module).items()):
            if not name.startswith("parse_") or not inspect.isfunction(obj) or obj.__module__ != module.__name__:
                continue
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            key = f"{info.name}.{name}"
            found.append(Parser(key, obj, INPUT_KINDS.get(key, "text")))
    return found


def conforms(value: Any, hint: Any) -> bool:
    """Whether value is of the annotated return type (outer types only: list[X] checks list, not X)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arg) for arg in typing.get_args(hint))
    if hint is None or hint is type(None):
        return value is None
    if origin is not None:
        return isinstance(value, origin)
    return isinstance(value, hint)


def return_type(parser: Parser) -> Any:
    return typing.get_type_hints(parser.function).get("return", Any)


# ---------------------------------------------------------------------------------------------- time limits


class Slow(BaseException):
    """Raised inside a parser that ran past its limit (a BaseException: a parser's `except Exception` lets it
    through)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after `seconds` of wall time with Slow (SIGALRM; main thread only). The regex engine
    checks for signals, so a catastrophic regex is stopped too."""

    def expire(signum: int, frame: object) -> None:
        raise Slow(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    seconds: float
    error: BaseException | None = None  # the exception the parser raised, or Slow
    value: Any = None


def run_one(parser: Parser, data: Input, limit_s: float) -> Outcome:
    """One call, timed; an exception is returned, not raised."""
    start = time.perf_counter()
    try:
        with time_limit(limit_s):
            value = parser(data)
    except (Exception, RecursionError, Slow) as exc:
        return Outcome(time.perf_counter() - start, exc)
    return Outcome(time.perf_counter() - start, None, value)


# ---------------------------------------------------------------------------------------------- fixtures


def load_fixtures(roots: tuple[Path, ...] = FIXTURE_ROOTS) -> list[tuple[str, bytes]]:
    """(path, content) of every real capture, each distinct content once, in a stable order."""
    seen: set[bytes] = set()
    out: list[tuple[str, bytes]] = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.name == "SOURCE.txt" or path.stat().st_size > MAX_SEED_BYTES:
                continue
            data = path.read_bytes()
            if data and data not in seen:
                seen.add(data)
                out.append((str(path.relative_to(root.parent)), data))
    return out


def relevant_fixtures(parser: Parser, fixtures: list[tuple[str, bytes]], limit_s: float = 5.0) -> list[bytes]:
    """The captures a parser reads something from (its record differs from the empty input's and holds no
    parse errors); mutating these reaches deeper than mutating captures of another format."""
    empty = run_one(parser, "", limit_s)
    out = []
    for _, data in fixtures:
        result = run_one(parser, data, limit_s)
        if result.error is not None or repr(result.value) == repr(empty.value):
            continue
        if getattr(result.value, "errors", None):
            continue
        out.append(data)
    return out


# ---------------------------------------------------------------------------------------------- shapes

RUN_CHARS = (" ", "\t", "a", "0", "9", ":", "=", "-", ".", "[", "<", "\n", "|", "#", "/", "(", "{", "\r", "\x00")
PAIRS = ("a ", " a", "a:", ": ", " :", "0.", "0 ", "0:", "a\t", "a=", "[0]", "0,", "-1", "a-", "<a>", "\t ",
         " \n", ":\n", "a\n", "0\n", "x ", "GPU ", "Link ", "| ", "# ", "->", "  0", "0x", "_0", "@a")  # fmt: skip
# Openers of the formats read: a long line after one of these goes down the format's own regex path.
PREFIXES = (
    "CA 'mlx5_0'\n\tPort 1:\n\t\t", "Infiniband device 'mlx5_0' port 1 status:\n\t", "hca_id:\tmlx5_0\n\t\tport:\t1\n",
    "link mlx5_0/1 ", "1/1: mlx5_0/1: ", "GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: ", "\t Link 0: Replay Errors: ",
    "GPU 00000000:3B:00.0\n    ", "==============NVSMI LOG==============\n", "NIC statistics:\n     rx_packets: ",
    "Settings for eth0:\n\tSpeed: ", "Identifier : ", "4: eth0: <BROADCAST> mtu ", "    RX: bytes packets\n    ",
    "0000:3b:00.0 3D controller: ", "\t\tLnkSta:\tSpeed ", "[Jul 23 2024 07:53:55] [ERROR] [tid 1] ",
    "host:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 ", "host:1:2 [0] NCCL WARN NET/IB : Got completion from peer ",
    "host:1:2 [0] NCCL INFO NET/IB : Using [0]", "#  Rank  0 Group  0 Pid 1 on h device  0 [",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong\n",
    "#bytes     #iterations    BW peak[Gb/sec]\n", "                    RDMA_Write BW Test\n Device         : ",
    "Node #0   - 172.31.48.81    - ", " Nodes From\\To  0 ", "| GPU ID | ", "|-----  Deployment  ", "| ",
    "Tcp: RtoAlgorithm\nTcp: ", "Inter-|   Receive |  Transmit\n face |", "eth0: ", "NAME=", "Linux h 6.1 #1 ",
    "2026-11-29T23:00:00,123456+00:00 ", "Nov 29 23:00:00 host kernel: ", "<6>[", "6,1,2,-;", "kernel: ",
    "NVRM: Xid (PCI:0000:3b:00): ", "mlx5_core 0000:3b:00.0: ", "\tGPU0\tNIC0\tCPU Affinity\nGPU0\t",
    "prio-pfc ", "PFC configuration:\n\tpriority ", "pfcup: ", "### eth0\n", "{\"start\": {\"version\": ",
    "TOTAL_ERR_COR ", "RxErr ", "4: ACTIVE", "400 Gb/sec (", "16.0 GT/s", "./0000:00:01.0 -> ",
    "| 16GiB | ", "Domain State: ", "host:1:2 [0] NCCL WARN x ", "NCCL WARN Call to ibv_",
)  # fmt: skip
TAILS = (" ", "a", "0", "a ", ":", "a:", "\t", "-", ".")  # the first three follow every prefix
HUGE = "9" * 5000
NUMBER_TOKENS = (HUGE, "-" + HUGE, "0x" + "f" * 5000, "9" * 400 + "G", "9" * 41, "1e999", "-1e999", "nan", "inf",
                 "-inf", "NaN", "1." + "0" * 5000, "9" * 400 + ".5 GB/s", "0." + "9" * 400 + "e999")  # fmt: skip
XML_HEAD = '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<nvidia_smi_log>\n'
_LAUGHS = "".join(f'<!ENTITY l{i + 1} "' + f"&l{i};" * 10 + '">' for i in range(9))
XML_ATTACKS = {
    "xml-undefined-entity": XML_HEAD + "<gpu id=\"0\"><product_name>A &nbsp; B</product_name></gpu>"
                            "<gpu id=\"1\"><uuid>GPU-1</uuid></gpu></nvidia_smi_log>",
    "xml-entity-bomb": '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY l0 "lol">' + _LAUGHS + "]>\n"
                       "<nvidia_smi_log><gpu id=\"0\"><product_name>&l9;</product_name></gpu></nvidia_smi_log>",
    "xml-external-entity": '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM '
                           '"http://127.0.0.1:9/latest/meta-data/">]>\n<nvidia_smi_log><gpu id="0">'
                           "<product_name>&x;</product_name></gpu></nvidia_smi_log>",
    "xml-parameter-entity": '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY % p SYSTEM '
                            '"http://127.0.0.1:9/x.dtd"> %p;]>\n<nvidia_smi_log><gpu id="0"/></nvidia_smi_log>',
}  # fmt: skip


def _fill(unit: str, size: int) -> str:
    return unit * max(1, size // max(1, len(unit)))


def adversarial(size: int, seed: int = 14) -> list[tuple[str, Input]]:
    """(name, input) of every adversarial shape at about `size` characters (bytes for the non-UTF-8 ones)."""
    rng = random.Random(seed)
    shapes: list[tuple[str, Input]] = [(f"run{ord(c):02x}", _fill(c, size)) for c in RUN_CHARS]
    shapes += [(f"pair:{p!r}", _fill(p, size)) for p in PAIRS]
    shapes += [(f"line:{i}:{t!r}", p + _fill(t, size - len(p))) for i, p in enumerate(PREFIXES) for t in TAILS[:3]]
    shapes += [(f"lines:{i}", _fill(p.rstrip("\n") + " x 0\n", size)) for i, p in enumerate(PREFIXES)]
    numbers = "".join(f"{p}{n}\n" for p in PREFIXES[::5] for n in NUMBER_TOKENS)
    shapes += [("numbers", numbers), ("numbers-long", _fill(numbers, size)), ("digits", _fill("9", size))]
    depth = min(size // 8, 100_000)
    shapes += [
        ("nest-xml", XML_HEAD + '<gpu id="0">' + "<a>" * depth + "x" + "</a>" * depth + "</gpu></nvidia_smi_log>"),
        ("nest-xml-1000", XML_HEAD + '<gpu id="0">' + "<a>" * 1000 + "</a>" * 1000 + "</gpu></nvidia_smi_log>"),
        ("nest-json", '{"start": ' * depth + "1" + "}" * depth),
        ("nest-json-list", '{"intervals": ' + "[" * depth + "]" * depth + "}"),
        ("nest-brackets", "[" * depth + "]" * depth),
        ("nest-indent", "".join(" " * i + f"k{i}:\n" for i in range(int((2 * size) ** 0.5) - 8))),
    ]
    shapes += list(XML_ATTACKS.items())
    shapes += [
        ("bytes-random", rng.randbytes(size)),
        ("bytes-high", bytes(rng.randrange(0x80, 0x100) for _ in range(min(size, 200_000))) * max(1, size // 200_000)),
        (
            "text-surrogates",
            "".join(chr(rng.choice((0xD800, 0xDC80, 0xDFFF, 0xFFFE, 0x202E, 0x1B))) for _ in range(min(size, 20_000)))
            * max(1, size // 20_000),
        ),
        ("text-unicode-digits", _fill("\u0663\u0664 : \u0661\u0662\n", size)),
    ]
    return shapes


def fixture_shapes(seeds: list[bytes], size: int, cuts: int = 50) -> list[tuple[str, Input]]:
    """Each seed truncated at every 1/cuts of its length, and repeated to `size`."""
    shapes: list[tuple[str, Input]] = []
    for number, seed in enumerate(seeds):
        shapes += [(f"seed{number}-cut{k}", seed[: len(seed) * k // cuts]) for k in range(1, cuts)]
        shapes.append((f"seed{number}-repeat", seed * max(1, size // len(seed))))
    return shapes


# ---------------------------------------------------------------------------------------------- mutations

_CHARS = (":", " ", "\t", "\n", "[", "]", "<", ">", "|", "=", "-", ".", "#", "0", "9", "x", "\x00", "\r", "'", '"',
          "\\", "&", "/", "(", ")", ",", "_", "@", "%")  # fmt: skip
_TOKENS = NUMBER_TOKENS + ("N/A", "[N/A]", "Unknown!", "-1", "0x", "\x1b[31m", "\x1b]8;;x\x07", "&nbsp;", "&#0;",
                           "<a>" * 50, "]]>", "<!--", "%s", "{}", "\r\n", "\udc80", "\ud800", "\u202e", "\ufeff",
                           "GPU ", "Link ", "Port 1:", "### x\n", "{", "[0]", "::", "  ", "\n\n")  # fmt: skip


def mutate(seed: bytes, rng: random.Random) -> Input:
    """One random mutation of a real capture: characters flipped, tokens and long runs inserted, ranges deleted
    or doubled, numbers inflated, lines shuffled, cut short. Mostly text; sometimes raw bytes."""
    if len(seed) > 256 * 1024:
        start = rng.randrange(len(seed) - 256 * 1024)
        seed = seed[start : start + 256 * 1024]
    if rng.random() < 0.1:  # a byte-level mutation: non-UTF-8 in the middle of a real capture
        data = bytearray(seed)
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    text = seed.decode("utf-8", "surrogateescape")
    for _ in range(rng.randint(1, 4)):
        text = rng.choice(_OPS)(text, rng)
    return text


def _at(text: str, rng: random.Random) -> int:
    return rng.randint(0, len(text))


def _flip(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 16)):
        if chars:
            chars[rng.randrange(len(chars))] = rng.choice(_CHARS)
    return "".join(chars)


def _insert_token(text: str, rng: random.Random) -> str:
    i = _at(text, rng)
    return text[:i] + rng.choice(_TOKENS) + text[i:]


def _insert_run(text: str, rng: random.Random) -> str:
    i = _at(text, rng)
    return text[:i] + rng.choice(_CHARS) * rng.choice((100, 1000, 10_000)) + text[i:]


def _delete(text: str, rng: random.Random) -> str:
    i = _at(text, rng)
    return text[:i] + text[i + rng.randint(1, 200) :]


def _double(text: str, rng: random.Random) -> str:
    i = _at(text, rng)
    j = min(len(text), i + rng.randint(1, 500))
    return text[:j] + text[i:j] * rng.randint(1, 20) + text[j:]


def _inflate(text: str, rng: random.Random) -> str:
    token = rng.choice(NUMBER_TOKENS)
    return re.sub(r"[0-9]+", lambda m: token if rng.random() < 0.2 else m.group(), text, count=200)


def _shuffle(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    if len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def _cut(text: str, rng: random.Random) -> str:
    return text[: _at(text, rng)]


_OPS = (_flip, _flip, _insert_token, _insert_token, _insert_run, _delete, _double, _inflate, _shuffle, _cut)


def fuzz_inputs(seeds: list[bytes], others: list[bytes], count: int, rng: random.Random) -> Iterator[Input]:
    """`count` inputs: the small adversarial shapes first, then mutations (of the parser's own captures 4 times
    in 5, of any capture otherwise)."""
    small = [data for _, data in adversarial(4096, rng.randrange(1 << 30))]
    yield from small[:count]
    for _ in range(count - len(small)):
        pool = seeds if seeds and rng.random() < 0.8 else others
        yield mutate(rng.choice(pool), rng)


# ---------------------------------------------------------------------------------------------- report


@dataclass
class ParserStats:
    name: str
    inputs: int = 0
    exceptions: int = 0
    slow: int = 0
    fuzz_worst_s: float = 0.0
    worst_s: float = 0.0
    worst_shape: str = ""
    over_target: int = 0  # worst-case shapes that took TARGET_S or more
    examples: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        if len(self.examples) < 3:
            self.examples.append(what)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:60]}"


def fuzz(parser: Parser, stats: ParserStats, seeds: list[bytes], others: list[bytes], count: int, seed: int) -> None:
    rng = random.Random(f"{seed}:{parser.name}")
    for data in fuzz_inputs(seeds, others, count, rng):
        outcome = run_one(parser, data, SLOW_S * 2)
        stats.inputs += 1
        stats.fuzz_worst_s = max(stats.fuzz_worst_s, outcome.seconds)
        if isinstance(outcome.error, Slow) or outcome.seconds > SLOW_S:
            stats.slow += 1
            stats.note(f"slow {outcome.seconds:.1f} s on {len(data)} chars")
        elif outcome.error is not None:
            stats.exceptions += 1
            stats.note(_describe(outcome.error))


def worst_case(parser: Parser, stats: ParserStats, seeds: list[bytes], size: int, limit_s: float) -> None:
    shapes = adversarial(size) + [(n, d) for n, d in fixture_shapes(seeds[:3], size, cuts=2) if "repeat" in n]
    for name, data in shapes:
        outcome = run_one(parser, data, limit_s)
        if outcome.seconds > stats.worst_s:
            stats.worst_s, stats.worst_shape = outcome.seconds, name
        if outcome.seconds >= TARGET_S:
            stats.over_target += 1
        if outcome.error is not None and not isinstance(outcome.error, Slow):
            stats.exceptions += 1
            stats.note(f"{name}: {_describe(outcome.error)}")


def _table(rows: list[ParserStats]) -> str:
    """One line per parser, 79 columns: fuzz inputs, exceptions, inputs over SLOW_S, the slowest fuzz input, the
    slowest worst-case shape, how many shapes took TARGET_S or more, and which shape was slowest."""
    lines = [f"{'parser':<34}{'inputs':>7}{'exc':>5}{'>2s':>4}{'fuzz s':>7}{'worst s':>8}{'>1s':>4} {'shape':<10}"]
    for r in rows:
        worst = f"{r.worst_s:8.2f}" if r.worst_s < 99 else "   >99.0"
        lines.append(f"{r.name[:34]:<34}{r.inputs:>7}{r.exceptions:>5}{r.slow:>4}{r.fuzz_worst_s:>7.2f}{worst}"
                     f"{r.over_target:>4} {r.worst_shape[:10]:<10}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="300 inputs per parser, 100 KB shapes")
    ap.add_argument("--inputs", type=int, default=None, help="fuzzed inputs per parser (default 10000)")
    ap.add_argument("--size", type=int, default=None, help="characters per adversarial shape (default 1000000)")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--limit", type=float, default=20.0, help="seconds after which a worst-case input is stopped")
    ap.add_argument("--only", default="", help="only the parsers whose name contains this")
    ap.add_argument("--no-fuzz", action="store_true", help="the worst-case part only")
    args = ap.parse_args(argv)
    count = args.inputs if args.inputs is not None else (300 if args.quick else 10_000)
    size = args.size if args.size is not None else (100_000 if args.quick else 1_000_000)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    parsers = [p for p in discover() if args.only in p.name]
    fixtures = load_fixtures()
    others = [data for _, data in fixtures]
    print(f"{len(parsers)} parsers, {len(fixtures)} real captures, {count} fuzzed inputs each, shapes of {size} chars")
    rows = []
    started = time.perf_counter()
    for parser in parsers:
        stats = ParserStats(parser.name)
        seeds = relevant_fixtures(parser, fixtures)
        if not args.no_fuzz:
            fuzz(parser, stats, seeds, others, count, args.seed)
        worst_case(parser, stats, seeds or others[:1], size, args.limit)
        rows.append(stats)
        print(_table([stats]).splitlines()[1], flush=True)
    print()
    print(_table(rows))
    exceptions, slow = sum(r.exceptions for r in rows), sum(r.slow for r in rows)
    over = [r for r in rows if r.worst_s >= TARGET_S]
    print(f"\ninputs {sum(r.inputs for r in rows)}, exceptions {exceptions}, over {SLOW_S:g} s {slow}; "
          f"{len(over)} parsers at or over {TARGET_S:g} s on {size}-char shapes; "
          f"{time.perf_counter() - started:.0f} s in all")  # fmt: skip
    for r in rows:
        for example in r.examples:
            print(f"  {r.name}: {example}")
    return 1 if exceptions or slow else 0


if __name__ == "__main__":
    sys.exit(main())
