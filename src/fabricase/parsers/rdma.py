"""RDMA ports from sysfs, one schema across NIC vendors.

`/sys/class/infiniband/<dev>/ports/<port>/` holds `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `rate`
("400 Gb/sec (4X NDR)"), `link_layer`, the IB PortCounters in `counters/` (PMA; fixed widths, saturating),
`counters_ext/` (mlx4's 64-bit PortCountersExtended) and driver counters in `hw_counters/`. A port is parsed into
an RdmaPort whose `raw` keeps every vendor counter and whose `normalized` maps the documented metric names
(docs/counters.md) to values. Missing or unreadable is absent, never 0.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from fabricase.parsers.numbers import MAX_DIGITS, to_float, to_int

__all__ = [
    "COUNTER_DIRS", "NORMALIZED", "PHYS_STATES", "PMA_WIDTHS", "PORT_STATES", "CounterPlan", "Link", "Metric",
    "RdmaPort", "counter_plan", "detect_vendor", "link_fields", "normalize", "parse_counter", "parse_phys_state",
    "parse_port_state", "parse_rate", "parse_rdma_port", "pick_raw", "plain_counters", "saturated",
]  # fmt: skip

COUNTER_DIRS = ("counters", "counters_ext", "hw_counters")

# IBTA PortState and PortPhysicalState codes, by canonical name (ibv_devinfo's words without the PORT_ prefix).
PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATES = {
    1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION_TRAINING", 5: "LINK_UP",
    6: "LINK_ERROR_RECOVERY", 7: "PHY_TEST",
}  # fmt: skip
# Other spellings seen in sysfs, ibstat, ibstatus, ibv_devinfo and `rdma link`, folded (lowercase, no _ - space).
_STATE_ALIASES = {"initializing": "INIT", "initialize": "INIT", "activedefer": "ACTIVE_DEFER"}
_PHYS_ALIASES = {"linkup": "LINK_UP", "portconfigurationtraining": "PORT_CONFIGURATION_TRAINING",
                 "linkerrorrecovery": "LINK_ERROR_RECOVERY", "phytest": "PHY_TEST"}

# Widths of the PortCounters attribute fields as the kernel prints them (drivers/infiniband/core/sysfs.c
# PORT_PMA_ATTR). These counters stop at their maximum instead of wrapping; the data/packet ones are 64-bit on
# devices with extended counters, so a value of 2**32-1 there is only "probably" saturated.
PMA_WIDTHS = {
    "symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16, "port_xmit_data": 32, "port_rcv_data": 32,
    "port_xmit_packets": 32, "port_rcv_packets": 32, "port_xmit_wait": 32,
}  # fmt: skip

# Not counters: hw_counters/lifespan is the refresh period in ms.
_NOT_COUNTERS = frozenset({"lifespan"})


@dataclass(frozen=True)
class Metric:
    """A normalized metric: unit, and the raw names that feed it in order of preference with their scale."""

    unit: str
    sources: tuple[tuple[str, int], ...]
    meaning: str


def _m(unit: str, meaning: str, *names: str, scale: int = 1) -> Metric:
    return Metric(unit, tuple((n, scale) for n in names), meaning)


# The first raw counter present wins. Heuristic vendor equivalences (telemetry.md (b)) are left out on purpose:
# they stay raw-only. port_*_data count 4-octet words, hence the scale of 4.
NORMALIZED: dict[str, Metric] = {
    "link.down_events": _m("events", "link training failed recovery and downed the link", "link_downed"),
    "link.error_recovery": _m("events", "successful link error recoveries (retrains)", "link_error_recovery"),
    "link.integrity_errors": _m("events", "local physical errors over the LocalPhyErrors threshold",
                                "local_link_integrity_errors"),
    "phy.symbol_errors_uncorrected": _m("errors", "minor link errors on one or more lanes", "symbol_error"),
    "rx.errors": _m("packets", "received packets with errors (CRC, length)", "port_rcv_errors"),
    "rx.remote_physical_errors": _m("packets", "received packets marked bad upstream (EBP)",
                                    "port_rcv_remote_physical_errors"),
    "rx.switch_relay_errors": _m("packets", "packets the switch relay could not forward",
                                 "port_rcv_switch_relay_errors"),
    "rx.constraint_errors": _m("packets", "inbound packets dropped by partition/raw filters",
                               "port_rcv_constraint_errors"),
    "tx.constraint_errors": _m("packets", "outbound packets dropped by partition/raw filters",
                               "port_xmit_constraint_errors"),
    "rx.buffer_overrun": _m("events", "input buffer overruns", "excessive_buffer_overrun_errors"),
    "rx.vl15_dropped": _m("packets", "subnet management packets dropped", "VL15_dropped"),
    "rx.discards_nobuf_port": _m("packets", "packets dropped by the port for lack of buffer", "rx_drops"),
    "tx.discards": _m("packets", "outbound packets discarded (port down or congested)", "port_xmit_discards"),
    "cong.xmit_wait_ticks": _m("ticks", "ticks with data to send but no credits", "port_xmit_wait"),
    "tx.bytes": Metric("bytes", (("port_xmit_data_64", 4), ("port_xmit_data", 4), ("tx_bytes", 1)),
                       "bytes sent"),
    "rx.bytes": Metric("bytes", (("port_rcv_data_64", 4), ("port_rcv_data", 4), ("rx_bytes", 1)),
                       "bytes received"),
    "tx.packets": _m("packets", "packets sent", "port_xmit_packets_64", "port_xmit_packets", "tx_pkts"),
    "rx.packets": _m("packets", "packets received", "port_rcv_packets_64", "port_rcv_packets", "rx_pkts"),
    "rdma.out_of_buffer": _m("packets", "packets dropped: no receive WQE posted", "out_of_buffer",
                             "rx_out_of_buffer"),
    "rdma.out_of_sequence": _m("packets", "packets received out of sequence (PSN gap)", "out_of_sequence",
                               "RXOOOPKTS"),
    "rdma.seq_err_nak": _m("events", "sequence-error NAKs received by the requester", "packet_seq_err",
                           "seq_err_naks_rcvd", "NAKSEQERR"),
    "rdma.implied_nak_seq_err": _m("events", "implied NAK sequence errors", "implied_nak_seq_err",
                                   "NAKSEQERR_IMPLIED"),
    "rdma.ack_timeout": _m("events", "requester ACK timeouts (retransmission timer expired)",
                           "local_ack_timeout_err", "retrans_timeout_events", "to_retransmits", "RTO"),
    "rdma.rnr_retry_exceeded": _m("events", "RNR NAK retry limit exhausted (QP to error)", "rnr_nak_retry_err",
                                  "req_rnr_retries_exceeded"),
    "rdma.rnr_naks_received": _m("events", "RNR NAKs received", "rnr_naks_rcvd", "RNR_RCVD"),
    "rdma.transport_retries_exceeded": _m("events", "transport retry limit exhausted (QP to error)",
                                          "req_transport_retries_exceeded", "max_retry_exceeded"),
    "rdma.retransmits": _m("packets", "retransmitted packets or adaptive retransmissions", "retrans_pkts",
                           "roce_adp_retrans", "RetransSegs"),
    "rdma.duplicate_requests": _m("packets", "duplicate requests seen by the responder", "duplicate_request",
                                  "dup_req"),
    "rdma.remote_unreachable": _m("events", "remote never or no longer responsive (EFA)",
                                  "unresponsive_remote_events"),
    "rdma.remote_impaired": _m("events", "connections to an impaired remote (EFA)", "impaired_remote_conn_events"),
    "rdma.slow_restart": _m("events", "RoCE slow-restart events", "roce_slow_restart"),
    "rdma.req_cqe_errors": _m("events", "requester completions with error", "req_cqe_error"),
    "rdma.resp_cqe_errors": _m("events", "responder completions with error", "resp_cqe_error"),
    "rdma.icrc_errors": _m("packets", "packets with ICRC errors", "rx_icrc_encapsulated", "ICRCERR"),
    "cnp.sent": _m("packets", "CNPs sent (this port saw ECN-marked packets)", "np_cnp_sent", "cc_tx_cnp_pkts",
                   "tx_cnp_pkts", "np_cnp_pkts", "cnpSent"),
    "cnp.handled": _m("packets", "CNPs received and acted on (this port was told to slow down)", "rp_cnp_handled",
                      "cc_rx_cnp_pkts", "rx_cnp_pkts", "cnpHandled"),
    "cnp.ignored": _m("packets", "CNPs received and ignored", "rp_cnp_ignored", "cnpIgnored"),
    "ecn.rx_marked": _m("packets", "RoCE packets received with ECN CE", "np_ecn_marked_roce_packets",
                        "cc_rx_ce_pkts", "rx_ecn_marked_pkts", "RxECNMrkd"),
}

# Device names given by the kernel drivers, then counter names only one vendor uses (renamed devices:
# rocep8s0f0, ibp12s0, rdmap16s27 keep no driver prefix).
_NAME_PREFIXES = (
    ("mlx5_", "mlx5"), ("mlx4_", "mlx4"), ("efa_", "efa"), ("bnxt_re", "bnxt_re"), ("irdma", "irdma"),
    ("hfi1_", "hfi1"), ("i40iw", "i40iw"), ("qedr", "qedr"), ("rxe", "rxe"), ("siw", "siw"), ("mana_", "mana"),
)  # fmt: skip
_DRIVERS = {"mlx5_core": "mlx5", "mlx4_core": "mlx4", "efa": "efa", "bnxt_en": "bnxt_re", "ice": "irdma",
            "i40e": "i40iw", "hfi1": "hfi1", "qede": "qedr", "mana": "mana"}
_SIGNATURES = (
    ("mlx5", ("np_cnp_sent", "roce_adp_retrans", "rx_dct_connect", "implied_nak_seq_err", "out_of_sequence")),
    ("efa", ("keep_alive_rcvd", "submitted_cmds", "retrans_timeout_events", "unresponsive_remote_events")),
    ("bnxt_re", ("to_retransmits", "seq_err_naks_rcvd", "rx_roce_discards", "oos_drop_count", "active_ahs")),
    ("irdma", ("cnpSent", "RetransSegs", "InOptErrors", "RxECNMrkd", "NAKSEQERR")),
)
# The lookbehind starts a number only where a digit run starts: without it, a long run of digits is tried from
# every position (quadratic). Bounded digits: a rate is a few digits, and int()/float() of thousands raise or
# overflow.
_RATE = re.compile(
    r"(?<![0-9])([0-9]{1,12}(?:\.[0-9]{1,12})?)\s*Gb/sec(?:\s*\(\s*([0-9]{1,3})X(?:\s+([A-Za-z]+))?\s*\))?", re.ASCII
)


@dataclass
class RdmaPort:
    """One RDMA port. state / phys_state are canonical names (ACTIVE, LINK_UP, POLLING, ...), with the codes.

    raw: every readable counter by its vendor name; raw_sources: where each came from, relative to the port
    folder ("hw_counters/out_of_buffer"). normalized: documented metric -> value (bytes already multiplied).
    saturated: raw names stuck at their PortCounters maximum. errors: what could not be parsed.
    """

    device: str
    port: int
    vendor: str | None = None
    link_layer: str | None = None
    state: str | None = None
    state_code: int | None = None
    phys_state: str | None = None
    phys_state_code: int | None = None
    rate_gbps: float | None = None
    width: int | None = None  # lanes: 4 for "4X"
    speed: str | None = None  # IB speed name: "NDR", "HDR", ...
    rate_text: str | None = None
    netdev: str | None = None
    raw: dict[str, int] = field(default_factory=dict)
    raw_sources: dict[str, str] = field(default_factory=dict)
    normalized: dict[str, int] = field(default_factory=dict)
    saturated: list[str] = field(default_factory=list)
    present: set[str] = field(default_factory=set)  # which of state, phys_state, rate, link_layer were read
    errors: list[str] = field(default_factory=list)



_R = TypeVar("_R")
_MEMO_CHARS = 64  # a state or rate file is a few words; longer texts (fuzzed, garbage) are parsed, not kept


def _memo_short(parse: Callable[[str | None], _R]) -> Callable[[str | None], _R]:
    """Memoize a pure parser of short texts: every port of a fleet reads one of a few state and rate lines, and
    the parse is the same each time. Results are tuples, so sharing them is safe."""
    cached = functools.lru_cache(maxsize=4096)(parse)

    @functools.wraps(parse)
    def memo(text: str | None) -> _R:
        return cached(text) if text is None or len(text) <= _MEMO_CHARS else parse(text)

    return memo


def _fold(word: str) -> str:
    return re.sub(r"[\s_\-]", "", word).lower()


def _coded(text: str | None) -> tuple[int | None, str | None]:
    """("4: ACTIVE") or ("PORT_ACTIVE (4)") or ("Active") -> (code or None, word or None).

    String operations, not a regex: a lazy group before a whitespace run (`(.*?)\\s*$`) is quadratic in the run."""
    if text is None or not text.strip():
        return None, None
    value = text.strip()
    head, colon, tail = value.partition(":")
    if colon and (code := to_int(head.strip())) is not None:
        return code, tail.strip() or None
    if value.endswith(")") and (opening := value.rfind("(")) >= 0:
        code = to_int(value[opening + 1 : -1].strip())
        if code is not None:
            return code, value[:opening].strip() or None
    return None, value


def _canonical(code: int | None, word: str | None, table: dict[int, str], aliases: dict[str, str],
               prefix: str = "") -> tuple[int | None, str | None]:
    name = None
    if word:
        folded = _fold(word.removeprefix(prefix) if word.upper().startswith(prefix) else word)
        name = aliases.get(folded) or next((v for v in table.values() if _fold(v) == folded), None)
    if name is None and code is not None:
        name = table.get(code)
    if code is None and name is not None:
        code = next(k for k, v in table.items() if v == name)
    return code, name


@_memo_short
def parse_port_state(text: str | None) -> tuple[int | None, str | None]:
    """Port state as (code, canonical name): "4: ACTIVE", "PORT_ACTIVE (4)", "Active" -> (4, "ACTIVE")."""
    code, word = _coded(text)
    return _canonical(code, word, PORT_STATES, _STATE_ALIASES, prefix="PORT_")


@_memo_short
def parse_phys_state(text: str | None) -> tuple[int | None, str | None]:
    """Physical state: "5: LinkUp", "LINK_UP (5)", "Polling" -> (5, "LINK_UP"); "0: <unknown>" -> (0, None)."""
    code, word = _coded(text)
    return _canonical(code, word, PHYS_STATES, _PHYS_ALIASES)


@_memo_short
def parse_rate(text: str | None) -> tuple[float | None, int | None, str | None]:
    """"400 Gb/sec (4X NDR)" -> (400.0, 4, "NDR"); "10 Gb/sec (4X)" -> (10.0, 4, None); else Nones."""
    m = _RATE.search(text or "")
    rate = to_float(m.group(1)) if m else None
    if m is None or rate is None:
        return None, None, None
    return rate, int(m.group(2)) if m.group(2) else None, m.group(3) or None


class Link(NamedTuple):
    """What a port's state, phys_state, rate and link_layer files say: RdmaPort's fields of the same names."""

    link_layer: str | None
    state_code: int | None
    state: str | None
    phys_state_code: int | None
    phys_state: str | None
    rate_text: str | None
    rate_gbps: float | None
    width: int | None
    speed: str | None
    errors: tuple[str, ...]


def _link(state: str | None, phys_state: str | None, rate: str | None, link_layer: str | None) -> Link:
    state_code, state_name = parse_port_state(state)
    phys_code, phys_name = parse_phys_state(phys_state)
    rate_text = (rate or "").strip() or None
    rate_gbps, width, speed = parse_rate(rate_text)
    errors = []
    if rate_text and rate_gbps is None:
        errors.append(f"rate: not understood: {rate_text[:40]!r}")
    for key, text, code, name in (("state", state, state_code, state_name), ("phys_state", phys_state, phys_code,
                                                                              phys_name)):
        stripped = (text or "").strip()
        if stripped and code is None and name is None:
            errors.append(f"{key}: not understood: {stripped[:40]!r}")
    return Link((link_layer or "").strip() or None, state_code, state_name, phys_code, phys_name, rate_text,
                rate_gbps, width, speed, tuple(errors))


_cached_link = functools.lru_cache(maxsize=4096)(_link)


def link_fields(state: str | None, phys_state: str | None, rate: str | None, link_layer: str | None) -> Link:
    """A port's link files (None: not read): every port of a fleet has one of a few, so short ones are parsed
    once (a Link is a tuple: sharing it is safe); long texts (fuzzed, garbage) are parsed, not kept."""
    if len(state or "") + len(phys_state or "") + len(rate or "") + len(link_layer or "") <= 4 * _MEMO_CHARS:
        return _cached_link(state, phys_state, rate, link_layer)
    return _link(state, phys_state, rate, link_layer)


def parse_counter(text: str | None) -> int | None:
    """A counter file's value; None when empty, unreadable, "N/A (no PMA)" or longer than MAX_DIGITS digits."""
    return to_int((text or "").strip())


def detect_vendor(device: str, counter_names: Iterable[str] = (), driver: str | None = None) -> str | None:
    """mlx5, mlx4, efa, bnxt_re, irdma, hfi1, ... from the PCI driver, the device name or the counter names."""
    if driver and driver in _DRIVERS:
        return _DRIVERS[driver]
    for prefix, vendor in _NAME_PREFIXES:
        if device.startswith(prefix):
            return vendor
    names = set(counter_names)
    for vendor, signature in _SIGNATURES:
        if names.intersection(signature):
            return vendor
    return "efa" if device.startswith("rdmap") else None


def pick_raw(metric: str, raw: Mapping[str, int]) -> tuple[str, int] | None:
    """The raw counter feeding `metric` in this port and its scale, or None when the port has none."""
    return next(((name, scale) for name, scale in NORMALIZED[metric].sources if name in raw), None)


_SOURCES = tuple((metric, tuple(spec.sources)) for metric, spec in NORMALIZED.items())


def normalize(raw: Mapping[str, int]) -> dict[str, int]:
    """Normalized metric -> value for the raw counters present (the first source in NORMALIZED's order wins)."""
    if isinstance(raw, dict) and None not in raw.values():
        # Which source wins depends only on the names present, and every port of a fleet has one of a few
        # layouts: the choice is made once per layout (_layout_picks), then read off.
        return {metric: raw[name] * scale for metric, name, scale in _layout_picks(tuple(raw))}
    out = {}
    get = raw.get
    for metric, sources in _SOURCES:  # hot: every port of every host of a fleet, twice
        for name, scale in sources:
            value = get(name)
            if value is not None:
                out[metric] = value * scale
                break
    return out


@functools.lru_cache(maxsize=256)
def _layout_picks(names: tuple[str, ...]) -> tuple[tuple[str, str, int], ...]:
    """(metric, raw name, scale) that normalize picks for a port whose raw counters have these names."""
    present = frozenset(names)
    return tuple(next(((metric, name, scale) for name, scale in sources if name in present))
                 for metric, sources in _SOURCES if any(name in present for name, _ in sources))


def saturated(name: str, value: int | None) -> bool:
    """True when a PortCounters field reads its maximum (it stops there: increments are no longer seen)."""
    width = PMA_WIDTHS.get(name)
    return width is not None and value == (1 << width) - 1


@functools.lru_cache(maxsize=1 << 14)  # a fleet's ports have the same few hundred file names
def _counter_file(rel: str) -> tuple[str, str] | None:
    """(folder, counter name) of a counter file's path relative to its port, else None."""
    folder, _, name = rel.partition("/")
    if not name or folder not in COUNTER_DIRS or "/" in name or name in _NOT_COUNTERS:
        return None
    return folder, name


@dataclass(frozen=True)
class CounterPlan:
    """How the counter files of a port laid out so are read: computed once per layout (a fleet has a few), and
    shared (callers must not change it)."""

    rels: tuple[str, ...]  # counter files, sorted: the order raw keeps
    names: tuple[str, ...]  # their counter names
    distinct: bool  # no name twice (counters/x beside hw_counters/x): then every key is the bare name
    sources: dict[str, str]  # name -> rel; copied into each port (callers add to it)
    tops: tuple[tuple[int, str, int], ...]  # (index, name, maximum) of the PortCounters fields that saturate


def _make_counter_plan(rels: tuple[str, ...]) -> CounterPlan:
    picked = []
    for rel in sorted(rels):
        parts = _counter_file(rel) if len(rel) <= 200 else _counter_file.__wrapped__(rel)
        if parts is not None:
            picked.append((rel, *parts))
    names = tuple(name for _, _, name in picked)
    tops = tuple((i, name, (1 << PMA_WIDTHS[name]) - 1) for i, (_, folder, name) in enumerate(picked)
                 if folder == "counters" and name in PMA_WIDTHS)
    return CounterPlan(tuple(rel for rel, _, _ in picked), names, len(set(names)) == len(names),
                 {name: rel for rel, _, name in picked}, tops)


_cached_counter_plan = functools.lru_cache(maxsize=256)(_make_counter_plan)
_PLAN_FILES = 1024  # a real port has ~60 files; a longer layout (fuzzed) is planned but not kept in the cache


def counter_plan(rels: tuple[str, ...]) -> CounterPlan:
    """The plan of a port whose files (relative to the port folder) are `rels`."""
    return _cached_counter_plan(rels) if len(rels) <= _PLAN_FILES else _make_counter_plan(rels)


# Every counter text of a port, joined by NUL: each a plain run of digits and at most one newline. The common
# case, read with one match and int() on each text; anything else takes the per-file path.
_PLAIN = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}\n?(?:\x00[0-9]{{1,{MAX_DIGITS}}}\n?)*")


def plain_counters(texts: list[str | None]) -> list[int] | None:
    """int() of every text when all are plain counter values (parse_counter reads them alike), else None: one
    match over them all, not a Python step per text."""
    try:
        joined = "\x00".join(texts)  # type: ignore[arg-type]  # None (not read): TypeError, the per-file path
    except TypeError:
        return None
    if joined.count("\x00") != len(texts) - 1 or _PLAIN.fullmatch(joined) is None:
        return None  # a NUL inside a text would split it in two
    return list(map(int, texts))  # type: ignore[arg-type]


def _counters(files: Mapping[str, str | None], port: RdmaPort) -> None:
    plan = counter_plan(tuple(files))
    if plan.distinct and plan.rels:
        values = plain_counters(list(map(files.__getitem__, plan.rels)))
        if values is not None:
            port.raw = dict(zip(plan.names, values, strict=True))
            port.raw_sources = dict(plan.sources)
            port.saturated = [name for i, name, top in plan.tops if values[i] == top]  # saturated(), inlined
            return
    _each_counter(files, plan, port)


def _each_counter(files: Mapping[str, str | None], plan: CounterPlan, port: RdmaPort) -> None:
    """The general path: a file not read, unreadable, or not a counter value, or a name in two folders."""
    for rel, name in zip(plan.rels, plan.names, strict=True):
        text = files[rel]
        token = text.strip() if text else ""
        # parse_counter, inlined
        value = int(token) if 0 < len(token) <= MAX_DIGITS and token.isascii() and token.isdigit() else None
        if value is None:
            # Empty: the read failed (EIO on some hw_counters). "N/A (no PMA)": the device has no PMA.
            if token and not token.startswith("N/A"):
                port.errors.append(f"{rel}: not a counter value: {token[:40]!r}")
            continue
        key = name if name not in port.raw else rel
        port.raw[key] = value
        port.raw_sources[key] = rel
        if rel.startswith("counters/") and (width := PMA_WIDTHS.get(name)) is not None and value == (1 << width) - 1:
            port.saturated.append(key)  # saturated(), inlined


_NDEVS = tuple(f"gid_attrs/ndevs/{i}" for i in range(4))
_LINK_FILES = ("state", "phys_state", "rate", "link_layer")


def parse_rdma_port(device: str, port: int, files: Mapping[str, str | None], driver: str | None = None) -> RdmaPort:
    """One port from its sysfs files, keyed by path relative to the port folder ("state", "counters/x", ...).

    A value of None (or an empty string) is a file that was not read or could not be read.
    """
    get = files.get
    link = link_fields(get("state"), get("phys_state"), get("rate"), get("link_layer"))
    rec = RdmaPort(
        device=device, port=port, link_layer=link.link_layer, state=link.state, state_code=link.state_code,
        phys_state=link.phys_state, phys_state_code=link.phys_state_code, rate_gbps=link.rate_gbps,
        width=link.width, speed=link.speed, rate_text=link.rate_text, errors=list(link.errors),
        present={k for k in _LINK_FILES if get(k) is not None},
    )
    ndevs = [(files.get(rel) or "").strip() for rel in _NDEVS]
    rec.netdev = next((n for n in ndevs if n and "/" not in n and " " not in n), None)
    _counters(files, rec)
    rec.vendor = detect_vendor(device, rec.raw, driver)
    rec.normalized = normalize(rec.raw)
    return rec
