"""One host's components and their aliases: which RDMA port is which netdev and which PCI function, which GPU
sits at which PCI address, and the serials, GUIDs and MACs a provider needs to find the part.

Read from the capture while the host's items are read for analysis (pipeline passes `host_hardware` to
analysis.analyze), so nothing is read twice."""

from __future__ import annotations

import re

from fabricase.analysis._items import HostItems
from fabricase.diagnosis.models import HostHardware
from fabricase.models import HostCapture
from fabricase.parsers.ethtool import parse_ethtool_driver, split_sections
from fabricase.parsers.nvidia_smi import normalize_pci

__all__ = ["host_hardware", "pci_key"]

IB = "/sys/class/infiniband/"
NET = "/sys/class/net/"
_PORT = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/")
_SLOT = re.compile(r"^PCI_SLOT_NAME=(\S+)", re.M)
_IDENTITY_KEYS = ("board_asset_tag", "product_name", "product_serial", "physical_host_name", "hostname")


def pci_key(address: str | None) -> str | None:
    """A PCI address as one key: lower case, domain given, function 0 when the source left it out (Xid lines
    say `0000:9b:00`, sysfs `0000:9b:00.0`: the same GPU)."""
    norm = normalize_pci(address)
    if norm is None:
        return None
    return norm if "." in norm.rsplit(":", 1)[-1] else norm + ".0"


def _first_line(text: str | None) -> str | None:
    value = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    return value or None


def _port_guid(gid: str | None) -> str | None:
    """The port GUID is the interface id (low 64 bits) of an InfiniBand port's GID 0."""
    gid = _first_line(gid)
    if not gid or gid.count(":") != 7:
        return None
    return "0x" + "".join(gid.split(":")[4:]).lower()


def _rdma(hw: HostHardware, items: HostItems) -> None:
    devices: dict[str, dict[str, str]] = {}
    for source in items.sources(IB):
        m = _PORT.match(source)
        if m:
            dev, port = m.group(1), m.group(2)
            hw.ports.setdefault(f"{dev}/{port}", {"rdma": f"{dev}/{port}"})
        else:
            dev = source[len(IB):].split("/", 1)[0]
        devices.setdefault(dev, {})
    for dev, facts in devices.items():
        slot = _SLOT.search(items.text(f"{IB}{dev}/device/uevent") or "")
        if slot and (pci := pci_key(slot.group(1))):
            facts["pci"] = pci
            hw.pci.setdefault(pci, ("rdma", dev))
        for name in ("node_guid", "fw_ver", "hca_type", "board_id"):
            if value := _first_line(items.text(f"{IB}{dev}/{name}")):
                facts[name] = value
    for name, facts in hw.ports.items():
        dev, port = name.split("/")
        base = f"{IB}{dev}/ports/{port}/"
        facts.update(devices.get(dev, {}))
        if layer := _first_line(items.text(base + "link_layer")):
            facts["link_layer"] = layer
        ndevs = (_first_line(items.text(f"{base}gid_attrs/ndevs/{i}")) for i in range(4))
        if netdev := next((n for n in ndevs if n and "/" not in n and " " not in n), None):
            facts["netdev"] = netdev
            hw.netdevs.setdefault(netdev, {})["rdma"] = name
        if facts.get("link_layer", "").lower() == "infiniband" and (guid := _port_guid(items.text(base + "gids/0"))):
            facts["port_guid"] = guid


def _netdevs(hw: HostHardware, items: HostItems) -> None:
    drivers = split_sections(items.text("cmd:ethtool-driver"))[0]
    for name, text in drivers.items():
        info = parse_ethtool_driver(text)
        facts = hw.netdevs.setdefault(name, {})
        if pci := pci_key(info.bus_info):
            facts["pci"] = pci
            hw.pci.setdefault(pci, ("netdev", name))
        for key in ("driver", "firmware_version"):
            if value := getattr(info, key):
                facts[key] = value
    for name, facts in hw.netdevs.items():
        if mac := _first_line(items.text(f"{NET}{name}/address")):
            facts["mac"] = mac
        if rdma := facts.get("rdma"):
            port = hw.ports.get(rdma, {})
            port.setdefault("netdev", name)
            if "mac" in facts:
                port.setdefault("mac", facts["mac"])
            if "pci" in port:
                facts.setdefault("pci", port["pci"])


def _gpus(hw: HostHardware, hc: HostCapture) -> None:
    from fabricase.analysis.gpu import nvidia_smi_report

    report, _ = nvidia_smi_report(HostItems(hc))
    for gpu in report.gpus if report else ():
        facts = {k: v for k, v in (("serial", gpu.serial), ("uuid", gpu.uuid), ("name", gpu.name)) if v}
        if pci := pci_key(gpu.bus_id):
            facts["pci"] = pci
            hw.pci[pci] = ("gpu", str(gpu.index))
        hw.gpus[str(gpu.index)] = facts


def host_hardware(hc: HostCapture) -> HostHardware:
    """Every RDMA port, netdev and GPU of the host with its aliases and identity facts; empty on a host with no
    items. Never raises on odd content: what cannot be read is left out."""
    hw = HostHardware(hc.host)
    if not hc.items:
        return hw
    items = HostItems(hc)
    _rdma(hw, items)
    _netdevs(hw, items)
    _gpus(hw, hc)
    from fabricase.parsers.identity import host_identity

    identity = host_identity(hc)
    hw.identity = {k: str(identity[k]) for k in _IDENTITY_KEYS if identity.get(k) not in (None, "")}
    return hw
