"""Who the host is: DMI identity (the cloud instance id lives here on Nitro), hostname, kernel, OS."""

from fabricase.collectors.base import Collector, CommandSpec, FileSpec

_DMI = (
    "sys_vendor", "product_name", "product_version", "board_vendor", "board_name", "board_asset_tag",
    "bios_vendor", "bios_version", "chassis_asset_tag", "chassis_vendor",
)


class IdentityCollector(Collector):
    name = "identity"
    version = 1
    description = "DMI identity, hostname, kernel release and OS"
    files = (
        *(FileSpec(f"/sys/class/dmi/id/{attr}", cap=4096) for attr in _DMI),
        FileSpec("/proc/sys/kernel/hostname", cap=4096),
        FileSpec("/proc/sys/kernel/osrelease", cap=4096),
        FileSpec("/proc/version", cap=4096),
        FileSpec("/etc/os-release", cap=16384),
    )
    commands = (CommandSpec("uname", "uname -a", timeout_s=5, cap=4096),)
