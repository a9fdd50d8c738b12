"""PCIe links and errors: negotiated vs capable speed and width, AER counters, and `lspci -vvv`.

sh globs cannot filter by content, so the attributes of every PCI device are read and the parser keeps the
network, display/3D and bridge classes (parsers.pcie.is_fabric_class). `ls -l` of /sys/bus/pci/devices tells
which port each device hangs below, so a link is judged against its partner's capability too.
"""

from fabricase.collectors.base import Collector, CommandSpec, FileSpec

__all__ = ["PcieCollector"]

_DEV = "/sys/bus/pci/devices/*"
_LINK_ATTRS = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width", "vendor", "device",
               "class")
_AER_ATTRS = ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal", "aer_rootport_total_err_cor",
              "aer_rootport_total_err_fatal", "aer_rootport_total_err_nonfatal")


class PcieCollector(Collector):
    name = "pcie"
    version = 1
    description = "PCIe link speed/width (current and max), AER counters, device tree and lspci -vvv"
    requires_any = ("/sys/bus/pci/devices",)
    files = (
        *(FileSpec(f"{_DEV}/{attr}", cap=256) for attr in _LINK_ATTRS),
        *(FileSpec(f"{_DEV}/{attr}", counter=True, cap=4096) for attr in _AER_ATTRS),
    )
    commands = (
        CommandSpec("lspci", "command -v lspci >/dev/null 2>&1 || exit 0; lspci -vvv", timeout_s=20, cap=4 << 20),
        CommandSpec("pci-tree", 'ls -l "${FC_ROOT:-}/sys/bus/pci/devices/"', timeout_s=10, cap=1 << 20),
    )
