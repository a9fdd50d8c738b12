"""RDMA ports of one host as metric samples (docs/counters.md): sysfs and `rdma statistic show` read into port
records, and their gauges and counters (deltas and rates between snapshots 0 and 1). The rules over them are in
rdma.py, which re-exports what this module offers; split from it to keep both readable."""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict

from fabricase.analysis._items import HostItems
from fabricase.analysis.rates import RATE_SLACK, Delta, counter_delta, physical_max_rate
from fabricase.errors import CaptureError
from fabricase.models import HostCapture, MetricSample
from fabricase.parsers.ibtools import parse_rdma_statistic
from fabricase.parsers.rdma import (
    NORMALIZED,
    PMA_WIDTHS,
    RdmaPort,
    detect_vendor,
    normalize,
    parse_rdma_port,
    pick_raw,
    saturated,
)  # fmt: skip

__all__ = ["IB_ROOT", "STATISTIC", "load_ports", "rdma_samples"]

IB_ROOT = "/sys/class/infiniband/"
STATISTIC = "cmd:rdma-statistic"
# Read in snapshot 0 only; carried into snapshot 1 so both records describe the same port.
_ONCE = ("link_layer", "gid_attrs/", "gids/")


@functools.lru_cache(maxsize=1 << 16)  # every host of a fleet has the same few hundred sources
def _split(source: str) -> tuple[str, int | None, str] | None:
    """/sys/class/infiniband/<dev>/ports/<p>/<rel> -> (dev, p, rel); device attributes -> (dev, None, rel)."""
    dev, _, tail = source[len(IB_ROOT) :].partition("/")
    if not dev or not tail:
        return None
    if not tail.startswith("ports/"):
        return dev, None, tail
    number, _, rel = tail[len("ports/") :].partition("/")
    return (dev, int(number), rel) if number.isdigit() and rel else None


def _merge_statistic(rec: RdmaPort, counters: dict[str, int] | None) -> None:
    """Counters sysfs could not give (EIO, or no hw_counters folder) taken from `rdma statistic show`."""
    if not counters:
        return  # parse_rdma_port already normalized the port and named its vendor
    for name, value in counters.items():
        if name not in rec.raw:
            rec.raw[name], rec.raw_sources[name] = value, STATISTIC
    rec.normalized = normalize(rec.raw)
    rec.vendor = rec.vendor or detect_vendor(rec.device, rec.raw)


def _ib_texts(hc: HostCapture) -> dict[tuple[str, int], str]:
    """Every /sys/class/infiniband item's text by (source, snapshot), in one pass over the items."""
    out: dict[tuple[str, int], str] = {}
    for it in hc.items:
        if it.kind != "file" or not it.source.startswith(IB_ROOT) or (it.source, it.snapshot) in out:
            continue
        try:
            data = hc.read(it)
        except (OSError, ValueError) as exc:
            raise CaptureError(f"cannot read captured item {it.source}: {exc}", where=f"{hc.host}:{it.path}") from exc
        out[(it.source, it.snapshot)] = data.decode("utf-8", errors="replace")
    return out


def load_ports(hc: HostCapture) -> list[tuple[RdmaPort, RdmaPort | None]]:
    """Every RDMA port as (snapshot-0 record, snapshot-1 record or None), by device then port."""
    items = HostItems(hc)
    files: dict[int, dict[tuple[str, int], dict[str, str]]] = {0: defaultdict(dict), 1: defaultdict(dict)}
    drivers: dict[str, str] = {}
    for (source, snap), text in _ib_texts(hc).items():
        parts = _split(source)
        if parts is None or snap not in (0, 1):
            continue
        dev, number, rel = parts
        if number is not None:
            files[snap][(dev, number)][rel] = text
        elif rel == "device/uevent" and (driver := re.search(r"^DRIVER=(\S+)", text, re.M)):
            drivers[dev] = driver.group(1)
    stats = [parse_rdma_statistic(items.text(STATISTIC, snap) or "").links for snap in (0, 1)]
    out = []
    for dev, number in sorted(files[0].keys() | files[1].keys()):
        f0, f1 = files[0].get((dev, number), {}), files[1].get((dev, number))
        if f1 is not None:
            f1 = {**{k: v for k, v in f0.items() if k.startswith(_ONCE)}, **f1}
        r0 = parse_rdma_port(dev, number, f0, drivers.get(dev))
        _merge_statistic(r0, stats[0].get((dev, number)))
        r1 = None
        if f1 is not None:
            r1 = parse_rdma_port(dev, number, f1, drivers.get(dev))
            _merge_statistic(r1, stats[1].get((dev, number)))
        out.append((r0, r1))
    return out


def _delta(name: str, rel: str, v0: int | None, v1: int | None, interval: float | None,
           max_rate: float | None = None) -> Delta:
    if rel.startswith("counters/") and name in PMA_WIDTHS and v0 is not None and v1 is not None and v1 < v0:
        return Delta(None, None, "reset")  # PortCounters saturate and are cleared, never wrap
    return counter_delta(v0, v1, interval, max_rate=max_rate)


def _source(rec: RdmaPort, name: str) -> str:
    rel = rec.raw_sources.get(name, "")
    return rel if rel.startswith("cmd:") else f"{IB_ROOT}{rec.device}/ports/{rec.port}/{rel}"


def _counter(hc: HostCapture, interval: float | None, comp: str, metric: str, unit: str, name: str, scale: int,
             r0: RdmaPort, r1: RdmaPort | None) -> MetricSample:
    latest = r1 if r1 is not None and name in r1.raw else r0
    v0, v1 = r0.raw.get(name), r1.raw.get(name) if r1 is not None else None
    rel = latest.raw_sources.get(name, "")
    fastest = physical_max_rate(unit, latest.rate_gbps)  # in the sample's unit; the raw counter counts 1/scale
    d = _delta(name, rel, v0, v1, interval, fastest / scale if fastest is not None else None)
    delta, rate, note = d.delta, d.rate, d.note
    value = latest.raw.get(name)
    if rel.startswith("counters/") and saturated(name, value):
        note = "saturated"  # increments past the maximum are lost: a zero delta proves nothing
        if v0 == v1:
            delta = rate = None
    return MetricSample(
        hc.host, comp, metric, value * scale if value is not None else None, unit, _source(latest, name),
        delta * scale if delta is not None else None, rate * scale if rate is not None else None, note,
    )


def _gauges(hc: HostCapture, comp: str, rec: RdmaPort, base: str, present: set[str]) -> list[MetricSample]:
    out = []
    if "state" in present:
        out.append(MetricSample(hc.host, comp, "link.state", rec.state_code, "state", base + "state",
                                note=rec.state))
    if "phys_state" in present:
        out.append(MetricSample(hc.host, comp, "link.phys_state", rec.phys_state_code, "state",
                                base + "phys_state", note=rec.phys_state))
    if "rate" in present:
        out.append(MetricSample(hc.host, comp, "link.speed_gbps", rec.rate_gbps, "Gb/s", base + "rate"))
        out.append(MetricSample(hc.host, comp, "link.width", rec.width, "lanes", base + "rate"))
    if rec.link_layer:
        out.append(MetricSample(hc.host, comp, "link.layer", None, "layer", base + "link_layer", note=rec.link_layer))
    if rec.vendor:  # from the PCI driver, the device name or the counter names: no single item says it
        out.append(MetricSample(hc.host, comp, "port.vendor", None, "vendor", None, note=rec.vendor))
    return out


def rdma_samples(hc: HostCapture) -> list[MetricSample]:
    """Per port (`rdma:<dev>/<port>`): gauges link.state / link.phys_state (code, name in note), link.speed_gbps,
    link.width; every normalized counter present; every raw counter as `raw:<name>`. Counters carry the latest
    value, delta, rate and note ("missing", "wrap", "reset", or "saturated" for a PortCounters field at its max).
    """
    samples: list[MetricSample] = []
    interval = hc.interval_s
    for r0, r1 in load_ports(hc):
        comp = f"rdma:{r0.device}/{r0.port}"
        base = f"{IB_ROOT}{r0.device}/ports/{r0.port}/"
        latest = r1 if r1 is not None else r0
        samples.extend(_gauges(hc, comp, latest, base, latest.present))
        samples.extend(_port_counters(hc, interval, comp, base, r0, r1))
    return samples


def _port_counters(hc: HostCapture, interval: float | None, comp: str, base: str, r0: RdmaPort,
                   r1: RdmaPort | None) -> list[MetricSample]:
    """_counter for every counter of one port, with its common case inlined (both readings present, the second
    not lower, a valid interval): a fleet has hundreds of thousands of these, and the general path (wraps,
    resets, saturation, missing readings) is taken only where it applies, with the same result."""
    latest_port = r1 if r1 is not None else r0
    raw0, raw1 = r0.raw, (r1.raw if r1 is not None else None)
    valid = interval is not None and math.isfinite(interval) and interval > 0
    limits: dict[tuple[str, int], float | None] = {}
    host, out = hc.host, []
    for metric, unit, name, scale in _picks(tuple(latest_port.raw), tuple(raw0)):
        v0 = raw0.get(name)
        v1 = raw1.get(name) if raw1 is not None else None
        latest = r1 if raw1 is not None and name in raw1 else r0
        rel = latest.raw_sources.get(name, "")
        if not valid or v0 is None or v1 is None or v1 < v0 or (rel.startswith("counters/") and saturated(name, v1)):
            out.append(_counter(hc, interval, comp, metric, unit, name, scale, r0, r1))
            continue
        key = (unit, scale)
        if key not in limits:
            fastest = physical_max_rate(unit, latest.rate_gbps)
            limits[key] = _increase_limit(interval, fastest / scale if fastest is not None else None)
        limit, delta = limits[key], v1 - v0
        source = rel if rel.startswith("cmd:") else base + rel  # _source
        if limit is not None and delta > limit:  # here latest is r1 (v1 was read), as in _counter
            out.append(MetricSample(host, comp, metric, v1 * scale, unit, source, None, None, "implausible"))
        else:
            out.append(MetricSample(host, comp, metric, v1 * scale, unit, source, delta * scale,
                                    delta / interval * scale, None))  # type: ignore[operator]
    return out


def _increase_limit(interval: float, max_rate: float | None) -> float | None:
    """rates._limit: the largest increase the hardware can make in the interval, or None if unknown."""
    if max_rate is None or not math.isfinite(max_rate) or max_rate <= 0:
        return None
    return max_rate * interval * RATE_SLACK


@functools.lru_cache(maxsize=256)
def _picks(latest: tuple[str, ...], first: tuple[str, ...]) -> tuple[tuple[str, str, str, int], ...]:
    """(metric, unit, raw name, scale) for every sample of a port whose raw counters are named so: the normalized
    metrics present, then every raw counter as `raw:<name>`. Every port of a fleet has one of a few layouts."""
    latest_raw, first_raw = dict.fromkeys(latest, 0), dict.fromkeys(first, 0)
    out = []
    for metric, spec in NORMALIZED.items():
        picked = pick_raw(metric, latest_raw) or pick_raw(metric, first_raw)
        if picked:
            out.append((metric, spec.unit, picked[0], picked[1]))
    out += [(f"raw:{name}", "count", name, 1) for name in sorted({*latest, *first})]
    return tuple(out)
