"""Kernel protocol counters: IP/TCP/UDP retransmits, drops and errors for the whole host."""

from fabricase.collectors.base import Collector, FileSpec


class NetstatCollector(Collector):
    name = "netstat"
    version = 1
    description = "/proc/net/snmp, /proc/net/netstat and /proc/net/dev"
    files = (
        FileSpec("/proc/net/snmp", counter=True),
        FileSpec("/proc/net/netstat", counter=True),
        FileSpec("/proc/net/dev", counter=True),
    )
