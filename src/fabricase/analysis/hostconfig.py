"""One flat configuration record per host, for comparing hosts (drift): per port MTU, speed, FEC, driver and
firmware, PFC and ECN priorities, trust mode; RoCE GID types per RDMA port; driver module versions; kernel.

Keys are dotted ("netdev.eth0.mtu"); values are str, int or None (None: not captured or not readable, never a
guess). Priority sets are strings of ascending priorities, "3" or "3,4"; "" means none enabled.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from fabricase.analysis._items import HostItems
from fabricase.collectors.fabric_config import MODULES
from fabricase.models import HostCapture
from fabricase.parsers.ethtool import parse_ethtool_driver, parse_ethtool_fec, parse_ethtool_link, split_sections
from fabricase.parsers.fabric_config import (
    QosConfig,
    ecn_enabled_priorities,
    parse_dcb,
    parse_dcbtool_pfc,
    parse_mlnx_qos,
)
from fabricase.parsers.identity import parse_uname
from fabricase.parsers.iplink import parse_ip_link
from fabricase.parsers.sysfs import parse_sysfs_int, parse_sysfs_str

__all__ = ["host_config"]

_NET = "/sys/class/net/"
_ECN = re.compile(r"/sys/class/net/([^/]+)/ecn/(roce_np|roce_rp)/enable/([0-7])")
_GID = re.compile(r"/sys/class/infiniband/([^/]+)/ports/([0-9]+)/(gid_attrs/types|gid_attrs/ndevs|gids)/([0-9]+)")
_IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"


def _prios(prios: list[int] | None) -> str | None:
    return None if prios is None else ",".join(str(p) for p in prios)


def _sections(items: HostItems) -> Callable[[str], dict[str, str]]:
    """A command's per-port sections, split once per host: the ports, the QoS and the record read the same ones."""
    split: dict[str, dict[str, str]] = {}

    def sections(source: str) -> dict[str, str]:
        if source not in split:
            split[source] = split_sections(items.text(source))[0]
        return split[source]

    return sections


def _ports(net: list[str], sections: Callable[[str], dict[str, str]]) -> list[str]:
    """Physical ports: those a per-port command named, or whose device or ECN files were captured."""
    names = set()
    for source in ("cmd:ethtool-driver", "cmd:ethtool-link", "cmd:ethtool-stats", "cmd:mlnx-qos", "cmd:dcb"):
        names |= set(sections(source))
    for source in net:
        name, _, attr = source[len(_NET) :].partition("/")
        if attr.startswith(("device/", "ecn/")):
            names.add(name)
    return sorted(names)


def _qos(sections: Callable[[str], dict[str, str]]) -> dict[str, QosConfig]:
    """Per port, the first tool that answered: mlnx_qos, then dcb, then dcbtool (PFC only)."""
    merged: dict[str, QosConfig] = {}
    for source, parse in (("cmd:mlnx-qos", parse_mlnx_qos), ("cmd:dcb", parse_dcb), ("cmd:dcbtool", parse_dcbtool_pfc)):
        for port, text in sections(source).items():
            cfg, have = parse(text), merged.setdefault(port, QosConfig())
            if have.pfc_enabled is None:
                have.pfc_enabled = cfg.pfc_enabled
            if have.trust is None:
                have.trust = cfg.trust
    return merged


def _ecn(items: HostItems, net: list[str]) -> dict[tuple[str, str], str | None]:
    files: dict[tuple[str, str], dict[int, str | None]] = defaultdict(dict)
    for source in net:
        match = _ECN.fullmatch(source) if "/ecn/" in source else None
        if match:
            port, role, prio = match.groups()
            files[(port, role)][int(prio)] = items.text(source)
    return {key: _prios(ecn_enabled_priorities(values)) for key, values in files.items()}


def _gids(items: HostItems, record: dict[str, Any]) -> None:
    """Per RDMA port: the GID types present, the RoCE v2 GID indexes, the first RoCE v2 GID holding an IPv4
    address (what NCCL_IB_GID_INDEX usually names), and the netdev behind the GIDs (types come from the
    fabric_config collector, ndevs and gids from the rdma collector)."""
    ports: dict[tuple[str, str], dict[str, dict[int, str]]] = defaultdict(lambda: defaultdict(dict))
    for source in items.sources("/sys/class/infiniband/"):
        match = _GID.fullmatch(source) if "/gid" in source else None  # most of the sources are port counters
        value = parse_sysfs_str(items.text(source)) if match else None
        if match and value:
            dev, port, kind, index = match.groups()
            ports[(dev, port)][kind.rsplit("/", 1)[-1]][int(index)] = value
    for (dev, port), tables in sorted(ports.items()):
        key, types, gids = f"rdma.{dev}/{port}", tables["types"], tables["gids"]
        v2 = sorted(i for i, t in types.items() if t == "RoCE v2")
        ipv4 = [i for i in v2 if gids.get(i, "").startswith(_IPV4_MAPPED)]
        record[f"{key}.gid_types"] = ",".join(sorted(set(types.values()))) or None
        record[f"{key}.roce_v2_gid_indexes"] = ",".join(map(str, v2)) if types else None
        record[f"{key}.roce_v2_ipv4_gid_index"] = ipv4[0] if ipv4 else None
        record[f"{key}.netdev"] = ",".join(sorted(set(tables["ndevs"].values()))) or None


def _kernel(items: HostItems) -> str | None:
    """parsers.identity.host_identity's kernel (osrelease, else uname's release), read through the analysis's
    memoized items: host_identity reads sixteen items through the capture's own index, built for this alone."""
    release = parse_uname(items.text("cmd:uname"))["kernel_release"]
    return parse_sysfs_str(items.text("/proc/sys/kernel/osrelease")) or release


def host_config(hc: HostCapture) -> dict[str, Any]:
    """The host's fabric configuration as one flat, key-sorted dict (see the module docstring)."""
    items = HostItems(hc)
    sections = _sections(items)
    record: dict[str, Any] = {"host": hc.host, "kernel": _kernel(items)}
    links = {p: parse_ethtool_link(t) for p, t in sections("cmd:ethtool-link").items()}
    fecs = {p: parse_ethtool_fec(t) for p, t in sections("cmd:ethtool-fec").items()}
    drivers = {p: parse_ethtool_driver(t) for p, t in sections("cmd:ethtool-driver").items()}
    net = items.sources(_NET)  # the ports and the ECN files both walk /sys/class/net/
    qos, ecn = _qos(sections), _ecn(items, net)
    ip_links = parse_ip_link(items.text("cmd:ip-link")).links
    for port in _ports(net, sections):
        key, link, driver, fec = f"netdev.{port}", links.get(port), drivers.get(port), fecs.get(port)
        cfg = qos.get(port, QosConfig())
        mtu = parse_sysfs_int(items.text(f"{_NET}{port}/mtu"))
        if mtu is None and port in ip_links:
            mtu = ip_links[port].mtu
        record.update({
            f"{key}.mtu": mtu,
            f"{key}.speed_mbps": link.speed_mbps if link else None,
            f"{key}.lanes": link.lanes if link else None,
            f"{key}.fec": fec.active if fec else None,
            f"{key}.driver": driver.driver if driver else None,
            f"{key}.driver_version": driver.version if driver else None,
            f"{key}.firmware": driver.firmware_version if driver else None,
            f"{key}.bus_info": driver.bus_info if driver else None,
            f"{key}.pfc_enabled": _prios(cfg.pfc_enabled),
            f"{key}.trust": cfg.trust,
            f"{key}.ecn_np_enabled": ecn.get((port, "roce_np")),
            f"{key}.ecn_rp_enabled": ecn.get((port, "roce_rp")),
        })
    _gids(items, record)
    for module in MODULES:
        record[f"module.{module}.version"] = parse_sysfs_str(items.text(f"/sys/module/{module}/version"))
    return dict(sorted(record.items()))
