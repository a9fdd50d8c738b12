"""The recorded-host-tree mechanism: command stubs and the snapshot-1 overlay, through the real script."""

from __future__ import annotations

from fabricase.collectors.base import Collector, CommandSpec, FileSpec
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.transports.local import LocalTransport
from hosttrees import record_command, write_file, write_s1


class _Tree(Collector):
    name = "tree"
    files = (FileSpec("/sys/class/net/*/statistics/rx_crc_errors", counter=True),)
    commands = (CommandSpec("tool", "ethtool -S eth0", counter=True), CommandSpec("missing", "ethtool -m eth0"))


def test_stubs_and_overlay(tmp_path):
    root = tmp_path / "host"
    write_file(root, "/sys/class/net/eth0/statistics/rx_crc_errors", "10\n")
    write_s1(root, "/sys/class/net/eth0/statistics/rx_crc_errors", "67\n")
    record_command(root, "ethtool", ["-S", "eth0"], "NIC statistics:\n     rx_crc_errors_phy: 10\n")
    record_command(root, "ethtool", ["-S", "eth0"], "NIC statistics:\n     rx_crc_errors_phy: 67\n", snapshot=1)
    plan = CapturePlan(collectors=(_Tree,), interval_s=0, root=str(root))
    run = LocalTransport().run_one("localhost", compile_script(plan), timeout_s=30)
    r = parse_stream(run.stdout)
    got = {(i.source, i.snapshot, i.kind): i for i in r.items}
    assert got[("/sys/class/net/eth0/statistics/rx_crc_errors", 0, "file")].content == b"10\n"
    assert got[("/sys/class/net/eth0/statistics/rx_crc_errors", 1, "file")].content == b"67\n"
    assert got[("cmd:tool", 0, "command")].content.endswith(b"rx_crc_errors_phy: 10\n")
    assert got[("cmd:tool", 1, "command")].content.endswith(b"rx_crc_errors_phy: 67\n")
    missing = got[("cmd:missing", 0, "command")]
    assert missing.rc == 1 and b"no recorded output" in got[("cmd:missing", 0, "stderr")].content


def test_release_drops_the_lookup_index_and_lookups_still_work():
    """Issue 18: release() frees the host's index too (as large as its items on a GPU host)."""
    from fabricase.models import CaptureItem, HostCapture, HostStatus

    items = [CaptureItem(f"/sys/x/{i}", 0, "file", "t", f"s0/fs/sys/x/{i}", 1, "0" * 64) for i in range(100)]
    hc = HostCapture("h", HostStatus.OK, "fake", items=items)
    assert hc.item("/sys/x/7") is items[7] and len(hc._index) == 100
    hc.release()
    assert hc._index == {} and hc._blobs == {} and hc.cache == {}
    assert hc.item("/sys/x/42") is items[42]
