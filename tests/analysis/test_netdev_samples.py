from pathlib import Path

import pytest
from capture_builder import degraded_eth2, sysfs_net, write_host

from fabricase.analysis.netdev import interface_of, is_virtual, netdev_samples
from fabricase.errors import CaptureError
from fabricase.models import MetricSample

REAL_NET = Path(__file__).parents[1] / "fixtures/real/local-vm_procfs-sysfs-net/sys/class/net"


def by_metric(samples, component):
    return {s.metric: s for s in samples if s.component == component}


def test_counters_have_delta_and_rate(tmp_path):
    samples = by_metric(netdev_samples(write_host(tmp_path, "gpu001", degraded_eth2())), "netdev:eth2")
    src = "/sys/class/net/eth2/statistics/rx_crc_errors"
    assert samples["rx_crc_errors"] == MetricSample(
        "gpu001", "netdev:eth2", "rx_crc_errors", 57, "packets", src, 57, 5.7
    )
    assert samples["carrier_changes"].delta == 4 and samples["carrier_changes"].unit == "transitions"
    assert samples["rx_bytes"].unit == "bytes" and samples["rx_bytes"].delta == 0
    assert samples["speed"].value == 100000 and samples["speed"].unit == "Mb/s"
    assert samples["mtu"].value == 9000  # snapshot 0 only
    assert samples["operstate"].value is None and samples["operstate"].note == "up"
    assert samples["carrier"].value == 1


def test_missing_second_snapshot_gives_value_but_no_delta(tmp_path):
    hc = write_host(tmp_path, "h", sysfs_net("eth0", {"statistics/rx_errors": "3\n"}))
    (sample,) = netdev_samples(hc)
    assert (sample.value, sample.delta, sample.rate, sample.note) == (3, None, None, "missing")


def test_unreadable_values_are_none_not_zero(tmp_path):
    hc = write_host(tmp_path, "h", sysfs_net("eth0", {"speed": "-1\n", "carrier": ""}, {"statistics/rx_errors": "x"}))
    samples = by_metric(netdev_samples(hc), "netdev:eth0")
    assert samples["speed"].value is None
    assert samples["carrier"].value is None
    assert samples["rx_errors"].value is None and samples["rx_errors"].delta is None


def test_counter_reset_between_snapshots(tmp_path):
    hc = write_host(
        tmp_path, "h", sysfs_net("eth0", {"statistics/rx_errors": "900\n"}, {"statistics/rx_errors": "2\n"})
    )
    (sample,) = netdev_samples(hc)
    assert (sample.value, sample.delta, sample.note) == (2, None, "reset")


def test_unknown_interval_gives_delta_without_rate(tmp_path):
    samples = by_metric(netdev_samples(write_host(tmp_path, "h", degraded_eth2(), interval_s=None)), "netdev:eth2")
    assert samples["rx_crc_errors"].delta == 57 and samples["rx_crc_errors"].rate is None


def test_real_sysfs_net_tree(tmp_path):
    files = {}
    for path in sorted(REAL_NET.rglob("*")):
        if path.is_file():
            source = "/sys/class/net/" + path.relative_to(REAL_NET).as_posix()
            files[(0, source)] = files[(1, source)] = path.read_text()
    samples = netdev_samples(write_host(tmp_path, "vm", files))
    assert sorted({s.component for s in samples}) == ["netdev:eth0", "netdev:ifb0", "netdev:lo"]
    eth0 = by_metric(samples, "netdev:eth0")
    assert eth0["speed"].value is None  # virtio: -1
    assert eth0["mtu"].value == 1400
    assert eth0["rx_bytes"].delta == 0 and eth0["rx_bytes"].rate == 0.0
    assert len([s for s in eth0.values() if s.source and "/statistics/" in s.source]) == 24
    assert {"carrier_changes", "carrier_up_count", "carrier_down_count"} <= set(eth0)
    assert by_metric(samples, "netdev:lo")["operstate"].note == "unknown"
    assert by_metric(samples, "netdev:ifb0")["speed"].value is None  # empty: EINVAL


def test_index_pointing_at_a_missing_file_is_a_capture_error(tmp_path):
    hc = write_host(tmp_path, "gpu001", degraded_eth2())
    item = hc.item("/sys/class/net/eth2/statistics/rx_crc_errors", 0)
    (tmp_path / "hosts/gpu001" / item.path).unlink()
    with pytest.raises(CaptureError) as info:
        netdev_samples(hc)
    assert info.value.where == f"gpu001:{item.path}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("/sys/class/net/eth0/statistics/rx_errors", "eth0"),
        ("/sys/class/net/eth0/operstate", "eth0"),
        ("/sys/class/net/bonding_masters", None),
        ("/proc/net/dev", None),
    ],
)
def test_interface_of(source, expected):
    assert interface_of(source) == expected


@pytest.mark.parametrize(
    ("name", "virtual"),
    [("lo", True), ("docker0", True), ("veth1a2b", True), ("br-3f2a", True), ("virbr0", True), ("ifb0", True),
     ("eth0", False), ("enp157s0f1np1", False), ("ib0", False), ("bond0", False), ("lo1", False)],
)  # fmt: skip
def test_is_virtual(name, virtual):
    assert is_virtual(name) is virtual
