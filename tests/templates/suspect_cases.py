"""A 16-host RoCE fleet (8x ConnectX-7 and 8x H100 per host) on AWS with 8 faulty components on 8 hosts, as the
diagnosis would hand it to the ticket: 8 provider-owned suspects with their full identity and 3-5 evidence lines
each, plus one operator-owned suspect (PFC drift) and one application-owned (Xid 13) that the provider's ticket
must not carry; 2 more hosts were not captured. The findings behind each suspect are there too, for "ruled out"."""

from __future__ import annotations

from fabricase.diagnosis import Background, Diagnosis, HostOutcome, Suspect
from fabricase.models import Evidence, Finding, Placement, Severity

CREATED_AT = "2026-11-30T08:30:00Z"
SYMPTOM = "allreduce busbw fell from 360 to 210 GB/s on job 48213 (16 nodes, 128 GPUs)"
BUNDLE_ID = "7c" * 32
ESCALATION = "FC-0031"
HOSTS = tuple(f"gpu{i:03d}" for i in range(1, 17))
NOT_CAPTURED = ("gpu017", "gpu018")
TOP = ("network-node:nn-1a2b3c4d5e6f7a8b9", "network-node:nn-0f1e2d3c4b5a69788")


def _leaf(host: str) -> str:
    return f"network-node:nn-{int(host[3:]) % 4:x}7a8b9c0d1e2f3a4b"


def instance(host: str) -> str:
    return f"i-0{int(host[3:]):02d}b2c3d4e5f6a7b8c"


def _place(host: str) -> dict[str, str]:
    return {"instance_id": instance(host), "instance_type": "p5.48xlarge", "region": "us-east-1",
            "zone": "us-east-1a", "placement_group": "pg-train-48213", "topology": " > ".join([*TOP, _leaf(host)])}


def _port(host: str, dev: int, netdev: str, bus: str, **extra: str) -> dict[str, str]:
    n = int(host[3:])
    return {**_place(host), "pci": f"0000:{bus}:00.0", "netdev": netdev, "mac": f"b8:3f:d2:{n:02x}:4e:{dev:02x}",
            "node_guid": f"0xb83fd20300{n:02x}4e{dev:02x}", "port_guid": f"0xb83fd20300{n:02x}4e{dev:02x}",
            "firmware": "28.39.1002", "hca_type": "MT4129", "board_id": "MT_0000000838", "link_layer": "Ethernet",
            "product_serial": f"ec2{n:03d}a1-7b2c-4d3e-9f00-aa11bb22cc{n:02d}", **extra}


def _gpu(host: str, index: int, bus: str) -> dict[str, str]:
    n = int(host[3:])
    return {**_place(host), "pci": f"0000:{bus}:00.0", "serial": f"16523220{n:02d}{index:03d}",
            "uuid": f"GPU-4f6a{n:02x}{index:02x}-3c1e-5b7d-9e2f-0a1b2c3d4e5f", "model": "NVIDIA H100 80GB HBM3",
            "product_serial": f"ec2{n:03d}a1-7b2c-4d3e-9f00-aa11bb22cc{n:02d}"}


def _suspect(n: int, host: str, unit: str, components: list[str], verdict: str, verdict_text: str,
             severity: Severity, owner: str, action: str, evidence: list[str], identity: dict[str, str],
             findings: list[str], confidence: float | None = 0.999, q_value: float | None = 1e-12) -> Suspect:
    return Suspect(id=f"S{n:010x}", host=host, unit=unit, components=components, verdict=verdict,
                   verdict_text=verdict_text, severity=severity, confidence=confidence, q_value=q_value, owner=owner,
                   action=action, evidence=evidence, identity=identity, findings=findings,
                   key_number=evidence[0])


_CABLE = ("Inspect or replace the cable or optic between NIC port {port} ({netdev}) of {host} and its switch port, "
          "and check that switch port.")


def suspects() -> list[Suspect]:
    """The 8 provider-owned suspects (most severe first), then the operator's and the application's."""
    return [
        _suspect(1, "gpu003", "nic-port", ["rdma:mlx5_5/1", "netdev:ens6np0", "pcie:0000:bd:00.0"], "bad-link",
                 "bad link (cable, optic or switch port)", Severity.CRITICAL, "provider",
                 _CABLE.format(port="mlx5_5/1", netdev="ens6np0", host="gpu003"),
                 ["phy.symbol_errors_uncorrected +1,840 (108/s); fleet median 0/s, p99 0.06/s over 128 ports",
                  "phy.fec_uncorrectable_blocks +212 (12.5/s); fleet median 0/s, p99 0/s over 128 ports",
                  "phy.ber_pre_fec 2.1e-05; fleet median 3.2e-09, p99 8.8e-08 over 128 ports",
                  "rx_crc_errors +1,204 (70.8/s); fleet median 0/s, p99 0/s over 128 interfaces",
                  "q = 2.3e-88 (fleet-outlier; confidence 1)"],
                 _port("gpu003", 5, "ens6np0", "bd"),
                 ["fleet-outlier@gpu003/rdma:mlx5_5/1", "rdma-symbol-errors@gpu003/rdma:mlx5_5/1",
                  "phy-errors@gpu003/netdev:ens6np0"], 1.0, 2.3e-88),
        _suspect(2, "gpu007", "gpu", ["gpu:4", "pcie:0000:9d:00.0", "nvlink:4/0"], "gpu-off-bus",
                 "GPU fell off the bus", Severity.CRITICAL, "provider",
                 "Repair or replace GPU 4 (0000:9d:00.0) of gpu007: it fell off the bus (or repair the host gpu007).",
                 ["xid_79 at 2026-11-30T08:11:52Z: GPU has fallen off the bus (GPU 4, 0000:9d:00.0)",
                  "nvidia-smi: GPU 4 missing (7 of 8 GPUs present; every other host has 8)",
                  "nvlink.links_active 0 of 18 on GPU 4; fleet median 18 over 128 GPUs"],
                 _gpu("gpu007", 4, "9d"), ["nvidia-xid@gpu007/gpu:4"], 0.99, None),
        _suspect(3, "gpu011", "nic-port", ["rdma:mlx5_2/1", "netdev:ens3np0", "pcie:0000:5d:00.0"], "link-flapping",
                 "link flapping", Severity.MAJOR, "provider",
                 _CABLE.format(port="mlx5_2/1", netdev="ens3np0", host="gpu011"),
                 ["link.down_events +6 (0.35/s); fleet median 0/s, p99 0/s over 128 ports",
                  "carrier_changes +12 in 17 s; fleet median 0, p99 0 over 128 interfaces",
                  "kernel log: 6 link down/up messages for ens3np0, the first at 2026-11-30T07:58:02Z",
                  "q = 4.1e-19 (fleet-outlier; confidence 1)"],
                 _port("gpu011", 2, "ens3np0", "5d"),
                 ["rdma-link-flap@gpu011/rdma:mlx5_2/1", "kernel-link-down@gpu011/netdev:ens3np0"], 0.999, 4.1e-19),
        _suspect(4, "gpu005", "nic-port", ["rdma:mlx5_0/1", "netdev:ens1np0", "pcie:0000:0d:00.0"], "speed-downshift",
                 "speed downshift", Severity.MAJOR, "provider",
                 "Reseat or replace the cable or optic of NIC port mlx5_0/1 (ens1np0) of gpu005, which trained "
                 "below its peers' speed.",
                 ["link.speed_gbps 200 Gb/s; expected 400 (127 of 128 ports at 400)",
                  "link.width 2 lanes; expected 4",
                  "ethtool: Speed 200000Mb/s, Lanes 2, Link partner advertised 400000baseCR4"],
                 _port("gpu005", 0, "ens1np0", "0d"), ["rdma-speed-downshift@gpu005/rdma:mlx5_0/1"], 0.95, None),
        _suspect(5, "gpu009", "nic-port", ["rdma:mlx5_6/1", "netdev:ens7np0", "pcie:0000:cd:00.0"],
                 "rdma-transport-errors", "RDMA transport errors", Severity.MAJOR, "provider",
                 "Check the path of NIC port mlx5_6/1 (ens7np0) of gpu009: its queue pairs time out or retry "
                 "(the far end or a congested path).",
                 ["rdma.local_ack_timeout_err +60 (3.5/s); fleet median 0/s, p99 0.06/s over 128 ports",
                  "rdma.packet_seq_err +41 (2.4/s); fleet median 0/s, p99 0.12/s over 128 ports",
                  "rdma.out_of_sequence +118 (6.9/s); fleet median 0.058/s, p99 0.41/s over 128 ports",
                  "q = 7.7e-15 (fleet-outlier; confidence 1)"],
                 _port("gpu009", 6, "ens7np0", "cd"), ["fleet-outlier@gpu009/rdma:mlx5_6/1"], 0.999, 7.7e-15),
        _suspect(6, "gpu013", "nic-port", ["netdev:ens4np0", "rdma:mlx5_3/1", "pcie:0000:4d:00.0"], "pfc-storm-source",
                 "PFC storm source", Severity.MAJOR, "provider",
                 "Check NIC port mlx5_3/1 (ens4np0) of gpu013: it sends PFC pause most of the time (stuck receive "
                 "path or a switch port that cannot drain it).",
                 ["pfc.tx_pause_us.p3 575,500 us/s (58% of the time); fleet median 5.2 us/s, p99 61 us/s",
                  "pfc.tx_pause_frames.p3 6,851 frames/s; fleet median 0.6/s, p99 9.1/s over 128 ports",
                  "pfc.pause_storm_events +2; fleet median 0 over 128 ports",
                  "q = 1.2e-31 (congestion-outlier; confidence 1)"],
                 _port("gpu013", 3, "ens4np0", "4d"),
                 ["pfc-storm@gpu013/netdev:ens4np0", "congestion-outlier@gpu013/netdev:ens4np0"], 1.0, 1.2e-31),
        _suspect(7, "gpu014", "gpu", ["gpu:2", "pcie:0000:3b:00.0", "nvlink:2/0", "nvlink:2/7"], "nvlink-errors",
                 "NVLink errors", Severity.MAJOR, "provider",
                 "Repair the NVLinks of GPU 2 (0000:3b:00.0) of gpu014 (or replace the GPU baseboard of gpu014).",
                 ["nvlink.replay_errors +40 (2.4/s) on links 0 and 7; fleet median 0/s, p99 0/s over 2,304 links",
                  "nvlink.crc_flit_errors +312 (18/s); fleet median 0/s, p99 0.06/s over 2,304 links",
                  "q = 8.7e-17 (fleet-outlier; confidence 1)"],
                 _gpu("gpu014", 2, "3b"), ["fleet-outlier@gpu014/nvlink:2/0", "nvlink-errors@gpu014/nvlink:2/7"],
                 0.999, 8.7e-17),
        _suspect(8, "gpu016", "pcie-device", ["pcie:0000:be:00.0", "gpu:6"], "pcie-degraded", "PCIe link degraded",
                 Severity.MAJOR, "provider",
                 "Reseat or replace GPU 6 (0000:be:00.0) of gpu016, or its riser or slot: its PCIe link is degraded.",
                 ["pcie.link_width x8; expected x16 (every other GPU of the fleet at x16)",
                  "pcie.link_speed_gts 16 GT/s; expected 32 GT/s (Gen5)",
                  "pcie.aer_correctable +1,212 in 17 s; fleet median 0, p99 2 over 128 GPUs"],
                 _gpu("gpu016", 6, "be"), ["gpu-pcie-downgraded@gpu016/pcie:0000:be:00.0"], 0.95, None),
        _suspect(9, "gpu006", "host", ["host"], "configuration-drift", "configuration drift", Severity.MAJOR,
                 "operator", "Set pfc_enabled on gpu006 like the rest of the fleet ('0,0,0,1,0,0,0,0' where this "
                 "host has '0,0,0,0,0,0,0,0').",
                 ["mlnx_qos PFC 0,0,0,0,0,0,0,0 where 15 of 16 hosts have 0,0,0,1,0,0,0,0"],
                 _place("gpu006"), ["config-drift@gpu006/host"], 0.9, None),
        _suspect(10, "gpu010", "gpu", ["gpu:1", "pcie:0000:1d:00.0"], "application-error", "application error",
                 Severity.CRITICAL, "application",
                 "Check the job on gpu010: GPU 1 reported an application fault (Xid 13, not hardware).",
                 ["xid_13 at 2026-11-30T08:02:11Z: Graphics Engine Exception (GPU 1, pid 4242 python)"],
                 _gpu("gpu010", 1, "1d"), ["nvidia-xid@gpu010/gpu:1"], 0.9, None),
    ]


def findings() -> list[Finding]:
    """One finding per suspect id line, in the terms the rules use (kinds, components, evidence metrics)."""
    def f(kind: str, sev: Severity, host: str, component: str, metric: str, value: float, summary: str) -> Finding:
        return Finding(kind, sev, host, component, summary, evidence=[Evidence(metric, value, "errors", baseline=0)],
                       confidence=0.99)

    crit, major = Severity.CRITICAL, Severity.MAJOR
    return [
        f("fleet-outlier", crit, "gpu003", "rdma:mlx5_5/1", "phy.symbol_errors_uncorrected.delta", 1840,
          "mlx5_5/1: symbol errors 1840 in 17 s"),
        f("rdma-symbol-errors", crit, "gpu003", "rdma:mlx5_5/1", "phy.symbol_errors_uncorrected.delta", 1840,
          "mlx5_5/1: symbol_error +1840"),
        f("phy-errors", major, "gpu003", "netdev:ens6np0", "phy.fec_uncorrectable_blocks.delta", 212, "FEC"),
        f("nvidia-xid", crit, "gpu007", "gpu:4", "xid_79", 1, "Xid 79 on GPU 4"),
        f("rdma-link-flap", major, "gpu011", "rdma:mlx5_2/1", "link.down_events.delta", 6, "mlx5_2/1 flapped"),
        f("kernel-link-down", major, "gpu011", "netdev:ens3np0", "kernel_link_down_events", 6, "ens3np0 down"),
        f("rdma-speed-downshift", major, "gpu005", "rdma:mlx5_0/1", "link.speed_gbps", 200, "200 Gb/s"),
        f("fleet-outlier", major, "gpu009", "rdma:mlx5_6/1", "rdma.local_ack_timeout_err.delta", 60, "ack timeouts"),
        f("pfc-storm", major, "gpu013", "netdev:ens4np0", "pfc.pause_storm_events.delta", 2, "PFC storm"),
        f("nvlink-errors", major, "gpu014", "nvlink:2/7", "nvlink.replay_errors.delta", 40, "NVLink replays"),
        f("gpu-pcie-downgraded", major, "gpu016", "pcie:0000:be:00.0", "pcie.link_width", 8, "x8"),
        f("config-drift", major, "gpu006", "host", "qos.pfc_enabled", 0, "PFC drift"),
        f("nvidia-xid", crit, "gpu010", "gpu:1", "xid_13", 1, "Xid 13 on GPU 1"),
        *(f("rdma-transport-errors", Severity.MINOR, h, "rdma:mlx5_1/1", "rdma.out_of_sequence.delta", 1,
            "out_of_sequence +1") for h in ("gpu001", "gpu002", "gpu004")),
    ]


def hosts() -> list[dict]:
    """Host summaries: every captured host with a full identity (what a provider's engineer does not need)."""
    out = [{"host": h, "status": "ok", "reason": None,
            "identity": {"kernel": "6.8.0-45-generic", "kernel_version": "#45-Ubuntu SMP PREEMPT_DYNAMIC",
                         "bios_version": "1.0", "product_name": "p5.48xlarge", "os": "Ubuntu 22.04.4 LTS"}}
           for h in HOSTS]
    out += [{"host": h, "status": "unreachable", "reason": f"ssh: connect to host {h} port 22: timed out",
             "identity": {}} for h in NOT_CAPTURED]
    return out


def placements() -> list[Placement]:
    return [Placement(host=h, provider="aws", instance_id=instance(h), instance_type="p5.48xlarge",
                      region="us-east-1", zone="us-east-1a", placement_group="pg-train-48213",
                      topology=[*TOP, _leaf(h)], extra={"az_id": "use1-az4"}) for h in HOSTS]


def diagnosis() -> Diagnosis:
    all_suspects = suspects()
    per_host: dict[str, int] = {}
    for s in all_suspects:
        per_host[s.host] = per_host.get(s.host, 0) + 1
    outcomes = [HostOutcome(h, "ok", None, per_host.get(h, 0)) for h in HOSTS]
    outcomes += [HostOutcome(h, "unreachable", "timed out") for h in NOT_CAPTURED]
    background = [Background("rdma.out_of_sequence", "rdma", 61, 128, 0.058,
                             findings=[f"rdma-transport-errors@{h}/rdma:mlx5_1/1" for h in ("gpu001", "gpu002")])]
    return Diagnosis(all_suspects, background, outcomes)
