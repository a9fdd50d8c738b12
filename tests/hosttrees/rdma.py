"""RDMA host trees: /sys/class/infiniband devices with the counter names real drivers expose, plus recorded
`rdma link`, `rdma statistic show`, `ibstat` and `ibv_devinfo -v` outputs that agree with the files.

Counter names come from the real captures (tests/fixtures/real/leptonai-gpud/sysfs: ConnectX-7 IB;
rdma-statistic_and_efa: mlx5 RoCE hw_counters and EFA hw_counters) and, for bnxt_re and EFA's newer counters,
from the kernel drivers' name tables (telemetry.md a.2, a.3). Values start from the real H100 host's.

`degraded` maps "mlx5_3" (port 1) or "mlx5_3/2" to changes:
    {"symbol_error": 40, "link_downed": 2}    counters that grow by that much in snapshot 1
    {"symbol_error@s0": 65535}                a counter's snapshot-0 value
    {"rate": "200 Gb/sec (2X NDR)"}           state / phys_state / rate in both snapshots
    {"state@s1": "1: DOWN"}                   ... or in snapshot 1 only (it changed during the interval)
"""

from __future__ import annotations

import json
from pathlib import Path

from hosttrees import record_command, write_file, write_s1

__all__ = [
    "BNXT_RE_HW_COUNTERS", "EFA_HW_COUNTERS", "MLX5_HW_COUNTERS_IB", "MLX5_HW_COUNTERS_ROCE", "MLX5_PMA_COUNTERS",
    "add_bnxt_re_devices", "add_efa_devices", "add_mlx5_devices",
]  # fmt: skip

IB = "/sys/class/infiniband"
MLX5_PMA_COUNTERS = (
    "VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
    "local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets", "port_rcv_constraint_errors",
    "port_rcv_data", "port_rcv_errors", "port_rcv_packets", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards",
    "port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets",
)  # fmt: skip
MLX5_HW_COUNTERS_IB = (
    "duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err", "out_of_buffer",
    "out_of_sequence", "packet_seq_err", "req_cqe_error", "req_cqe_flush_error", "req_remote_access_errors",
    "req_remote_invalid_request", "resp_cqe_error", "resp_cqe_flush_error", "resp_local_length_error",
    "resp_remote_access_errors", "rnr_nak_retry_err", "roce_adp_retrans", "roce_adp_retrans_to",
    "roce_slow_restart", "roce_slow_restart_cnps", "roce_slow_restart_trans", "rx_atomic_requests",
    "rx_dct_connect", "rx_icrc_encapsulated", "rx_read_requests", "rx_write_requests",
)  # fmt: skip
# RoCE ports add the congestion (DCQCN) counters, as in the `rdma statistic show` capture.
MLX5_HW_COUNTERS_ROCE = (*MLX5_HW_COUNTERS_IB, "np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled",
                         "rp_cnp_ignored")
EFA_HW_COUNTERS = (
    "alloc_pd_err", "alloc_ucontext_err", "cmds_err", "completed_cmds", "create_ah_err", "create_cq_err",
    "create_qp_err", "keep_alive_rcvd", "lifespan", "mmap_err", "no_completion_cmds", "rdma_read_bytes",
    "rdma_read_resp_bytes", "rdma_read_wr_err", "rdma_read_wrs", "recv_bytes", "recv_wrs", "reg_mr_err",
    "rx_bytes", "rx_drops", "rx_pkts", "send_bytes", "send_wrs", "submitted_cmds", "tx_bytes", "tx_pkts",
    # newer drivers / Nitro versions
    "rdma_write_wrs", "rdma_write_bytes", "rdma_write_wr_err", "rdma_write_recv_bytes", "retrans_bytes",
    "retrans_pkts", "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events",
)  # fmt: skip
BNXT_RE_HW_COUNTERS = (
    "active_pds", "active_ahs", "active_qps", "active_srqs", "active_cqs", "active_mrs", "active_mws", "rx_pkts",
    "rx_bytes", "tx_pkts", "tx_bytes", "recoverable_errors", "rx_roce_errors", "rx_roce_discards",
    "to_retransmits", "seq_err_naks_rcvd", "max_retry_exceeded", "rnr_naks_rcvd", "missing_resp",
    "unrecoverable_err", "bad_resp_err", "local_qp_op_err", "local_protection_err", "mem_mgmt_op_err",
    "remote_invalid_req_err", "remote_access_err", "remote_op_err", "dup_req", "res_exceed_max",
    "res_length_mismatch", "res_exceeds_wqe", "res_opcode_err", "res_rx_invalid_rkey", "res_rx_domain_err",
    "res_rx_no_perm", "res_rx_range_err", "res_tx_invalid_rkey", "res_tx_domain_err", "res_tx_no_perm",
    "res_tx_range_err", "res_irrq_oflow", "res_unsup_opcode", "res_unaligned_atomic", "res_rem_inv_err",
    "res_mem_err", "res_srq_err", "res_cmp_err", "res_invalid_dup_rkey", "res_wqe_format_err", "res_cq_load_err",
    "res_srq_load_err", "res_tx_pci_err", "res_rx_pci_err", "oos_drop_count", "tx_atomic_req", "tx_read_req",
    "tx_read_resp", "tx_write_req", "tx_send_req", "rx_atomic_req", "rx_read_req", "rx_read_resp",
    "rx_write_req", "rx_send_req", "rx_roce_only_pkts", "rx_roce_only_bytes", "rx_roce_good_pkts",
    "rx_roce_good_bytes", "rx_out_of_buffer", "tx_cnp_pkts", "rx_cnp_pkts", "rx_ecn_marked_pkts",
)  # fmt: skip

# Lifetime values of the real ConnectX-7 host (mlx5_0), except excessive_buffer_overrun_errors: 15 there is the
# 4-bit field's maximum (saturated), which a healthy golden host should not show.
_MLX5_VALUES = {
    "excessive_buffer_overrun_errors": 2, "port_rcv_data": 230539874932483, "port_rcv_errors": 14,
    "port_rcv_packets": 317548853677, "port_rcv_switch_relay_errors": 1, "port_xmit_data": 230442669431839,
    "port_xmit_packets": 315487941081, "port_xmit_wait": 2489603687, "unicast_rcv_packets": 317548853677,
    "unicast_xmit_packets": 315487941081, "lifespan": 12, "roce_adp_retrans": 3, "rx_dct_connect": 422237,
    "rx_read_requests": 9187392, "rx_write_requests": 3809045607, "np_cnp_sent": 120345, "rp_cnp_handled": 98761,
    "np_ecn_marked_roce_packets": 240690,
}  # fmt: skip
# Traffic during a 5 s interval at ~100 Gb/s: counters that healthy ports move.
_MLX5_TRAFFIC = {"port_xmit_data": 15_625_000_000, "port_rcv_data": 15_600_000_000, "port_xmit_packets": 15_258_789,
                 "port_rcv_packets": 15_234_375, "unicast_xmit_packets": 15_258_789,
                 "unicast_rcv_packets": 15_234_375, "rx_write_requests": 15_000_000, "port_xmit_wait": 120_000}
_EFA_VALUES = {"completed_cmds": 105, "submitted_cmds": 108, "keep_alive_rcvd": 87, "lifespan": 12,
               "tx_bytes": 81_000_000_000_000, "rx_bytes": 80_500_000_000_000, "tx_pkts": 9_800_000_000,
               "rx_pkts": 9_700_000_000, "send_wrs": 1_200_000, "recv_wrs": 1_200_000, "retrans_pkts": 1200}
_EFA_TRAFFIC = {"tx_bytes": 60_000_000_000, "rx_bytes": 59_000_000_000, "tx_pkts": 7_000_000, "rx_pkts": 6_900_000,
                "keep_alive_rcvd": 1}
_BNXT_VALUES = {"tx_bytes": 41_000_000_000_000, "rx_bytes": 40_000_000_000_000, "tx_pkts": 5_000_000_000,
                "rx_pkts": 4_900_000_000, "active_qps": 64, "active_pds": 2, "active_cqs": 130, "active_mrs": 40,
                "tx_cnp_pkts": 5012, "rx_cnp_pkts": 4410, "rx_ecn_marked_pkts": 7650}
_BNXT_TRAFFIC = {"tx_bytes": 30_000_000_000, "rx_bytes": 29_000_000_000, "tx_pkts": 3_600_000, "rx_pkts": 3_500_000}


def _registry(root: Path) -> Path:
    return root / ".fabricase" / "rdma-ports.json"


def _port(root: Path, spec: dict, degraded: dict) -> None:
    """Write one port's files (and its snapshot-1 overlay) from spec; record it for the tool outputs."""
    base = f"{IB}/{spec['device']}/ports/{spec['port']}"
    attrs = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": spec["rate"]}
    attrs.update({k: v for k, v in degraded.items() if k in attrs})
    attrs1 = {**attrs, **{k[:-3]: v for k, v in degraded.items() if k.endswith("@s1")}}
    for name in attrs:
        write_file(root, f"{base}/{name}", attrs[name] + "\n")
        write_s1(root, f"{base}/{name}", attrs1[name] + "\n")
    write_file(root, f"{base}/link_layer", spec["link_layer"] + "\n")
    if spec.get("netdev"):
        write_file(root, f"{base}/gid_attrs/ndevs/0", spec["netdev"] + "\n")
    s0, s1 = {}, {}
    for folder, names in spec["counters"].items():
        for name in names:
            v0 = degraded.get(f"{name}@s0", spec["values"].get(name, 0))
            v1 = v0 + spec["traffic"].get(name, 0) + int(degraded.get(name, 0))
            write_file(root, f"{base}/{folder}/{name}", f"{v0}\n")
            if v1 != v0:
                write_s1(root, f"{base}/{folder}/{name}", f"{v1}\n")
            if folder == "hw_counters" and name != "lifespan":
                s0[name], s1[name] = v0, v1
    spec.update(state=attrs, state1=attrs1, hw0=s0, hw1=s1)
    ports = json.loads(_registry(root).read_text()) if _registry(root).exists() else []
    _registry(root).parent.mkdir(parents=True, exist_ok=True)
    _registry(root).write_text(json.dumps([*ports, spec]))


def _device(root: Path, dev: str, attrs: dict[str, str]) -> None:
    for name, value in attrs.items():
        write_file(root, f"{IB}/{dev}/{name}", value + "\n")


def _scaled(values: dict[str, int], index: int) -> dict[str, int]:
    return {k: v if k == "lifespan" else v + index * (v // 10) for k, v in values.items()}


def _changes(degraded: dict | None, dev: str, port: int) -> dict:
    degraded = degraded or {}
    return degraded.get(f"{dev}/{port}") or (degraded.get(dev, {}) if port == 1 else {})


def add_mlx5_devices(root: Path, n: int = 8, ports: int = 1, link_layer: str = "InfiniBand",
                     degraded: dict | None = None, rate: str = "400 Gb/sec (4X NDR)") -> list[str]:
    """n ConnectX-7 devices mlx5_0.. with `ports` ports each; RoCE ports map to eth0.., IB ports to ib0..."""
    hw = MLX5_HW_COUNTERS_ROCE if link_layer == "Ethernet" else MLX5_HW_COUNTERS_IB
    names = []
    for i in range(n):
        dev = f"mlx5_{i}"
        _device(root, dev, {"node_type": "1: CA", "fw_ver": "28.41.1000", "hca_type": "MT4129",
                            "board_id": "MT_0000000838", "node_guid": f"a088:c203:00da:{0x6300 + i:04x}",
                            "device/vendor": "0x15b3", "device/device": "0x1021",
                            "device/uevent": f"DRIVER=mlx5_core\nPCI_SLOT_NAME=0000:{0x18 + 0x10 * i:02x}:00.0"})
        for port in range(1, ports + 1):
            netdev = f"eth{i * ports + port - 1}" if link_layer == "Ethernet" else f"ib{i * ports + port - 1}"
            spec = {"device": dev, "port": port, "link_layer": link_layer, "rate": rate, "netdev": netdev,
                    "counters": {"counters": MLX5_PMA_COUNTERS, "hw_counters": hw}, "values": _scaled(_MLX5_VALUES, i),
                    "traffic": _MLX5_TRAFFIC, "ca_type": "MT4129", "fw": "28.41.1000"}
            _port(root, spec, _changes(degraded, dev, port))
        names.append(dev)
    _record_tools(root)
    return names


def add_efa_devices(root: Path, n: int = 4, degraded: dict | None = None) -> list[str]:
    """n EFA devices named as rdma-core's udev rules name them (rdmap<bus>s0), one port each, hw_counters only."""
    names = []
    for i in range(n):
        dev = f"rdmap{79 + i * 16}s0"
        _device(root, dev, {"node_type": "1: CA", "fw_ver": "0.0.0.0", "device/vendor": "0x1d0f",
                            "device/device": "0xefa1",
                            "device/uevent": f"DRIVER=efa\nPCI_SLOT_NAME=0000:{79 + i * 16:02x}:00.0"})
        spec = {"device": dev, "port": 1, "link_layer": "Unknown", "rate": "100 Gb/sec (4X EDR)", "netdev": None,
                "counters": {"hw_counters": EFA_HW_COUNTERS}, "values": _scaled(_EFA_VALUES, i),
                "traffic": _EFA_TRAFFIC, "ca_type": "0xefa1", "fw": "0.0.0.0"}
        _port(root, spec, _changes(degraded, dev, 1))
        names.append(dev)
    _record_tools(root)
    return names


def add_bnxt_re_devices(root: Path, n: int = 2, degraded: dict | None = None) -> list[str]:
    """n Broadcom RoCE devices bnxt_re0.. (no PMA `counters/` folder: bnxt_re has hw_counters only)."""
    names = []
    for i in range(n):
        dev = f"bnxt_re{i}"
        _device(root, dev, {"node_type": "1: CA", "fw_ver": "227.1.111.0", "hca_type": "BCM57508",
                            "device/vendor": "0x14e4", "device/device": "0x1750",
                            "device/uevent": f"DRIVER=bnxt_en\nPCI_SLOT_NAME=0000:{0x41 + i:02x}:00.0"})
        spec = {"device": dev, "port": 1, "link_layer": "Ethernet", "rate": "200 Gb/sec (4X HDR)",
                "netdev": f"ens{i + 1}f0np0", "counters": {"hw_counters": BNXT_RE_HW_COUNTERS},
                "values": _scaled(_BNXT_VALUES, i), "traffic": _BNXT_TRAFFIC, "ca_type": "BCM57508",
                "fw": "227.1.111.0"}
        _port(root, spec, _changes(degraded, dev, 1))
        names.append(dev)
    _record_tools(root)
    return names


_STATE_WORD = {"1": "DOWN", "2": "INIT", "3": "ARMED", "4": "ACTIVE"}
_PHYS_WORD = {"2": "POLLING", "3": "DISABLED", "5": "LINK_UP"}
_IBSTAT_STATE = {"1": "Down", "2": "Initializing", "3": "Armed", "4": "Active"}
_IBSTAT_PHYS = {"2": "Polling", "3": "Disabled", "5": "LinkUp"}


def _code(value: str) -> str:
    return value.split(":", 1)[0].strip()


def _record_tools(root: Path) -> None:
    """`rdma link`, `rdma statistic show` (both snapshots), `ibstat` and `ibv_devinfo -v` for every port so far."""
    ports = json.loads(_registry(root).read_text())
    link, stat0, stat1, ibstat, devinfo = [], [], [], [], []
    for p in ports:
        name = f"{p['device']}/{p['port']}"
        st = p["state"]
        netdev = f" netdev {p['netdev']}" if p["netdev"] else ""
        link.append(f"link {name} state {_STATE_WORD[_code(st['state'])]} physical_state "
                    f"{_PHYS_WORD[_code(st['phys_state'])]}{netdev}")
        stat0.append(f"link {name} " + " ".join(f"{k} {v}" for k, v in p["hw0"].items()))
        stat1.append(f"link {name} " + " ".join(f"{k} {v}" for k, v in p["hw1"].items()))
        ibstat.append(
            f"CA '{p['device']}'\n\tCA type: {p['ca_type']}\n\tNumber of ports: 1\n\tFirmware version: {p['fw']}\n"
            f"\tHardware version: 0\n\tPort {p['port']}:\n\t\tState: {_IBSTAT_STATE[_code(st['state'])]}\n"
            f"\t\tPhysical state: {_IBSTAT_PHYS[_code(st['phys_state'])]}\n"
            f"\t\tRate: {st['rate'].split()[0]}\n\t\tLink layer: {p['link_layer']}\n")
        devinfo.append(
            f"hca_id:\t{p['device']}\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t{p['fw']}\n"
            f"\tDevice ports:\n\t\tport:\t{p['port']}\n"
            f"\t\t\tstate:\t\t\tPORT_{_STATE_WORD[_code(st['state'])]} ({_code(st['state'])})\n"
            f"\t\t\tlink_layer:\t\t{p['link_layer']}\n"
            f"\t\t\tphys_state:\t\t{_PHYS_WORD[_code(st['phys_state'])]} ({_code(st['phys_state'])})\n")
    record_command(root, "rdma", ["link"], "\n".join(link) + "\n")
    record_command(root, "rdma", ["statistic", "show"], "\n".join(stat0) + "\n")
    record_command(root, "rdma", ["statistic", "show"], "\n".join(stat1) + "\n", snapshot=1)
    record_command(root, "ibstat", [], "".join(ibstat))
    record_command(root, "ibv_devinfo", ["-v"], "\n".join(devinfo))
