"""RDMA ports of one host as metric samples (docs/counters.md): sysfs and `rdma statistic show` read into port
records, and their gauges and counters (deltas and rates between snapshots 0 and 1). The rules over them are in
rdma.py, which re-exports what this module offers; split from it to keep both readable."""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
from collections import defaultdict
from typing import NamedTuple

from fabricase.analysis._items import HostItems
from fabricase.analysis.rates import RATE_SLACK, Delta, counter_delta, physical_max_rate
from fabricase.errors import CaptureError
from fabricase.models import HostCapture, MetricSample
from fabricase.parsers.ibtools import parse_rdma_statistic
from fabricase.parsers.rdma import (
    NORMALIZED,
    PMA_WIDTHS,
    Link,
    RdmaPort,
    counter_plan,
    detect_vendor,
    link_fields,
    normalize,
    parse_rdma_port,
    pick_raw,
    plain_counters,
    saturated,
)  # fmt: skip

__all__ = ["IB_ROOT", "STATISTIC", "load_ports", "rdma_samples"]

IB_ROOT = "/sys/class/infiniband/"
STATISTIC = "cmd:rdma-statistic"
# Read in snapshot 0 only; carried into snapshot 1 so both records describe the same port.
_ONCE = ("link_layer", "gid_attrs/", "gids/")
_LINK_FILES = ("state", "phys_state", "rate", "link_layer")  # the gauges' files, in this order


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
    """Every /sys/class/infiniband item's text by (source, snapshot), read in one pass (HostCapture.texts)."""
    try:
        return hc.texts(IB_ROOT)
    except (OSError, ValueError):
        return _each_ib_text(hc)  # read again item by item, to name the item at fault


def _each_ib_text(hc: HostCapture) -> dict[tuple[str, int], str]:
    """_ib_texts one item at a time: a failed read raises CaptureError naming its item."""
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


class _PortPlan(NamedTuple):
    """One port's files: relative paths, and the positions of their texts among the host's items, by snapshot.
    Snapshot 1 also holds the _ONCE files of snapshot 0 (first, as read there) that it does not have itself."""

    device: str
    port: int
    rels0: tuple[str, ...]
    at0: tuple[int, ...]
    rels1: tuple[str, ...] | None  # None: the port is not in snapshot 1
    at1: tuple[int, ...] | None


class _HostPlan(NamedTuple):
    ports: tuple[_PortPlan, ...]  # by device, then port
    uevents: tuple[tuple[str, int], ...]  # (device, position) of each device/uevent text, in item order


def _make_host_plan(keys: tuple[tuple[str, int], ...]) -> _HostPlan:
    """Which text goes to which port file: the same for every host whose items are laid out alike."""
    files: dict[int, dict[tuple[str, int], dict[str, int]]] = {0: defaultdict(dict), 1: defaultdict(dict)}
    uevents = []
    for at, (source, snap) in enumerate(keys):
        parts = _split(source)
        if parts is None or snap not in (0, 1):
            continue
        dev, number, rel = parts
        if number is not None:
            files[snap][(dev, number)][rel] = at
        elif rel == "device/uevent":
            uevents.append((dev, at))
    ports = []
    for dev, number in sorted(files[0].keys() | files[1].keys()):
        f0, f1 = files[0].get((dev, number), {}), files[1].get((dev, number))
        if f1 is not None:
            f1 = {**{k: v for k, v in f0.items() if k.startswith(_ONCE)}, **f1}
        ports.append(_PortPlan(dev, number, tuple(f0), tuple(f0.values()), None if f1 is None else tuple(f1),
                               None if f1 is None else tuple(f1.values())))
    return _HostPlan(tuple(ports), tuple(uevents))


_cached_host_plan = functools.lru_cache(maxsize=64)(_make_host_plan)
_PLAN_ITEMS = 1 << 14  # a host has a few hundred RDMA items; a longer (fuzzed) layout is planned, not kept


def _host_plan(keys: tuple[tuple[str, int], ...]) -> _HostPlan:
    return _cached_host_plan(keys) if len(keys) <= _PLAN_ITEMS else _make_host_plan(keys)


_DRIVER = re.compile(r"^DRIVER=(\S+)", re.M)


def _statistic(items: HostItems, snap: int) -> dict[tuple[str, int], dict[str, int]]:
    text = items.text(STATISTIC, snap)
    return parse_rdma_statistic(text).links if text else {}  # most hosts have none: nothing to parse


def _drivers(uevents: tuple[tuple[str, int], ...], values: list[str]) -> dict[str, str]:
    """Each device's PCI driver, from its device/uevent (the last one that names it)."""
    drivers: dict[str, str] = {}
    for dev, at in uevents:
        if driver := _DRIVER.search(values[at]):
            drivers[dev] = driver.group(1)
    return drivers


def load_ports(hc: HostCapture) -> list[tuple[RdmaPort, RdmaPort | None]]:
    """Every RDMA port as (snapshot-0 record, snapshot-1 record or None), by device then port."""
    return _load_ports(hc, _ib_texts(hc))


def _load_ports(hc: HostCapture, texts: dict[tuple[str, int], str]) -> list[tuple[RdmaPort, RdmaPort | None]]:
    plan = _host_plan(tuple(texts))
    values = list(texts.values())
    drivers = _drivers(plan.uevents, values)
    items = HostItems(hc)
    stats = [_statistic(items, 0), _statistic(items, 1)]
    text_at = values.__getitem__
    out = []
    for port in plan.ports:
        dev, number, driver = port.device, port.port, drivers.get(port.device)
        r0 = parse_rdma_port(dev, number, dict(zip(port.rels0, map(text_at, port.at0), strict=True)), driver)
        _merge_statistic(r0, stats[0].get((dev, number)))
        r1 = None
        if port.rels1 is not None and port.at1 is not None:
            f1 = dict(zip(port.rels1, map(text_at, port.at1), strict=True))
            r1 = parse_rdma_port(dev, number, f1, driver)
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
    return _counter_sample(hc.host, interval, comp, metric, unit, name, scale, (v0, v1, latest.raw.get(name)),
                           latest.raw_sources.get(name, ""), latest.rate_gbps, _source(latest, name))


def _counter_sample(host: str, interval: float | None, comp: str, metric: str, unit: str, name: str, scale: int,
                    readings: tuple[int | None, int | None, int | None], rel: str, rate_gbps: float | None,
                    source: str) -> MetricSample:
    """One counter's sample, every case: readings are snapshot 0's, snapshot 1's and the latest value; rel,
    rate_gbps and source are those of the port record the latest value came from."""
    v0, v1, value = readings
    fastest = physical_max_rate(unit, rate_gbps)  # in the sample's unit; the raw counter counts 1/scale
    d = _delta(name, rel, v0, v1, interval, fastest / scale if fastest is not None else None)
    delta, rate, note = d.delta, d.rate, d.note
    if rel.startswith("counters/") and saturated(name, value):
        note = "saturated"  # increments past the maximum are lost: a zero delta proves nothing
        if v0 == v1:
            delta = rate = None
    return MetricSample(
        host, comp, metric, value * scale if value is not None else None, unit, source,
        delta * scale if delta is not None else None, rate * scale if rate is not None else None, note,
    )


def _gauges(host: str, comp: str, link: RdmaPort | Link, vendor: str | None, sources: tuple[str, ...],
            present: set[str] | frozenset[str]) -> list[MetricSample]:
    """The link gauges of a port: sources are those of _LINK_FILES; present, which of them were read."""
    out = []
    if "state" in present:
        out.append(MetricSample(host, comp, "link.state", link.state_code, "state", sources[0], None, None,
                                link.state))
    if "phys_state" in present:
        out.append(MetricSample(host, comp, "link.phys_state", link.phys_state_code, "state", sources[1], None,
                                None, link.phys_state))
    if "rate" in present:
        out.append(MetricSample(host, comp, "link.speed_gbps", link.rate_gbps, "Gb/s", sources[2]))
        out.append(MetricSample(host, comp, "link.width", link.width, "lanes", sources[2]))
    if link.link_layer:
        out.append(MetricSample(host, comp, "link.layer", None, "layer", sources[3], None, None, link.link_layer))
    if vendor:  # from the PCI driver, the device name or the counter names: no single item says it
        out.append(MetricSample(host, comp, "port.vendor", None, "vendor", None, None, None, vendor))
    return out


def rdma_samples(hc: HostCapture) -> list[MetricSample]:
    """Per port (`rdma:<dev>/<port>`): gauges link.state / link.phys_state (code, name in note), link.speed_gbps,
    link.width; every normalized counter present; every raw counter as `raw:<name>`. Counters carry the latest
    value, delta, rate and note ("missing", "wrap", "reset", or "saturated" for a PortCounters field at its max).
    """
    texts = _ib_texts(hc)
    fast = _fast_plan(tuple(texts))
    if fast is not None and (samples := _fast_samples(hc, fast, list(texts.values()))) is not None:
        return samples
    samples = []
    interval = hc.interval_s
    for r0, r1 in _load_ports(hc, texts):
        comp = f"rdma:{r0.device}/{r0.port}"
        base = f"{IB_ROOT}{r0.device}/ports/{r0.port}/"
        latest = r1 if r1 is not None else r0
        sources = tuple(base + rel for rel in _LINK_FILES)
        samples.extend(_gauges(hc.host, comp, latest, latest.vendor, sources, latest.present))
        samples.extend(_port_counters(hc, interval, comp, base, r0, r1))
    return samples


def _port_counters(hc: HostCapture, interval: float | None, comp: str, base: str, r0: RdmaPort,
                   r1: RdmaPort | None) -> list[MetricSample]:
    """_counter for every counter of one port, with its common case inlined (both readings present, the second
    not lower, a valid interval): a fleet has hundreds of thousands of these, and the general path (wraps,
    resets, saturation, missing readings) is taken only where it applies, with the same result."""
    latest_port = r1 if r1 is not None else r0
    raw0, sources0 = r0.raw, r0.raw_sources
    raw1, sources1 = (r1.raw, r1.raw_sources) if r1 is not None else ({}, {})
    valid = interval is not None and math.isfinite(interval) and interval > 0
    limits: dict[tuple[str, int], float | None] = {}
    host, out = hc.host, []
    append = out.append
    for metric, unit, name, scale, top, key in _picks(tuple(latest_port.raw), tuple(raw0)):
        v0 = raw0.get(name)
        if name in raw1:  # latest is r1
            v1, rel = raw1[name], sources1.get(name, "")
        else:
            v1, rel = None, sources0.get(name, "")
        # v1 == top: saturated(name, v1), inlined (top is None for a name without a PortCounters width)
        if not valid or v0 is None or v1 is None or v1 < v0 or (v1 == top and rel.startswith("counters/")):
            append(_counter(hc, interval, comp, metric, unit, name, scale, r0, r1))
            continue
        if key not in limits:
            fastest = physical_max_rate(unit, latest_port.rate_gbps)  # latest_port is r1: v1 was read
            limits[key] = _increase_limit(interval, fastest / scale if fastest is not None else None)
        limit, delta = limits[key], v1 - v0
        source = rel if rel.startswith("cmd:") else base + rel  # _source
        if limit is not None and delta > limit:
            append(MetricSample(host, comp, metric, v1 * scale, unit, source, None, None, "implausible"))
        else:
            append(MetricSample(host, comp, metric, v1 * scale, unit, source, delta * scale,
                                delta / interval * scale, None))  # type: ignore[operator]
    return out


def _increase_limit(interval: float, max_rate: float | None) -> float | None:
    """rates._limit: the largest increase the hardware can make in the interval, or None if unknown."""
    if max_rate is None or not math.isfinite(max_rate) or max_rate <= 0:
        return None
    return max_rate * interval * RATE_SLACK


@functools.lru_cache(maxsize=256)
def _picks(latest: tuple[str, ...], first: tuple[str, ...]) -> tuple[tuple[str, str, str, int, int | None,
                                                                          tuple[str, int]], ...]:
    """(metric, unit, raw name, scale, PortCounters maximum or None, (unit, scale)) for every sample of a port
    whose raw counters are named so: the normalized metrics present, then every raw counter as `raw:<name>`.
    Every port of a fleet has one of a few layouts."""
    latest_raw, first_raw = dict.fromkeys(latest, 0), dict.fromkeys(first, 0)
    out = []
    for metric, spec in NORMALIZED.items():
        picked = pick_raw(metric, latest_raw) or pick_raw(metric, first_raw)
        if picked:
            out.append((metric, spec.unit, picked[0], picked[1]))
    out += [(f"raw:{name}", "count", name, 1) for name in sorted({*latest, *first})]
    return tuple((metric, unit, name, scale, _top(name), (unit, scale)) for metric, unit, name, scale in out)


def _top(name: str) -> int | None:
    """The value a PortCounters field saturates at, None for other counters (saturated() is value == this)."""
    width = PMA_WIDTHS.get(name)
    return None if width is None else (1 << width) - 1


# ------------------------------------------------------------------------------------------------------ fast path
# What rdma_samples makes of a host whose ports all read plainly (every port in both snapshots, every counter in
# both, a plain number in each, no `rdma statistic`), without port records: the layout decides which text feeds
# which sample, once per layout; the counters of the whole host are read with one match, and their samples are
# computed column by column (map over lists, no Python step per counter) where none is odd (a reset, a wrap, a
# saturated field, an implausible increase: those take _counter_sample, as in the general path).


class _FastPort(NamedTuple):
    device: str
    comp: str
    link: tuple[int | None, ...]  # positions of snapshot 1's _LINK_FILES texts among the host's texts
    sources: tuple[str, ...]  # of _LINK_FILES
    present: frozenset[str]  # which _LINK_FILES snapshot 1 has
    names: tuple[str, ...]  # snapshot 1's counter names (detect_vendor)
    start: int  # this port's counter samples: the host's columns [start:end]
    end: int


class _FastHost(NamedTuple):
    """The plan of one layout: per port, then one column per counter-sample field, ports one after another."""

    texts: tuple[int, ...]  # positions of every counter text among the host's texts (the readings, in order)
    ports: tuple[_FastPort, ...]
    uevents: tuple[tuple[str, int], ...]
    at0: tuple[int, ...]  # positions of each sample's readings among the readings
    at1: tuple[int, ...]
    port: tuple[int, ...]  # the sample's port, by its index in ports
    comp: tuple[str, ...]
    metric: tuple[str, ...]
    unit: tuple[str, ...]
    name: tuple[str, ...]
    scale: tuple[int, ...]
    top: tuple[int | None, ...]  # the PortCounters maximum where the counter is read from counters/, else None
    rel: tuple[str, ...]  # snapshot 1's file, relative to the port folder
    source: tuple[str, ...]
    limit: tuple[int, ...]  # the sample's increase limit: port index * len(keys) + its key's index in keys
    keys: tuple[tuple[str, int], ...]  # the distinct (unit, scale) of the layout's counters


def _make_fast_plan(keys: tuple[tuple[str, int], ...]) -> _FastHost | None:
    """The fast path's plan for a host whose RDMA items are these, or None where the layout needs the general
    path (a port missing from a snapshot, a counter name in two folders, a counter in one snapshot only)."""
    plan, texts, ports, rows = _host_plan(keys), [], [], []
    limits = {key: i for i, key in enumerate(dict.fromkeys(pick[5] for pick in _layout_picks(plan)))}
    for index, port in enumerate(plan.ports):
        if port.rels1 is None or port.at1 is None:
            return None
        c0, c1 = counter_plan(port.rels0), counter_plan(port.rels1)
        if not (c0.distinct and c1.distinct):
            return None
        at0, at1 = dict(zip(port.rels0, port.at0, strict=True)), dict(zip(port.rels1, port.at1, strict=True))
        first = {name: len(texts) + i for i, name in enumerate(c0.names)}
        texts += [at0[rel] for rel in c0.rels]
        latest = {name: len(texts) + i for i, name in enumerate(c1.names)}
        texts += [at1[rel] for rel in c1.rels]
        base, comp, start = f"{IB_ROOT}{port.device}/ports/{port.port}/", f"rdma:{port.device}/{port.port}", len(rows)
        for metric, unit, name, scale, top, key in _picks(c1.names, c0.names):
            if name not in first or name not in latest:
                return None
            rel = c1.sources[name]
            limit = index * len(limits) + limits[key]
            rows.append((first[name], latest[name], index, comp, metric, unit, name, scale,
                         top if rel.startswith("counters/") else None, rel, base + rel, limit))
        ports.append(_FastPort(port.device, comp, tuple(map(at1.get, _LINK_FILES)),
                               tuple(base + rel for rel in _LINK_FILES), frozenset(_LINK_FILES).intersection(at1),
                               c1.names, start, len(rows)))
    columns = tuple(zip(*rows, strict=True)) if rows else ((),) * 12
    return _FastHost(tuple(texts), tuple(ports), plan.uevents, *columns, tuple(limits))  # type: ignore[arg-type]


def _layout_picks(plan: _HostPlan) -> list[tuple[str, str, str, int, int | None, tuple[str, int]]]:
    """Every port's _picks, one after another (the fast plan's, where it applies)."""
    out = []
    for port in plan.ports:
        if port.rels1 is not None:
            out += _picks(counter_plan(port.rels1).names, counter_plan(port.rels0).names)
    return out


_cached_fast_plan = functools.lru_cache(maxsize=64)(_make_fast_plan)


def _fast_plan(keys: tuple[tuple[str, int], ...]) -> _FastHost | None:
    return _cached_fast_plan(keys) if len(keys) <= _PLAN_ITEMS else _make_fast_plan(keys)


def _fast_samples(hc: HostCapture, fast: _FastHost, values: list[str]) -> list[MetricSample] | None:
    """rdma_samples by the plan, or None where the host's values need the general path."""
    items = HostItems(hc)
    if items.text(STATISTIC, 0) or items.text(STATISTIC, 1):
        return None
    readings = plain_counters(list(map(values.__getitem__, fast.texts))) if fast.texts else []
    if readings is None:
        return None
    drivers = _drivers(fast.uevents, values)
    host, interval = hc.host, hc.interval_s
    links = [link_fields(*[None if at is None else values[at] for at in port.link]) for port in fast.ports]
    counters = _fast_counters(host, interval, fast, readings, [link.rate_gbps for link in links])
    samples: list[MetricSample] = []
    for port, link in zip(fast.ports, links, strict=True):
        vendor = detect_vendor(port.device, port.names, drivers.get(port.device))
        samples += _gauges(host, port.comp, link, vendor, port.sources, port.present)
        samples += counters[port.start:port.end]
    return samples


def _fast_counters(host: str, interval: float | None, fast: _FastHost, readings: list[int],
                   rates: list[float | None]) -> list[MetricSample]:
    """Every counter sample of the host (_port_counters' results), column by column; rates: each port's line
    rate (the increase limits')."""
    v0s, v1s = list(map(readings.__getitem__, fast.at0)), list(map(readings.__getitem__, fast.at1))
    if not (interval is not None and math.isfinite(interval) and interval > 0):
        return [_fast_odd(host, interval, fast, i, v0s[i], v1s[i], rates) for i in range(len(v0s))]
    deltas = list(map(operator.sub, v1s, v0s))
    by_rate: dict[float | None, list[float]] = {}  # the ports of a host mostly run at one rate
    limits: list[float] = []
    for rate in rates:
        if rate not in by_rate:
            by_rate[rate] = [_limit_or_inf(interval, unit, scale, rate) for unit, scale in fast.keys]
        limits += by_rate[rate]
    ceilings = list(map(limits.__getitem__, fast.limit))
    scales = fast.scale
    samples = list(map(MetricSample, itertools.repeat(host), fast.comp, fast.metric, map(operator.mul, v1s, scales),
                       fast.unit, fast.source, map(operator.mul, deltas, scales),
                       map(operator.mul, map(operator.truediv, deltas, itertools.repeat(interval)), scales),
                       itertools.repeat(None)))
    if min(deltas, default=0) < 0 or any(map(operator.eq, v1s, fast.top)) or any(map(operator.gt, deltas, ceilings)):
        for i, (v0, v1, top, ceiling) in enumerate(zip(v0s, v1s, fast.top, ceilings, strict=True)):
            if v1 < v0 or v1 == top:
                samples[i] = _fast_odd(host, interval, fast, i, v0, v1, rates)
            elif v1 - v0 > ceiling:
                samples[i] = MetricSample(host, fast.comp[i], fast.metric[i], v1 * fast.scale[i], fast.unit[i],
                                          fast.source[i], None, None, "implausible")
    return samples


def _fast_odd(host: str, interval: float | None, fast: _FastHost, i: int, v0: int, v1: int,
              rates: list[float | None]) -> MetricSample:
    """Sample i of the plan by _counter_sample: a reset, a wrap, a saturated field, or no valid interval."""
    return _counter_sample(host, interval, fast.comp[i], fast.metric[i], fast.unit[i], fast.name[i], fast.scale[i],
                           (v0, v1, v1), fast.rel[i], rates[fast.port[i]], fast.source[i])


def _limit_or_inf(interval: float, unit: str, scale: int, rate_gbps: float | None) -> float:
    """_increase_limit for a counter of this unit and scale on this port; infinity where there is none."""
    fastest = physical_max_rate(unit, rate_gbps)
    limit = _increase_limit(interval, fastest / scale if fastest is not None else None)
    return math.inf if limit is None else limit
