"""Golden end-to-end tests of the ethtool collector: a recorded 8-port host through the real capture script, then
the samples and rules of analysis.ethernet."""

from __future__ import annotations

import pytest

from fabricase.analysis import ethernet
from fabricase.models import Severity
from hosttrees import record_command
from hosttrees.ethernet import add_roce_netdevs, ethtool_stats_text, real_counters


def _by(samples, component, metric):
    return next(s for s in samples if s.component == component and s.metric == metric)


def test_healthy_mlx5_host(tmp_path, capture_tree):
    root = tmp_path / "host"
    ports = add_roce_netdevs(root)
    hc = capture_tree(root, "ethtool")
    stats = hc.item("cmd:ethtool-stats", 1)
    assert stats is not None and stats.rc == 0 and not stats.truncated
    samples = ethernet.samples(hc)
    assert sorted({s.component for s in samples}) == [f"netdev:{p}" for p in ports]
    # every port-level raw counter of the real mlx5 capture (143) plus the 11 PFC/BER names, none per queue
    raw = [s for s in samples if s.component == "netdev:eth0" and s.metric.startswith("raw:")]
    assert len(raw) == 154 and not any(s.metric.startswith(("raw:rx0_", "raw:tx15_", "raw:ch0_")) for s in raw)
    symbols = _by(samples, "netdev:eth0", "phy.symbol_errors_uncorrected")
    assert (symbols.value, symbols.delta, symbols.unit, symbols.source) == (0, 0, "symbols", "cmd:ethtool-stats")
    assert _by(samples, "netdev:eth2", "raw:tx_pci_signal_integrity").value == 36  # the real 34, + port index
    assert _by(samples, "netdev:eth0", "pfc.rx_pause_frames.p3").delta == 0
    assert not [s for s in samples if s.metric == "pfc.rx_pause_frames.p4"]  # PFC off there: absent, not 0
    assert _by(samples, "netdev:eth0", "phy.ber_post_fec").value == 0.0
    assert _by(samples, "netdev:eth7", "link.speed_gbps").value == 400.0
    assert _by(samples, "netdev:eth7", "link.lanes").value == 4
    assert _by(samples, "netdev:eth1", "link.fec").note == "RS"
    assert _by(samples, "netdev:eth1", "module.temperature_c").value == 42.5
    assert _by(samples, "netdev:eth1", "module.rx_power_mw.lane4").value == 0.9603
    assert [f for rule in ethernet.RULES for f in rule(hc, samples)] == []


def test_degraded_mlx5_host_names_port_and_counters(tmp_path, capture_tree):
    root = tmp_path / "host"
    add_roce_netdevs(root, degraded="eth3", pfc_storm="eth2", discards="eth5", downshift="eth6")
    hc = capture_tree(root, "ethtool")
    samples = ethernet.samples(hc)
    findings = {f.kind: f for rule in ethernet.RULES for f in rule(hc, samples)}
    assert sorted(findings) == ["link-speed-downshift", "nic-discards", "pfc-storm", "phy-errors"]

    phy = findings["phy-errors"]
    assert (phy.severity, phy.component, phy.confidence) == (Severity.MAJOR, "netdev:eth3", 0.95)
    assert phy.summary.startswith("eth3: rx_pcs_symbol_err_phy +1200 (") and "rx_crc_errors_phy +45 (" in phy.summary
    assert phy.summary.endswith("; post-FEC BER 3e-09")
    assert [(e.metric, e.value, e.source, e.snapshot) for e in phy.evidence] == [
        ("phy.symbol_errors_uncorrected.delta", 1200, "cmd:ethtool-stats", 1),
        ("phy.fcs_errors.delta", 45, "cmd:ethtool-stats", 1),
        ("phy.ber_post_fec", pytest.approx(3e-9), "cmd:ethtool-stats", 1),
    ]

    pfc = findings["pfc-storm"]
    assert (pfc.severity, pfc.component) == (Severity.MAJOR, "netdev:eth2")
    assert "tx_pause_storm_error_events +1" in pfc.summary and "priority 3 paused" in pfc.summary
    assert [(e.metric, e.value) for e in pfc.evidence][:2] == [("pfc.pause_storm_events.delta", 1),
                                                               ("pfc.rx_pause_us.p3.delta", 4_000_000)]

    discards = findings["nic-discards"]
    assert (discards.severity, discards.component) == (Severity.MINOR, "netdev:eth5")
    assert "rx_discards_phy +3000" in discards.summary and "rx_out_of_buffer +120" in discards.summary

    slow = findings["link-speed-downshift"]
    assert (slow.severity, slow.component, slow.confidence) == (Severity.MAJOR, "netdev:eth6", 0.9)
    assert slow.summary == ("eth6: link at 200 Gb/s, 2 lanes; 7 other mlx5_core port(s) on this host run at "
                            "400 Gb/s")
    assert [(e.metric, e.value, e.baseline) for e in slow.evidence] == [("link.speed_gbps", 200.0, 400.0),
                                                                        ("link.lanes", 2, 4)]


def test_degraded_bnxt_host_uses_broadcom_names(tmp_path, capture_tree):
    root = tmp_path / "host"
    add_roce_netdevs(root, n=2, driver="bnxt_en", degraded="eth1")
    hc = capture_tree(root, "ethtool")
    samples = ethernet.samples(hc)
    # real bnxt lifetime values: ring discards are history, not an increase
    assert _by(samples, "netdev:eth0", "rx.discards_nobuf_host").value == 655430134
    assert _by(samples, "netdev:eth0", "pfc.rx_pause_us.p3").delta == 0
    findings = [f for rule in ethernet.RULES for f in rule(hc, samples)]
    assert [(f.kind, f.component) for f in findings] == [("phy-errors", "netdev:eth1")]
    assert "rx_pcs_symbol_err +1200" in findings[0].summary and "rx_fcs_err_frames +45" in findings[0].summary
    assert "post-FEC BER" not in findings[0].summary  # rx_bits did not move in this recording: no BER, no guess


def test_ports_without_a_device_are_not_physical(tmp_path, capture_tree):
    root = tmp_path / "host"
    add_roce_netdevs(root, n=1)
    (root / "sys/class/net/bond0").mkdir(parents=True)
    (root / "sys/class/net/lo").mkdir(parents=True)
    hc = capture_tree(root, "ethtool")
    text = hc.text("cmd:ethtool-link")
    assert text.startswith("### eth0\nSettings for eth0:") and "### bond0" not in text and "### lo" not in text
    assert hc.item("cmd:ip-link").rc == 0


def test_counter_reset_between_snapshots_is_not_an_increase(tmp_path, capture_tree):
    """A driver reload during the interval zeroes the counters: no delta, note "reset", no finding."""
    root = tmp_path / "host"
    add_roce_netdevs(root, n=2, degraded="eth1")
    zeroed = {name: 0 for name in real_counters()}
    record_command(root, "ethtool", ["-S", "eth1"], ethtool_stats_text(zeroed), snapshot=1)
    hc = capture_tree(root, "ethtool")
    samples = ethernet.samples(hc)
    packets = _by(samples, "netdev:eth1", "raw:rx_packets")
    assert (packets.value, packets.delta, packets.rate, packets.note) == (0, None, None, "reset")
    symbols = _by(samples, "netdev:eth1", "phy.symbol_errors_uncorrected")
    assert (symbols.delta, symbols.note) == (None, "reset")  # 1 -> 0 is a reset too, not a wrap
    assert [f for rule in ethernet.RULES for f in rule(hc, samples)] == []


def _pause_host(tmp_path, v0_us: int, v1_us: int):
    """One mlx5 port, 5 s apart, whose rx_prio3_pause_duration reads v0_us then v1_us (everything else still)."""
    from analysis.capture_builder import write_host

    c0 = real_counters() | {"rx_prio3_pause_duration": v0_us}
    c1 = real_counters() | {"rx_prio3_pause_duration": v1_us}
    files = {(0, "cmd:ethtool-stats"): "### eth0\n" + ethtool_stats_text(c0),
             (1, "cmd:ethtool-stats"): "### eth0\n" + ethtool_stats_text(c1)}
    return write_host(tmp_path, "gpu001", files, interval_s=5.0)


def test_driver_reload_read_as_a_32_bit_wrap_is_not_a_pause_storm(tmp_path):
    """67 min of pause since boot (just under 2^32 us), then a reload: the 32-bit wrap heuristic would infer ~5 min
    of pause in 5 s; a pause time cannot exceed the interval, so it is a reset (rate unknown), and no pfc-storm."""
    hc = _pause_host(tmp_path, 4_000_000_000, 1_500)
    samples = ethernet.samples(hc)
    paused = _by(samples, "netdev:eth0", "pfc.rx_pause_us.p3")
    assert (paused.note, paused.delta) == ("reset", None)
    assert ethernet.pfc_storm(hc, samples) == []


@pytest.mark.parametrize(("v0_us", "v1_us", "share"), [(2**32 - 1_000_000, 2_000_000, 0.6),  # a real 32-bit wrap
                                                       (10**9, 10**9 + 4_000_000, 0.8)])
def test_pause_time_within_the_interval_is_a_storm(tmp_path, v0_us, v1_us, share):
    hc = _pause_host(tmp_path, v0_us, v1_us)
    samples = ethernet.samples(hc)
    [storm] = ethernet.pfc_storm(hc, samples)
    assert (storm.kind, storm.severity, storm.component) == ("pfc-storm", Severity.MAJOR, "netdev:eth0")
    assert f"priority 3 paused {share:.0%} of 5 s by pause frames received" in storm.summary
    assert ("pfc.rx_pause_share.p3", share) in [(e.metric, e.value) for e in storm.evidence]
