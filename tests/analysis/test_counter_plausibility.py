"""Plausibility of every counter (issue 16): a drop is a wrap only if the hardware could have counted that much in
the interval, a rise faster than the hardware can count is unknown, and a reboot or a reset between the snapshots
leaves the host's (the component's) rates unknown, said in the host's status."""

from __future__ import annotations

import math

import pytest
from capture_builder import make_capture, write_host
from hypothesis import given
from hypothesis import strategies as st

from fabricase.analysis import analyze, ethernet
from fabricase.analysis.rates import (
    RATE_SLACK,
    RESET_NOTE,
    Delta,
    counter_delta,
    physical_max_rate,
    reboot_between,
    settle_counters,
)
from fabricase.models import HostStatus, MetricSample, SnapshotInfo

U32 = 2**32


@pytest.mark.parametrize(("unit", "gbps", "per_s"), [
    ("us", None, 1e6),  # a pause time grows at most one second per second, whatever the link
    ("bytes", 400, 50e9),
    ("words", 400, 12.5e9),  # IB port_xmit_data: 4-octet words
    ("bits", 200, 200e9),
    ("packets", 400, 400e9 / 160),
    ("errors", 400, 400e9),
    ("bytes", None, None),
    ("bytes", 0, None),
    ("count", 400, None),  # a raw counter of unknown meaning is not bounded
    ("ticks", 400, None),
])
def test_physical_max_rate(unit, gbps, per_s):
    assert physical_max_rate(unit, gbps) == per_s


@pytest.mark.parametrize(("v0", "v1", "interval", "max_rate", "expected"), [
    # 67 min of pause since boot, then a reload: the quarter-range rule alone reads ~5 min of pause in 5 s
    (4_000_000_000, 1_500, 5.0, 1e6, Delta(None, None, "reset")),
    (U32 - 1_000_000, 2_000_000, 5.0, 1e6, Delta(3_000_000, 600_000.0, "wrap")),  # 3 s of pause: a real wrap
    # a rise faster than the hardware: 62.5 GB in 0.1 s on a 400 Gb/s port
    (0, 62_500_000_000, 0.1, 50e9, Delta(None, None, "implausible")),
    (0, 62_500_000_000, 5.0, 50e9, Delta(62_500_000_000, 12.5e9)),
    (0, int(50e9 * 5 * RATE_SLACK), 5.0, 50e9, Delta(int(50e9 * 5 * RATE_SLACK), 50e9 * RATE_SLACK)),
    (0, int(50e9 * 5 * RATE_SLACK) + 1, 5.0, 50e9, Delta(None, None, "implausible")),
    # no interval or no maximum: the width rule alone, as before
    (U32 - 10, 5, None, 1e6, Delta(15, None, "wrap")),
    (U32 - 10, 5, 5.0, None, Delta(15, 3.0, "wrap")),
    (0, 10**15, 5.0, 0.0, Delta(10**15, 2e14)),  # a maximum of 0 (link down) says nothing
    (None, 5, 5.0, 1e6, Delta(None, None, "missing")),
])
def test_counter_delta_with_a_maximum_rate(v0, v1, interval, max_rate, expected):
    assert counter_delta(v0, v1, interval, max_rate=max_rate) == expected


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.floats(0.01, 1e4), st.floats(1.0, 1e12))
def test_no_delta_above_what_the_hardware_can_count(v0, v1, interval, max_rate):
    d = counter_delta(v0, v1, interval, max_rate=max_rate)
    if d.delta is not None:
        assert d.delta <= max_rate * interval * RATE_SLACK
    else:
        assert d.note in ("reset", "implausible") and d.rate is None


def _snaps(u0, u1, e0=1.8e9, e1=1.8e9 + 5):
    return [SnapshotInfo(0, e0, u0, None), SnapshotInfo(1, e1, u1, None)]


@pytest.mark.parametrize(("snaps", "rebooted"), [
    (_snaps(1000.0, 1005.0), False),
    (_snaps(1000.0, 3.0), True),  # uptime went backwards
    (_snaps(30.0, 40.0, e1=1.8e9 + 600), True),  # 10 min of wall time, 40 s of uptime: booted in between
    (_snaps(30.0, 40.0, e1=1.8e9 + 11), False),  # an NTP slew of a second is not a reboot
    (_snaps(None, 3.0), False),
    ([SnapshotInfo(0, None, 1000.0, None)], False),
])
def test_reboot_between(snaps, rebooted):
    assert (reboot_between(snaps) is not None) is rebooted


def _sample(component: str, metric: str, delta, note=None) -> MetricSample:
    return MetricSample("h1", component, metric, 5, "packets", "src", delta, None if delta is None else delta / 5,
                        note)


def test_a_reset_counter_resets_its_component_and_a_reboot_the_host(tmp_path):
    hc = write_host(tmp_path, "h1", {(0, "cmd:x"): "", (1, "cmd:x"): ""}, interval_s=5.0)
    samples = [_sample("rdma:mlx5_0/1", "rx.errors", None, "reset"),
               _sample("rdma:mlx5_0/1", "rdma.out_of_sequence", 2**30, "wrap"),  # the reload, read as a wrap
               _sample("rdma:mlx5_0/1", "rdma.ack_timeout", 4),  # 3 -> 7 after the reload: not 4 in 5 s
               _sample("rdma:mlx5_0/1", "link.state", None, "ACTIVE"),  # a gauge stays
               _sample("rdma:mlx5_1/1", "rdma.ack_timeout", 4)]  # another device: untouched
    out, note = settle_counters(hc, samples)
    assert [(s.delta, s.note) for s in out] == [(None, "reset"), (None, "reset"), (None, "reset"),
                                                (None, "ACTIVE"), (4, None)]
    assert note == f"{RESET_NOTE} (rdma:mlx5_0/1)"
    hc.snapshots = _snaps(1000.0, 3.0)
    out, note = settle_counters(hc, samples[2:])
    assert [(s.delta, s.note) for s in out] == [(None, "reset"), (None, "ACTIVE"), (None, "reset")]
    assert note == f"{RESET_NOTE} (the host rebooted: uptime 1000 s, then 3 s)"
    assert settle_counters(hc.__class__("h2", HostStatus.OK, "t", snapshots=_snaps(1.0, 6.0)), samples[2:]) == (
        samples[2:], None)


def _mlx5_host(tmp_path, name: str, pause0: int, pause1: int, *, snapshots=None):
    """One ConnectX port whose rx_prio3_pause_duration reads pause0 then pause1 in 5 s; its symbol errors rise
    by 3 (after a reboot, that is the count since boot, not 3 in 5 s)."""
    stats = "NIC statistics:\n     rx_prio3_pause: {f}\n     rx_prio3_pause_duration: {us}\n" \
            "     rx_pcs_symbol_err_phy: {sym}\n"
    files = {(0, "cmd:ethtool-stats"): "### eth0\n" + stats.format(f=10, us=pause0, sym=0),
             (1, "cmd:ethtool-stats"): "### eth0\n" + stats.format(f=20, us=pause1, sym=3)}
    hc = write_host(tmp_path, name, files, interval_s=5.0)
    if snapshots is not None:
        hc.snapshots = snapshots
    return hc


def test_a_reload_at_67_min_of_pause_is_no_storm_and_the_host_says_so(tmp_path):
    """The issue's case: a reset read as a 32-bit wrap gave minutes of pause per second. Now the rise is not a
    plausible wrap: rate unknown, no finding, and the host's status says why."""
    hc = _mlx5_host(tmp_path, "gpu001", 4_000_000_000, 1_500)
    paused = next(s for s in ethernet.samples(hc) if s.metric == "pfc.rx_pause_us.p3")
    assert (paused.delta, paused.rate, paused.note) == (None, None, "reset")
    capture = make_capture(tmp_path, [hc])
    assert [f for f in analyze(capture) if f.host == "gpu001"] == []
    assert (hc.status, hc.reason) == (HostStatus.PARTIAL, f"{RESET_NOTE} (netdev:eth0)")
    analyze(capture)  # analyzed again (the bundle after the terminal): said once
    assert hc.reason == f"{RESET_NOTE} (netdev:eth0)"


def test_pause_longer_than_the_interval_is_implausible_not_a_storm(tmp_path):
    hc = _mlx5_host(tmp_path, "gpu001", 10**9, 10**9 + 60_000_000)  # 60 s of pause in 5 s
    paused = next(s for s in ethernet.samples(hc) if s.metric == "pfc.rx_pause_us.p3")
    assert (paused.delta, paused.note) == (None, "implausible")
    assert ethernet.pfc_storm(hc, ethernet.samples(hc)) == []


def test_a_reboot_leaves_every_rate_of_the_host_unknown(tmp_path):
    hc = _mlx5_host(tmp_path, "gpu001", 10**9, 10**9 + 4_000_000, snapshots=_snaps(86_400.0, 2.0))
    capture = make_capture(tmp_path, [hc])
    assert [f for f in analyze(capture) if f.host == "gpu001"] == []  # 80% pause and +3 symbols: since boot
    assert hc.status == HostStatus.PARTIAL and hc.reason.startswith(RESET_NOTE + " (the host rebooted")
    healthy = _mlx5_host(tmp_path, "gpu002", 10**9, 10**9 + 4_000_000)
    assert {f.kind for f in analyze(make_capture(tmp_path, [healthy]))} >= {"pfc-storm"}  # the same, no reboot
    assert healthy.status == HostStatus.OK and healthy.reason is None
    assert math.isclose(next(s for s in ethernet.samples(healthy) if s.metric == "pfc.rx_pause_us.p3").rate, 8e5)


def test_netdev_bytes_above_line_rate_are_unknown_but_a_software_interface_is_not_bounded(tmp_path):
    from capture_builder import sysfs_net

    from fabricase.analysis.netdev import netdev_samples

    files = {}
    for interface in ("ens3", "veth12ab"):
        files |= sysfs_net(interface, {"speed": "25000\n", "statistics/rx_bytes": "0\n", "statistics/rx_errors": "0\n"},
                           {"speed": "25000\n", "statistics/rx_bytes": f"{10**12}\n", "statistics/rx_errors": "2\n"})
    hc = write_host(tmp_path, "h1", files, interval_s=5.0)
    got = {(s.component, s.metric): (s.delta, s.note) for s in netdev_samples(hc)}
    assert got[("netdev:ens3", "rx_bytes")] == (None, "implausible")  # 1.6 Tb/s on a 25 Gb/s port
    assert got[("netdev:ens3", "rx_errors")] == (2, None)
    assert got[("netdev:veth12ab", "rx_bytes")] == (10**12, None)  # a veth's "speed" is not what it can move
