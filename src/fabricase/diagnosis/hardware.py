"""One host's components and their aliases: which RDMA port is which netdev and which PCI function, which GPU
sits at which PCI address, and the serials, GUIDs and MACs a provider needs to find the part.

Read from the capture while the host's items are read for analysis (pipeline passes `host_hardware` to
analysis.analyze), so nothing is read twice."""

from __future__ import annotations

import bisect
import ipaddress
import re

from fabricase.analysis._items import HostItems
from fabricase.diagnosis.models import HostHardware
from fabricase.errors import CaptureError
from fabricase.models import HostCapture
from fabricase.parsers.ethtool import parse_ethtool_driver, split_sections
from fabricase.parsers.nvidia_smi import normalize_pci

__all__ = ["host_hardware", "normalize_guid", "pci_key"]

IB = "/sys/class/infiniband/"
NET = "/sys/class/net/"
_PORT = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/")
_SLOT = re.compile(r"^PCI_SLOT_NAME=(\S+)", re.M)
_MAC = re.compile(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}")
# `ip -s -d link`: "4: eth0: <...>" starts an interface, "    link/ether 0c:42:a1:00:00:02 brd ..." gives its MAC.
_IP_HEADER = re.compile(r"^\d+:\s+([^\s:@]+)(?:@\S*?)?:\s+<", re.M)
_IP_ETHER = re.compile(r"^\s+link/ether\s+(\S+)", re.M)
_GUID = re.compile(r"(?:0x)?([0-9a-fA-F]{16})|([0-9a-fA-F]{4}):([0-9a-fA-F]{4}):([0-9a-fA-F]{4}):([0-9a-fA-F]{4})")
_IDENTITY_KEYS = ("board_asset_tag", "product_name", "product_serial", "physical_host_name", "hostname")
# Lines a hostile or truncated capture may leave: nothing a netdev or device name could be.
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def pci_key(address: str | None) -> str | None:
    """A PCI address as one key: lower case, domain given, function 0 when the source left it out (Xid lines
    say `0000:9b:00`, sysfs `0000:9b:00.0`: the same GPU)."""
    norm = normalize_pci(address)
    if norm is None:
        return None
    return norm if "." in norm.rsplit(":", 1)[-1] else norm + ".0"


def normalize_guid(text: str | None) -> str | None:
    """A node or port GUID as InfiniBand tools print it (`0xa088c20300da6300`), from sysfs's `a088:c203:00da:6300`
    or an `ibstat`-style `0x...`; None when it is not one (or is all zeros: no GUID)."""
    m = _GUID.fullmatch((text or "").strip())
    if not m:
        return None
    digits = (m.group(1) or "".join(m.groups()[1:])).lower()
    return None if int(digits, 16) == 0 else "0x" + digits


def _first_line(text: str | None) -> str | None:
    lines = (text or "").strip().splitlines()
    return (lines[0].strip() or None) if lines else None


def _port_guid(gid: str | None) -> str | None:
    """The port GUID is the interface id (low 64 bits) of an InfiniBand port's GID 0. sysfs writes GIDs as 8 groups
    of 4 hex digits; a compressed IPv6 form is read too."""
    try:
        packed = ipaddress.IPv6Address(_first_line(gid) or "").packed
    except ValueError:
        return None
    return normalize_guid(packed[8:].hex())


def _mac(text: str | None) -> str | None:
    value = _first_line(text)
    if not value or not _MAC.fullmatch(value) or value.replace(":", "").strip("0") == "":
        return None
    return value.lower()


def _rdma(hw: HostHardware, items: HostItems) -> None:
    devices: dict[str, dict[str, str]] = {}
    # The sources are sorted: once a port is seen, its hundred or more counter files are skipped in one jump.
    sources = items.sources(IB)
    i = 0
    while i < len(sources):
        dev, _, tail = sources[i][len(IB):].partition("/")
        if dev not in devices:
            devices[dev] = {}
        if tail.startswith("ports/"):
            port, sep, _ = tail[6:].partition("/")
            if sep and port.isdigit():
                hw.ports.setdefault(f"{dev}/{port}", {})
                i = bisect.bisect_left(sources, f"{IB}{dev}/ports/{port}/\U0010ffff", i + 1)
                continue
        i += 1
    for dev, facts in devices.items():
        slot = _SLOT.search(items.text(f"{IB}{dev}/device/uevent") or "")
        if slot and (pci := pci_key(slot.group(1))):
            facts["pci"] = pci
            hw.pci.setdefault(pci, ("rdma", dev))
        if guid := normalize_guid(_first_line(items.text(f"{IB}{dev}/node_guid"))):
            facts["node_guid"] = guid
        for name, key in (("fw_ver", "firmware"), ("hca_type", "hca_type"), ("board_id", "board_id")):
            if value := _first_line(items.text(f"{IB}{dev}/{name}")):
                facts[key] = value
    for name, facts in hw.ports.items():
        dev, port = name.split("/")
        base = f"{IB}{dev}/ports/{port}/"
        facts.update(devices.get(dev, {}))
        if layer := _first_line(items.text(base + "link_layer")):
            facts["link_layer"] = layer
        # RoCE: the GID table's netdev. The first readable entry: unused entries fail to read or are empty.
        ndevs = (_first_line(items.text(f"{base}gid_attrs/ndevs/{i}")) for i in range(4))
        if netdev := next((n for n in ndevs if n and _NAME.fullmatch(n)), None):
            facts["netdev"] = netdev
            hw.netdevs.setdefault(netdev, {})["rdma"] = name
        if facts.get("link_layer", "").lower() == "infiniband" and (guid := _port_guid(items.text(base + "gids/0"))):
            facts["port_guid"] = guid


def _ip_link_macs(text: str | None) -> dict[str, str]:
    """{interface: MAC} from `ip -s -d link`, for hosts whose capture has no /sys/class/net/<if>/address."""
    out: dict[str, str] = {}
    headers = list(_IP_HEADER.finditer(text or ""))
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        block = (text or "")[header.end():following.start() if following else None]
        if (m := _IP_ETHER.search(block)) and (mac := _mac(m.group(1))):
            out.setdefault(header.group(1), mac)
    return out


def _netdevs(hw: HostHardware, items: HostItems) -> None:
    for name, text in split_sections(items.text("cmd:ethtool-driver"))[0].items():
        name = name.strip()
        if not _NAME.fullmatch(name):
            continue
        info = parse_ethtool_driver(text)
        facts = hw.netdevs.setdefault(name, {})
        if pci := pci_key(info.bus_info):
            facts["pci"] = pci
            hw.pci.setdefault(pci, ("netdev", name))
        if info.driver:
            facts["driver"] = info.driver
        if info.firmware_version:
            facts["firmware"] = info.firmware_version
    _link_by_pci(hw)
    macs = _ip_link_macs(items.text("cmd:ip-link"))
    for name, facts in hw.netdevs.items():
        if mac := _mac(items.text(f"{NET}{name}/address")) or macs.get(name):
            facts["mac"] = mac
        if rdma := facts.get("rdma"):
            port = hw.ports.get(rdma, {})
            port.setdefault("netdev", name)
            if "mac" in facts:
                port.setdefault("mac", facts["mac"])
            if "pci" in port:
                facts.setdefault("pci", port["pci"])


def _link_by_pci(hw: HostHardware) -> None:
    """A netdev and a one-port RDMA device on the same PCI function are one NIC port, where the GID table did not
    say so (InfiniBand's IPoIB netdevs, a capture without gid_attrs)."""
    by_pci: dict[str, list[str]] = {}
    for name, facts in hw.netdevs.items():
        if facts.get("pci"):
            by_pci.setdefault(facts["pci"], []).append(name)
    linked = {facts.get("netdev") for facts in hw.ports.values()}
    for pci, names in by_pci.items():
        owner = hw.pci.get(pci)
        if len(names) != 1 or owner is None or owner[0] != "rdma" or names[0] in linked:
            continue
        ports = [p for p in hw.ports if p.split("/")[0] == owner[1]]
        if len(ports) == 1 and "netdev" not in hw.ports[ports[0]]:
            hw.ports[ports[0]]["netdev"] = names[0]
            hw.netdevs[names[0]].setdefault("rdma", ports[0])


def _gpus(hw: HostHardware, items: HostItems) -> None:
    from fabricase.analysis.gpu import nvidia_smi_report

    report, _ = nvidia_smi_report(items)
    for gpu in report.gpus if report else ():
        facts = {k: v for k, v in (("serial", gpu.serial), ("uuid", gpu.uuid), ("model", gpu.name)) if v}
        if pci := pci_key(gpu.bus_id):
            facts["pci"] = pci
            hw.pci[pci] = ("gpu", str(gpu.index))
        hw.gpus[str(gpu.index)] = facts


def _identity(hc: HostCapture, items: HostItems) -> dict[str, str]:
    """The host facts a provider needs, read through the analysis's memoized items (the few DMI files, the
    hostname, the Azure KVP pool only when it was captured): parsers.identity.host_identity would index the
    host's items once more."""
    from fabricase.parsers.identity import DMI_FIELDS
    from fabricase.parsers.kvp import KVP_POOL_3, PHYSICAL_HOST_KEY, parse_kvp_pool
    from fabricase.parsers.sysfs import parse_sysfs_str
    from fabricase.providers.identity import cloud_of

    identity: dict[str, str | None] = {name: parse_sysfs_str(items.text(f"/sys/class/dmi/id/{name}"))
                                       for name in (*DMI_FIELDS, "product_serial")}
    identity["hostname"] = parse_sysfs_str(items.text("/proc/sys/kernel/hostname"))
    if items.sources(KVP_POOL_3) and (kvp := hc.item(KVP_POOL_3)) is not None and kvp.bytes:
        identity["physical_host_name"] = parse_kvp_pool(hc.read(kvp)).get(PHYSICAL_HOST_KEY) or None
    out = {k: str(identity[k]).strip() for k in _IDENTITY_KEYS if str(identity.get(k) or "").strip()}
    provider, instance_id = cloud_of(identity)
    if provider:
        out["provider"] = provider
    if instance_id:
        out["instance_id"] = instance_id
    return out


def host_hardware(hc: HostCapture) -> HostHardware:
    """Every RDMA port, netdev and GPU of the host with its aliases and identity facts; empty on a host with no
    items. Never raises on odd content: what cannot be read is left out."""
    hw = HostHardware(hc.host)
    if not hc.items:
        return hw
    items = HostItems(hc)
    # Each part on its own: a garbled nvidia-smi XML must not cost the NIC aliases, nor an unreadable item the rest.
    for read in (lambda: _rdma(hw, items), lambda: _netdevs(hw, items), lambda: _gpus(hw, items)):
        try:
            read()
        except (CaptureError, ValueError, LookupError, TypeError, AttributeError):
            continue
    try:
        hw.identity = _identity(hc, items)
    except (CaptureError, ValueError, LookupError, TypeError, AttributeError, OSError):
        hw.identity = {}
    return hw
