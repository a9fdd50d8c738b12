"""The Ethernet side of RoCE: ethtool counters (PHY, FEC, PFC per priority, discards), link settings, FEC mode,
driver and firmware, transceiver diagnostics, and `ip -s -d link`.

Each ethtool command loops over the physical ports (netdevs with a `device` link: no bonds, VLANs, bridges) and
prints `### <netdev>` before each port's output, so one item holds every port (parsers.ethtool.split_sections).
$FC_ROOT, empty on a real host, lets a recorded host tree stand in for /sys.
"""

from fabricase.collectors.base import Collector, CommandSpec, FileSpec

__all__ = ["EthtoolCollector", "each_port"]


def each_port(tool: str, body: str, *, keep_status: bool = True) -> str:
    """A POSIX sh loop running `body` (which may use "$i", the netdev) for every physical port, after a
    `### <netdev>` header. Exits 0 with no output when `tool` is not installed; keep_status: exit with the
    last failing run's status (else 0, for tools that fail on ports where the answer is simply "none")."""
    status = "exit $rc" if keep_status else "exit 0"
    return (
        f"command -v {tool} >/dev/null 2>&1 || exit 0; rc=0; "
        'for d in "${FC_ROOT:-}"/sys/class/net/*; do [ -e "$d/device" ] || continue; i=${d##*/}; '
        f"printf '### %s\\n' \"$i\"; {body} || rc=$?; done; {status}"
    )


class EthtoolCollector(Collector):
    name = "ethtool"
    version = 1
    description = "ethtool -S/-i/--show-fec/-m and link settings of every physical port; ip -s -d link"
    requires_any = ("/sys/class/net",)
    files = tuple(FileSpec(f"/sys/class/net/*/device/{attr}", cap=64) for attr in ("vendor", "device"))
    commands = (
        # Counters: read in both snapshots. Per-queue counters make this large on many-channel NICs.
        CommandSpec("ethtool-stats", each_port("ethtool", 'ethtool -S "$i"'), timeout_s=30, cap=8 << 20,
                    counter=True),
        CommandSpec("ethtool-link", each_port("ethtool", 'ethtool "$i"'), timeout_s=20, cap=512 << 10),
        CommandSpec("ethtool-fec", each_port("ethtool", 'ethtool --show-fec "$i"', keep_status=False),
                    timeout_s=20, cap=64 << 10),
        CommandSpec("ethtool-driver", each_port("ethtool", 'ethtool -i "$i"'), timeout_s=20, cap=64 << 10),
        # Module EEPROM reads go over I2C (slow) and fail on ports without a pluggable module: not an error.
        CommandSpec("ethtool-module", each_port("ethtool", 'ethtool -m "$i"', keep_status=False), timeout_s=40,
                    cap=512 << 10),
        CommandSpec("ip-link", "command -v ip >/dev/null 2>&1 || exit 0; ip -s -d link", timeout_s=10,
                    cap=1 << 20),
    )
