"""Netdev metrics of one host: /sys/class/net/<if> counters as deltas and rates between snapshots 0 and 1,
and the gauges speed, mtu, carrier and operstate."""

from __future__ import annotations

from fabricase.analysis._items import HostItems
from fabricase.analysis.rates import counter_delta, physical_max_rate
from fabricase.models import HostCapture, MetricSample
from fabricase.parsers.sysfs import parse_sysfs_int, parse_sysfs_speed, parse_sysfs_str

__all__ = ["CARRIER_COUNTERS", "NET_ROOT", "VIRTUAL_PREFIXES", "interface_of", "is_virtual", "netdev_samples"]

NET_ROOT = "/sys/class/net/"
CARRIER_COUNTERS = ("carrier_changes", "carrier_up_count", "carrier_down_count")
# Software interfaces that are not ports on a wire; their drops and down states say nothing about the fabric.
VIRTUAL_PREFIXES = (
    "docker", "veth", "br-", "virbr", "ifb", "dummy", "tun", "tap", "cali", "flannel", "cni", "vxlan",
    "kube-", "lxc", "lxd", "podman", "tailscale",
)  # fmt: skip


def is_virtual(interface: str) -> bool:
    return interface == "lo" or interface.startswith(VIRTUAL_PREFIXES)


def interface_of(source: str) -> str | None:
    """The interface of a /sys/class/net/<if>/<attr> source; None for other sources (bonding_masters)."""
    if not source.startswith(NET_ROOT):
        return None
    name, sep, attr = source[len(NET_ROOT) :].partition("/")
    return name if sep and name and attr else None


def _unit(metric: str) -> str:
    if metric.endswith("_bytes"):
        return "bytes"
    if metric.startswith("carrier_"):
        return "transitions"
    return "packets"


def _counter(hc: HostCapture, items: HostItems, interface: str, metric: str, source: str,
             interval: float | None) -> MetricSample:
    v0 = parse_sysfs_int(items.text(source, 0))
    v1 = parse_sysfs_int(items.text(source, 1))
    line_gbps = None  # -1, absent or a software interface (veth "10000" moves more): the rate is not bounded
    if not is_virtual(interface):
        speed = f"{NET_ROOT}{interface}/speed"
        mbps = parse_sysfs_int(items.text(speed, 1) or items.text(speed))
        line_gbps = mbps / 1000 if mbps and mbps > 0 else None
    d = counter_delta(v0, v1, interval, max_rate=physical_max_rate(_unit(metric), line_gbps))
    return MetricSample(
        host=hc.host,
        component=f"netdev:{interface}",
        metric=metric,
        value=v1 if v1 is not None else v0,
        unit=_unit(metric),
        source=source,
        delta=d.delta,
        rate=d.rate,
        note=d.note,
    )


def _latest(items: HostItems, source: str) -> str | None:
    text = items.text(source, 1)
    return text if text is not None else items.text(source, 0)


def _gauges(hc: HostCapture, items: HostItems, interface: str) -> list[MetricSample]:
    base = f"{NET_ROOT}{interface}/"
    component = f"netdev:{interface}"
    samples: list[MetricSample] = []
    for metric, unit, parse in (
        ("speed", "Mb/s", parse_sysfs_speed),
        ("mtu", "bytes", parse_sysfs_int),
        ("carrier", "flag", parse_sysfs_int),
    ):
        text = _latest(items, base + metric)
        if text is not None:
            samples.append(MetricSample(hc.host, component, metric, parse(text), unit, source=base + metric))
    state_text = _latest(items, base + "operstate")
    if state_text is not None:
        # A state is not a number: value stays None and the state word goes in note.
        state = parse_sysfs_str(state_text)
        samples.append(MetricSample(hc.host, component, "operstate", None, "state", base + "operstate", note=state))
    return samples


def netdev_samples(hc: HostCapture) -> list[MetricSample]:
    """Every /sys/class/net/<if> metric captured for the host, by interface then metric.

    Counters (statistics/* and carrier_*) carry value (the latest reading), delta, rate and the rate note
    ("missing", "wrap", "reset"); gauges carry value only (speed None when the driver reports unknown);
    operstate has value None and the state in note.
    """
    items = HostItems(hc)
    by_interface: dict[str, dict[str, str]] = {}
    for source in items.sources(NET_ROOT):
        interface = interface_of(source)
        if interface is None:
            continue
        attr = source[len(NET_ROOT) + len(interface) + 1 :]
        if attr.startswith("statistics/") and attr.count("/") == 1:
            by_interface.setdefault(interface, {})[attr.split("/", 1)[1]] = source
        elif attr in CARRIER_COUNTERS:
            by_interface.setdefault(interface, {})[attr] = source
        else:
            by_interface.setdefault(interface, {})
    samples: list[MetricSample] = []
    interval = hc.interval_s  # a property that works the interval out on each read
    for interface in sorted(by_interface):
        counters = by_interface[interface]
        for metric in sorted(counters):
            samples.append(_counter(hc, items, interface, metric, counters[metric], interval))
        samples.extend(_gauges(hc, items, interface))
    return samples
