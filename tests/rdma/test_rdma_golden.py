"""Golden end-to-end: host trees -> the real capture script -> rdma samples and findings."""

from __future__ import annotations

import shutil

from rdma_analysis import analyze

from fabricase.models import Severity
from fabricase.parsers.ibtools import parse_ibstat, parse_ibv_devinfo, parse_rdma_link
from hosttrees.rdma import add_bnxt_re_devices, add_efa_devices, add_mlx5_devices

IB = "/sys/class/infiniband"
CORE = {"link.state", "link.phys_state", "link.speed_gbps", "link.width", "tx.bytes", "rx.bytes", "tx.packets",
        "rx.packets", "rdma.ack_timeout"}


def port_metrics(samples, comp):
    return {metric for (c, metric) in samples if c == comp and not metric.startswith("raw:")}


def test_healthy_8_port_infiniband_host(tmp_path, capture_rdma):
    add_mlx5_devices(tmp_path / "host", n=8)
    hc = capture_rdma(tmp_path / "host")
    samples, findings = analyze(hc)
    assert findings == []
    ports = sorted({c for c, _ in samples})
    assert ports == [f"rdma:mlx5_{i}/1" for i in range(8)]
    s = samples[("rdma:mlx5_3/1", "tx.bytes")]
    assert s.delta == 15_625_000_000 * 4 and s.unit == "bytes" and s.note is None
    assert s.source == f"{IB}/mlx5_3/ports/1/counters/port_xmit_data"
    assert samples[("rdma:mlx5_3/1", "link.state")].note == "ACTIVE"
    assert samples[("rdma:mlx5_3/1", "link.speed_gbps")].value == 400.0
    assert samples[("rdma:mlx5_3/1", "phy.symbol_errors_uncorrected")].delta == 0
    assert samples[("rdma:mlx5_3/1", "rx.errors")].value == 14 + 3 * 1  # lifetime, flat: no finding
    assert "cnp.sent" not in port_metrics(samples, "rdma:mlx5_3/1")  # IB: no RoCE congestion counters
    # ~46 counters per port, each as a raw sample too
    assert sum(1 for c, m in samples if c == "rdma:mlx5_0/1" and m.startswith("raw:")) == 46


def test_healthy_roce_host_and_the_tools_outputs(tmp_path, capture_rdma):
    add_mlx5_devices(tmp_path / "host", n=8, link_layer="Ethernet")
    hc = capture_rdma(tmp_path / "host")
    samples, findings = analyze(hc)
    assert findings == []
    assert {"cnp.sent", "cnp.handled", "ecn.rx_marked", "rdma.slow_restart"} <= port_metrics(samples, "rdma:mlx5_0/1")
    # the commands ran through the real script and parse back into the same eight ports
    assert len(parse_ibstat(hc.text("cmd:ibstat")).ports) == 8
    links = parse_rdma_link(hc.text("cmd:rdma-link"))
    assert [(p.device, p.netdev) for p in links.ports][:2] == [("mlx5_0", "eth0"), ("mlx5_1", "eth1")]
    assert parse_ibv_devinfo(hc.text("cmd:ibv-devinfo")).port("mlx5_7").state == "ACTIVE"
    assert hc.item("cmd:rdma-statistic", 1) is not None  # a counter command: both snapshots


def test_degraded_port_is_named_with_its_counters(tmp_path, capture_rdma):
    add_mlx5_devices(tmp_path / "host", n=8, degraded={"mlx5_3": {"symbol_error": 40, "link_downed": 2}})
    hc = capture_rdma(tmp_path / "host")
    _, findings = analyze(hc)
    assert [(f.kind, f.severity, f.component) for f in findings] == [
        ("rdma-link-flap", Severity.MAJOR, "rdma:mlx5_3/1"),
        ("rdma-symbol-errors", Severity.MAJOR, "rdma:mlx5_3/1"),
    ]
    flap, symbols = findings
    assert flap.summary.startswith("mlx5_3/1 (ib3): link_downed +2 (")
    assert symbols.summary.startswith("mlx5_3/1 (ib3): symbol_error +40 (")
    assert "; above the 120/h limit, p = " in symbols.summary
    ev = symbols.evidence[0]
    assert (ev.metric, ev.value, ev.baseline, ev.snapshot) == ("phy.symbol_errors_uncorrected.delta", 40, 0, 1)
    assert ev.source == f"{IB}/mlx5_3/ports/1/counters/symbol_error"
    assert flap.evidence[0].source == f"{IB}/mlx5_3/ports/1/counters/link_downed"


def test_speed_downshift_against_the_hosts_peers(tmp_path, capture_rdma):
    add_mlx5_devices(tmp_path / "host", n=8, degraded={"mlx5_5": {"rate": "200 Gb/sec (2X NDR)"}})
    _, findings = analyze(capture_rdma(tmp_path / "host"))
    assert len(findings) == 1
    f = findings[0]
    assert (f.kind, f.severity, f.component) == ("rdma-speed-downshift", Severity.MAJOR, "rdma:mlx5_5/1")
    assert f.summary == "mlx5_5/1 (ib5): 200 Gb/sec (2X NDR) while 7 of 8 MT4129 InfiniBand ports run 400 Gb/s"
    assert [(e.metric, e.value, e.baseline) for e in f.evidence] == [("link.speed_gbps", 200.0, 400.0),
                                                                     ("link.width", 2, 4)]


def test_ports_down_before_and_during_the_capture(tmp_path, capture_rdma):
    degraded = {"mlx5_1": {"state": "1: DOWN", "phys_state": "2: Polling"},
                "mlx5_6": {"state@s1": "1: DOWN", "phys_state@s1": "3: Disabled"}}
    add_mlx5_devices(tmp_path / "host", n=8, degraded=degraded)
    _, findings = analyze(capture_rdma(tmp_path / "host"))
    assert [(f.kind, f.severity, f.component) for f in findings] == [
        ("rdma-port-down", Severity.CRITICAL, "rdma:mlx5_6/1"),
        ("rdma-port-down", Severity.MAJOR, "rdma:mlx5_1/1"),
    ]
    went_down, polling = findings
    assert "port DOWN, physical state DISABLED (was ACTIVE" in went_down.summary
    assert [(e.metric, e.value, e.snapshot) for e in went_down.evidence] == [
        ("link.state", "DOWN", 1), ("link.phys_state", "DISABLED", 1), ("link.state", "ACTIVE", 0)]
    assert "POLLING" in polling.summary and "cable" in polling.summary


def test_transport_errors_minor_and_major_by_rate(tmp_path, capture_rdma):
    degraded = {"mlx5_2": {"out_of_sequence": 2, "packet_seq_err": 1},
                "mlx5_4": {"local_ack_timeout_err": 30},
                "mlx5_6": {"rnr_nak_retry_err": 1}}
    add_mlx5_devices(tmp_path / "host", n=8, degraded=degraded)
    hc = capture_rdma(tmp_path / "host", interval_s=1)  # rates need a real interval
    _, findings = analyze(hc)
    got = {f.component: (f.kind, f.severity) for f in findings}
    assert got == {
        "rdma:mlx5_2/1": ("rdma-transport-errors", Severity.MINOR),  # a few PSN errors: often the far end
        "rdma:mlx5_4/1": ("rdma-transport-errors", Severity.MAJOR),  # ACK timeouts above 1/s
        "rdma:mlx5_6/1": ("rdma-transport-errors", Severity.MAJOR),  # a QP hit its RNR retry limit
    }
    minor = next(f for f in findings if f.component == "rdma:mlx5_2/1")
    assert "out_of_sequence +2" in minor.summary and "packet_seq_err +1" in minor.summary
    assert minor.confidence == 0.6


def test_efa_and_bnxt_re_share_the_normalized_schema(tmp_path, capture_rdma):
    root = tmp_path / "host"
    add_efa_devices(root, n=4)
    add_bnxt_re_devices(root, n=2)
    add_mlx5_devices(root, n=1, link_layer="Ethernet")
    samples, findings = analyze(capture_rdma(root))
    assert findings == []
    for comp in ("rdma:rdmap79s0/1", "rdma:rdmap127s0/1", "rdma:bnxt_re1/1", "rdma:mlx5_0/1"):
        assert port_metrics(samples, comp) >= CORE, comp
    assert samples[("rdma:rdmap79s0/1", "tx.bytes")].delta == 60_000_000_000  # EFA counts bytes
    assert samples[("rdma:rdmap79s0/1", "rdma.ack_timeout")].source.endswith("/retrans_timeout_events")
    assert samples[("rdma:bnxt_re1/1", "rdma.ack_timeout")].source.endswith("/to_retransmits")
    assert samples[("rdma:bnxt_re0/1", "cnp.sent")].source.endswith("/tx_cnp_pkts")
    assert samples[("rdma:mlx5_0/1", "cnp.sent")].source.endswith("/np_cnp_sent")
    assert samples[("rdma:rdmap79s0/1", "rdma.remote_unreachable")].value == 0


def test_efa_degraded(tmp_path, capture_rdma):
    add_efa_devices(tmp_path / "host", n=4, degraded={"rdmap111s0": {"unresponsive_remote_events": 3,
                                                                      "rx_drops": 5}})
    _, findings = analyze(capture_rdma(tmp_path / "host"))
    assert [(f.kind, f.component) for f in findings] == [("rdma-port-errors", "rdma:rdmap111s0/1"),
                                                          ("rdma-transport-errors", "rdma:rdmap111s0/1")]
    assert "rx_drops +5" in findings[0].summary and "unresponsive_remote_events +3" in findings[1].summary


def test_saturated_reset_and_wrapped_counters(tmp_path, capture_rdma):
    degraded = {
        "mlx5_0": {"symbol_error@s0": 65535},  # stuck at the 16-bit maximum
        "mlx5_1": {"symbol_error@s0": 100, "symbol_error": -100},  # cleared (perfquery -x): a reset, no finding
        "mlx5_2": {"out_of_sequence@s0": 4294967290, "out_of_sequence": -(4294967290 - 5)},  # 32-bit q counter
    }
    add_mlx5_devices(tmp_path / "host", n=4, degraded=degraded)
    samples, findings = analyze(capture_rdma(tmp_path / "host"))
    stuck = samples[("rdma:mlx5_0/1", "phy.symbol_errors_uncorrected")]
    assert (stuck.value, stuck.delta, stuck.note) == (65535, None, "saturated")
    cleared = samples[("rdma:mlx5_1/1", "phy.symbol_errors_uncorrected")]
    assert (cleared.value, cleared.delta, cleared.note) == (0, None, "reset")
    wrapped = samples[("rdma:mlx5_2/1", "rdma.out_of_sequence")]
    assert (wrapped.delta, wrapped.note) == (11, "wrap")
    assert [(f.kind, f.severity, f.component) for f in findings] == [
        ("rdma-transport-errors", Severity.MINOR, "rdma:mlx5_2/1"),  # the wrapped increase is still seen
        ("rdma-counter-saturated", Severity.INFO, "rdma:mlx5_0/1"),
    ]
    assert "symbol_error=65535" in findings[1].summary


def test_unreadable_hw_counters_fall_back_to_rdma_statistic(tmp_path, capture_rdma):
    root = tmp_path / "host"
    add_mlx5_devices(root, n=4, link_layer="Ethernet", degraded={"mlx5_2": {"out_of_sequence": 3}})
    hw = root / "sys/class/infiniband/mlx5_2/ports/1/hw_counters"
    shutil.rmtree(root / ".fabricase/s1/sys/class/infiniband/mlx5_2/ports/1/hw_counters")
    for f in hw.iterdir():
        f.unlink()
        f.mkdir()  # reading a directory fails like EIO: the item holds no value
    hc = capture_rdma(root)
    item = hc.item(f"{IB}/mlx5_2/ports/1/hw_counters/out_of_sequence", 0)
    assert hc.read(item).strip() == b""
    samples, findings = analyze(hc)
    s = samples[("rdma:mlx5_2/1", "rdma.out_of_sequence")]
    assert (s.source, s.delta) == ("cmd:rdma-statistic", 3)
    assert [(f.kind, f.component) for f in findings] == [("rdma-transport-errors", "rdma:mlx5_2/1")]
    assert findings[0].evidence[0].source == "cmd:rdma-statistic"


def test_no_infiniband_class_no_rdma_items(tmp_path, capture_rdma):
    (tmp_path / "host/sys/class/net/eth0").mkdir(parents=True)
    hc = capture_rdma(tmp_path / "host")
    assert [it for it in hc.items if it.collector == "rdma"] == []
    assert analyze(hc) == ({}, [])
