"""`iperf3 -J` (and `--json-stream`) output -> one result record.

Numbers are taken only where iperf3 wrote a JSON number (booleans and strings are not numbers here); a field
it did not write stays None. iperf3's own failure ("unable to connect to server: ...") is `error`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Iperf3Interval", "Iperf3Result", "parse_iperf3"]


@dataclass(frozen=True)
class Iperf3Interval:
    start: float | None
    end: float | None
    bytes: int | None
    bits_per_second: float | None
    retransmits: int | None  # TCP sender only


@dataclass
class Iperf3Result:
    version: str | None = None
    protocol: str | None = None  # "TCP" | "UDP" | "SCTP"
    num_streams: int | None = None
    duration_s: float | None = None
    reverse: bool | None = None
    server: str | None = None  # the host the client connected to
    connected: list[dict[str, Any]] = field(default_factory=list)  # local/remote host and port per stream
    tcp_mss: int | None = None
    intervals: list[Iperf3Interval] = field(default_factory=list)
    sent_bps: float | None = None
    received_bps: float | None = None
    sent_bytes: int | None = None
    received_bytes: int | None = None
    retransmits: int | None = None
    cpu_host_pct: float | None = None
    cpu_remote_pct: float | None = None
    udp_jitter_ms: float | None = None
    udp_lost_percent: float | None = None
    error: str | None = None  # iperf3's own error message
    errors: list[str] = field(default_factory=list)  # parse problems

    @property
    def ok(self) -> bool:
        return self.error is None and not self.errors and (self.received_bps is not None or self.sent_bps is not None)


def _num(obj: Any, key: str) -> float | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _int(obj: Any, key: str) -> int | None:
    """A JSON integer within a signed or unsigned 64-bit counter's range (iperf3 writes no other)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value if -(2**63) <= value < 2**64 else None


def _str(obj: Any, key: str) -> str | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def _dict(obj: Any, key: str) -> dict[str, Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _documents(text: str) -> tuple[list[Any], str | None]:
    """Every JSON value in the text (one for -J, one per line for --json-stream), skipping leading noise."""
    decoder = json.JSONDecoder()
    docs: list[Any] = []
    position = text.find("{")
    problem = None
    while 0 <= position < len(text):
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError) as exc:
            problem = f"parse: not valid JSON at character {position}: {str(exc)[:100]}"
            break
        docs.append(value)
        position = text.find("{", end)
    return docs, problem


def _from_stream(docs: list[Any]) -> dict[str, Any]:
    """Rebuild the -J document from --json-stream events ({"event": "start"|"interval"|"end"|"error", "data"})."""
    merged: dict[str, Any] = {"intervals": []}
    for doc in docs:
        event, data = _str(doc, "event"), doc.get("data") if isinstance(doc, dict) else None
        if event == "interval":
            merged["intervals"].append(data)
        elif event in ("start", "end"):
            merged[event] = data
        elif event == "error":
            merged["error"] = data
    return merged


def _interval(item: Any) -> Iperf3Interval:
    total = _dict(item, "sum")
    return Iperf3Interval(_num(total, "start"), _num(total, "end"), _int(total, "bytes"),
                          _num(total, "bits_per_second"), _int(total, "retransmits"))  # fmt: skip


def _apply_start(result: Iperf3Result, start: dict[str, Any]) -> None:
    result.version = _str(start, "version")
    test = _dict(start, "test_start")
    result.protocol = _str(test, "protocol")
    result.num_streams = _int(test, "num_streams")
    result.duration_s = _num(test, "duration")
    reverse = _int(test, "reverse")
    result.reverse = None if reverse is None else bool(reverse)
    result.server = _str(_dict(start, "connecting_to"), "host")
    mss = _int(start, "tcp_mss_default")
    result.tcp_mss = mss if mss is not None else _int(start, "tcp_mss")
    connected = start.get("connected")
    keys = ("local_host", "local_port", "remote_host", "remote_port")
    for peer in connected if isinstance(connected, list) else []:
        if isinstance(peer, dict):
            fields = {k: peer[k] for k in keys if isinstance(peer.get(k), str | int) and not isinstance(peer[k], bool)}
            result.connected.append(fields)


def _apply_end(result: Iperf3Result, end: dict[str, Any]) -> None:
    sent, received = _dict(end, "sum_sent"), _dict(end, "sum_received")
    udp = _dict(end, "sum")
    result.sent_bps = _num(sent, "bits_per_second") if sent else _num(udp, "bits_per_second")
    result.received_bps = _num(received, "bits_per_second")
    result.sent_bytes = _int(sent, "bytes") if sent else _int(udp, "bytes")
    result.received_bytes = _int(received, "bytes")
    result.retransmits = _int(sent, "retransmits")
    cpu = _dict(end, "cpu_utilization_percent")
    result.cpu_host_pct, result.cpu_remote_pct = _num(cpu, "host_total"), _num(cpu, "remote_total")
    result.udp_jitter_ms, result.udp_lost_percent = _num(udp, "jitter_ms"), _num(udp, "lost_percent")


def parse_iperf3(text: str | None) -> Iperf3Result:
    """The connection, per-interval rates and end totals of iperf3 JSON output; never raises."""
    result = Iperf3Result()
    docs, problem = _documents(text or "")
    if problem:
        result.errors.append(problem)
    if not docs:
        if (text or "").strip() and not problem:
            result.errors.append("parse: no JSON object found")
        return result
    doc = _from_stream(docs) if _str(docs[0], "event") else docs[0]
    if not isinstance(doc, dict):
        result.errors.append("parse: the JSON document is not an object")
        return result
    _apply_start(result, _dict(doc, "start"))
    intervals = doc.get("intervals")
    result.intervals = [_interval(i) for i in intervals] if isinstance(intervals, list) else []
    _apply_end(result, _dict(doc, "end"))
    result.error = _str(doc, "error")
    return result
