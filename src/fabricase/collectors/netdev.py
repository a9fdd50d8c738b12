"""Network devices: every interface's counters and link attributes from sysfs."""

from fabricase.collectors.base import Collector, FileSpec

_NET = "/sys/class/net/*"


class NetdevCollector(Collector):
    name = "netdev"
    version = 1
    description = "per-interface statistics, carrier changes, speed, MTU and state from /sys/class/net"
    files = (
        FileSpec(f"{_NET}/statistics/*", counter=True, cap=4096),
        *(
            FileSpec(f"{_NET}/{attr}", counter=True, cap=4096)
            for attr in ("carrier_changes", "carrier_up_count", "carrier_down_count", "operstate", "carrier",
                         "speed")
        ),
        *(FileSpec(f"{_NET}/{attr}", cap=4096) for attr in ("mtu", "address", "type", "duplex", "ifindex")),
    )
