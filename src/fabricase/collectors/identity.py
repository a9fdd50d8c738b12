"""Who the host is: DMI identity (the cloud instance id lives here on Nitro), hostname, kernel, OS."""

from fabricase.collectors.base import Collector, CommandSpec, FileSpec

_DMI = (
    "sys_vendor", "product_name", "product_version", "board_vendor", "board_name", "board_asset_tag",
    "bios_vendor", "bios_version", "chassis_asset_tag", "chassis_vendor",
)


KVP_POOL = "/var/lib/hyperv/.kvp_pool_3"  # parsers.kvp.KVP_POOL_3


class IdentityCollector(Collector):
    name = "identity"
    version = 2
    description = "DMI identity, hostname, kernel release and OS"
    files = (
        *(FileSpec(f"/sys/class/dmi/id/{attr}", cap=4096) for attr in _DMI),
        FileSpec("/proc/sys/kernel/hostname", cap=4096),
        FileSpec("/proc/sys/kernel/osrelease", cap=4096),
        FileSpec("/proc/version", cap=4096),
        FileSpec("/etc/os-release", cap=16384),
        # Azure: the Hyper-V KVP pool the host writes into the guest (PhysicalHostName, VirtualMachineName):
        # binary, 2,560-byte records, so read verbatim. Absent on every other machine.
        FileSpec(KVP_POOL, cap=64 * 1024, mode="raw"),
    )
    commands = (CommandSpec("uname", "uname -a", timeout_s=5, cap=4096),)
