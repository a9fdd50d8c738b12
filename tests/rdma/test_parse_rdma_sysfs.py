"""parsers.rdma against every real /sys/class/infiniband capture, plus the state/rate/vendor helpers."""

from pathlib import Path

import pytest

from fabricase.parsers.rdma import (
    NORMALIZED,
    detect_vendor,
    normalize,
    parse_counter,
    parse_phys_state,
    parse_port_state,
    parse_rate,
    parse_rdma_port,
    saturated,
)

REAL = Path(__file__).parents[1] / "fixtures/real"
H100 = REAL / "leptonai-gpud/sysfs/sys-class-infiniband-h100.0"
PROCFS = REAL / "prometheus-procfs-sysfs/sys/class/infiniband"
NODE_EXPORTER = REAL / "prometheus-node_exporter-sysfs/sys/class/infiniband"
AZHPC = REAL / "azhpc-diagnostics-samples"


def port_files(port_dir: Path) -> dict[str, str]:
    return {p.relative_to(port_dir).as_posix(): p.read_text() for p in port_dir.rglob("*") if p.is_file()}


def load(tree: Path, device: str, port: int = 1):
    return parse_rdma_port(device, port, port_files(tree / device / "ports" / str(port)))


@pytest.mark.parametrize("device", sorted(p.name for p in H100.iterdir()))
def test_real_h100_connectx7_host(device):
    rec = load(H100, device)
    assert rec.errors == [] and rec.vendor == "mlx5"
    assert (rec.state, rec.state_code, rec.phys_state, rec.phys_state_code) == ("ACTIVE", 4, "LINK_UP", 5)
    if device == "mlx5_bond_0":  # the BlueField-3 bond: Ethernet, 2 lanes
        assert (rec.link_layer, rec.rate_gbps, rec.width, rec.speed) == ("Ethernet", 200.0, 2, "NDR")
    else:
        assert (rec.link_layer, rec.rate_gbps, rec.width, rec.speed) == ("InfiniBand", 400.0, 4, "NDR")
    assert len(rec.raw) == 21 + 25  # PMA counters + hw_counters (lifespan is a setting, not a counter)
    assert "lifespan" not in rec.raw
    assert rec.raw_sources["symbol_error"] == "counters/symbol_error"
    assert rec.raw_sources["out_of_sequence"] == "hw_counters/out_of_sequence"


def test_real_h100_values_a_fabric_engineer_checks():
    rec = load(H100, "mlx5_0")
    n = rec.normalized
    assert n["phy.symbol_errors_uncorrected"] == 0 and n["link.down_events"] == 0 and n["link.error_recovery"] == 0
    assert n["rx.errors"] == 14 and n["rx.switch_relay_errors"] == 1  # lifetime totals on a working port
    assert n["rx.buffer_overrun"] == 15
    assert n["cong.xmit_wait_ticks"] == 2489603687
    assert n["tx.bytes"] == 230442669431839 * 4  # port_xmit_data counts 4-octet words
    assert n["rx.bytes"] == 230539874932483 * 4
    assert n["tx.packets"] == 315487941081 and n["rx.packets"] == 317548853677
    assert n["rdma.retransmits"] == 3  # roce_adp_retrans
    assert n["rdma.out_of_sequence"] == 0 and n["rdma.ack_timeout"] == 0 and n["rdma.rnr_retry_exceeded"] == 0
    assert "cnp.sent" not in n  # IB port: no RoCE congestion counters, absent rather than 0
    # 15 is the maximum of the 4-bit ExcessiveBufferOverrunErrors field: new overruns can no longer be seen.
    assert rec.saturated == ["excessive_buffer_overrun_errors"]


def test_real_procfs_hfi1_mlx4_mlx5():
    hfi = load(PROCFS, "hfi1_0")
    assert (hfi.vendor, hfi.rate_gbps, hfi.speed, hfi.state) == ("hfi1", 100.0, "EDR", "ACTIVE")
    assert hfi.normalized["rx.bytes"] == 345091702026 * 4 and hfi.raw["port_xmit_wait"] == 0
    for port in (1, 2):
        mlx4 = load(PROCFS, "mlx4_0", port)
        assert (mlx4.vendor, mlx4.port, mlx4.rate_gbps, mlx4.speed, mlx4.link_layer) == (
            "mlx4", port, 40.0, "QDR", "InfiniBand")
    assert load(PROCFS, "mlx4_0", 2).normalized["cong.xmit_wait_ticks"] == 3846
    mlx5 = load(PROCFS, "mlx5_0")
    # Hand-edited test data: phys_state reads "4: ACTIVE"; code 4 is PortConfigurationTraining.
    assert (mlx5.phys_state_code, mlx5.rate_gbps, mlx5.width, mlx5.speed) == (4, 25.0, 1, "EDR")
    assert mlx5.normalized["rdma.ack_timeout"] == 131 and mlx5.normalized["rdma.duplicate_requests"] == 41
    assert mlx5.normalized["rdma.req_cqe_errors"] == 3481 and mlx5.normalized["rdma.retransmits"] == 99
    assert mlx5.normalized["rdma.out_of_sequence"] == 1 and mlx5.normalized["rdma.seq_err_nak"] == 1


def test_real_node_exporter_no_pma_and_counters_ext():
    iwarp = load(NODE_EXPORTER, "i40iw0")
    # "N/A (no PMA)": the device has no PortCounters; every counter is absent, not 0, and that is no error.
    assert iwarp.raw == {} and iwarp.normalized == {} and iwarp.errors == []
    assert (iwarp.vendor, iwarp.rate_gbps, iwarp.width, iwarp.speed) == ("i40iw", 10.0, 4, None)
    mlx4 = load(NODE_EXPORTER, "mlx4_0")
    # 64-bit counters_ext win over the 32-bit PortCounters fields.
    assert mlx4.raw["port_rcv_data_64"] == 4631917 and mlx4.normalized["rx.bytes"] == 4631917 * 4
    assert mlx4.normalized["rx.packets"] == 0  # port_rcv_packets_64 (test data says 0; the 32-bit one differs)
    assert mlx4.raw["port_xmit_discards"] == 5 and mlx4.normalized["tx.discards"] == 5
    assert mlx4.raw["port_xmit_wait"] == 4294967295 and mlx4.saturated == ["port_xmit_wait"]
    port2 = load(NODE_EXPORTER, "mlx4_0", 2)
    assert "symbol_error" not in port2.raw and "phy.symbol_errors_uncorrected" not in port2.normalized


def test_real_azhpc_endure_files():
    files = {name: (AZHPC / f"endure_{name}").read_text() for name in ("state", "phys_state", "rate")}
    rec = parse_rdma_port("mlx5_ib0", 1, files)
    assert (rec.state, rec.state_code) == ("ACTIVE", 4)
    assert (rec.phys_state_code, rec.phys_state) == (0, None)  # "0: <unknown>" (a VM), not invented
    assert (rec.rate_gbps, rec.width, rec.speed) == (5.0, 1, "DDR")
    assert rec.errors == []


@pytest.mark.parametrize(("text", "expected"), [
    ("4: ACTIVE\n", (4, "ACTIVE")), ("1: DOWN", (1, "DOWN")), ("2: INIT", (2, "INIT")),
    ("PORT_ACTIVE (4)", (4, "ACTIVE")), ("PORT_DOWN (1)", (1, "DOWN")), ("Active", (4, "ACTIVE")),
    ("Initializing", (2, "INIT")), ("Armed", (3, "ARMED")), ("ACTIVE", (4, "ACTIVE")), ("", (None, None)),
    (None, (None, None)), ("7: SOMETHING", (7, None)), ("bogus", (None, None)),
])  # fmt: skip
def test_port_state_spellings(text, expected):
    assert parse_port_state(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("5: LinkUp", (5, "LINK_UP")), ("LINK_UP (5)", (5, "LINK_UP")), ("POLLING (2)", (2, "POLLING")),
    ("3: Disabled", (3, "DISABLED")), ("Polling", (2, "POLLING")), ("Disabled", (3, "DISABLED")),
    ("LinkUp", (5, "LINK_UP")), ("LINK_UP", (5, "LINK_UP")), ("6: LinkErrorRecovery", (6, "LINK_ERROR_RECOVERY")),
    ("4: PortConfigurationTraining", (4, "PORT_CONFIGURATION_TRAINING")), ("0: <unknown>", (0, None)),
])  # fmt: skip
def test_phys_state_spellings(text, expected):
    assert parse_phys_state(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("400 Gb/sec (4X NDR)", (400.0, 4, "NDR")), ("200 Gb/sec (2X NDR)\n", (200.0, 2, "NDR")),
    ("10 Gb/sec (4X)", (10.0, 4, None)), ("2.5 Gb/sec (1X SDR)", (2.5, 1, "SDR")), ("100 Gb/sec", (100.0, None, None)),
    ("", (None, None, None)), ("fast", (None, None, None)),
])  # fmt: skip
def test_rate(text, expected):
    assert parse_rate(text) == expected


def test_vendor_detection_by_driver_name_and_counters():
    assert detect_vendor("mlx5_3") == "mlx5" and detect_vendor("mlx4_0") == "mlx4"
    assert detect_vendor("efa_0") == "efa" and detect_vendor("rdmap79s0") == "efa"
    assert detect_vendor("bnxt_re0") == "bnxt_re" and detect_vendor("irdma0") == "irdma"
    assert detect_vendor("hfi1_0") == "hfi1"
    # renamed devices: the driver or the counters decide
    assert detect_vendor("rocep8s0f0", ["np_cnp_sent", "out_of_buffer"]) == "mlx5"
    assert detect_vendor("ibp12s0", driver="mlx5_core") == "mlx5"
    assert detect_vendor("rocep65s0f0", ["to_retransmits"]) == "bnxt_re"
    assert detect_vendor("rdmap16s27", ["keep_alive_rcvd"]) == "efa"
    assert detect_vendor("rocep1s0", ["cnpSent", "RetransSegs"]) == "irdma"
    assert detect_vendor("weird0") is None


def test_normalize_prefers_64_bit_and_scales_words_to_bytes():
    assert normalize({"port_xmit_data": 10, "port_xmit_data_64": 20}) == {"tx.bytes": 80}
    assert normalize({"tx_bytes": 7}) == {"tx.bytes": 7}
    assert normalize({"retrans_timeout_events": 3})["rdma.ack_timeout"] == 3  # EFA
    assert normalize({"to_retransmits": 4})["rdma.ack_timeout"] == 4  # bnxt_re
    assert normalize({"RTO": 5})["rdma.ack_timeout"] == 5  # irdma
    assert normalize({"unknown_counter": 1}) == {}
    # heuristic equivalences stay raw-only (telemetry.md (b))
    assert normalize({"res_oos_drop_count": 9}) == {}


def test_every_metric_has_a_unit_and_unique_raw_names():
    seen = {}
    for metric, spec in NORMALIZED.items():
        assert spec.unit and spec.sources and spec.meaning
        for raw, _ in spec.sources:
            assert raw not in seen, f"{raw} feeds both {seen[raw]} and {metric}"
            seen[raw] = metric


def test_counters_missing_unreadable_and_garbage():
    rec = parse_rdma_port("mlx5_0", 1, {
        "counters/symbol_error": "", "hw_counters/out_of_sequence": None, "counters/link_downed": "N/A (no PMA)\n",
        "counters/port_rcv_errors": "12abc\n", "hw_counters/out_of_buffer": "7\n", "rate": "very fast",
        "state": "banana",
    })  # fmt: skip
    assert rec.raw == {"out_of_buffer": 7}  # EIO (empty), unread and N/A are absent, never 0
    assert rec.normalized == {"rdma.out_of_buffer": 7}
    assert any("port_rcv_errors" in e for e in rec.errors) and any("rate" in e for e in rec.errors)
    assert any("state" in e for e in rec.errors)
    assert parse_counter("18446744073709551615\n") == 2**64 - 1 and parse_counter("-1") is None


def test_saturation_is_per_field_width():
    assert saturated("symbol_error", 65535) and not saturated("symbol_error", 65534)
    assert saturated("link_downed", 255) and saturated("local_link_integrity_errors", 15)
    assert saturated("port_xmit_wait", 4294967295) and not saturated("out_of_sequence", 4294967295)


def test_netdev_from_gid_attrs_and_name_collisions():
    rec = parse_rdma_port("mlx5_0", 1, {"gid_attrs/ndevs/0": "\n", "gid_attrs/ndevs/1": "eth3\n",
                                         "counters/symbol_error": "1\n", "hw_counters/symbol_error": "2\n"})
    assert rec.netdev == "eth3"
    assert rec.raw == {"symbol_error": 1, "hw_counters/symbol_error": 2}
