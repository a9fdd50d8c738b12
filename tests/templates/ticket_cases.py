"""The fixed 3-host case behind the per-desk golden tickets: gpu001 and gpu002 sit below one shared switch
(a network node on AWS, a sub-block on GCP, a leaf switch elsewhere) and both show link errors on mlx5_3/1;
gpu003, below another switch, is clean. Each desk gets the placements its provider would return."""

from __future__ import annotations

from fabricase.models import (
    CaptureItem,
    EscalationEvent,
    Evidence,
    Finding,
    HostCapture,
    HostStatus,
    Placement,
    Severity,
)

CREATED_AT = "2024-05-14T08:30:00Z"
SYMPTOM = "allreduce busbw fell from 360 to 210 GB/s on job 48213 (3 nodes, 24 GPUs)"
BUNDLE_ID = "5e" * 32
ESCALATION = "FC-0012"
HOSTS = ("gpu001", "gpu002", "gpu003")
DESKS = ("generic", "aws", "gcp", "azure", "jira", "zendesk", "email")

# desk -> the shared component above gpu001 and gpu002, in that provider's topology
SHARED = {
    "aws": "network-node:nn-7a8b9c0d1e2f3a4b5",
    "gcp": "subblock:3f9c1e07",
}
LEAF = "switch:leaf-17"

KERNEL_LOG_GPU002 = """\
2024-05-14T07:58:02.114027+0000 gpu002 kernel: mlx5_core 0000:9c:00.1: Port module event: module 3, Cable plugged
2024-05-14T08:02:11.204518+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link down
2024-05-14T08:02:12.917733+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link up
2024-05-14T08:07:45.003311+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link down
2024-05-14T08:07:46.778090+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link up
2024-05-14T08:10:30.412876+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link down
2024-05-14T08:10:31.998512+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link up
2024-05-14T08:12:41.550190+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link down
2024-05-14T08:12:43.107415+0000 gpu002 kernel: mlx5_core 0000:9c:00.1 eth3: Link up
"""


def shared_component(desk: str) -> str:
    return SHARED.get(desk, LEAF)


def findings(shared: str = LEAF) -> list[Finding]:
    return [
        Finding(
            kind="rdma-symbol-errors",
            severity=Severity.MAJOR,
            host="gpu001",
            component="rdma:mlx5_3/1",
            summary="mlx5_3/1 (eth3): symbol_error +40 (2.88e+04/h, limit 120/h) in 5 s",
            evidence=[
                Evidence(
                    "phy.symbol_errors_uncorrected.delta",
                    40,
                    "errors",
                    baseline=0,
                    source="/sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error",
                    snapshot=1,
                )
            ],
            confidence=0.95,
        ),
        Finding(
            kind="fleet-outlier",
            severity=Severity.MAJOR,
            host="gpu002",
            component="rdma:mlx5_3/1",
            summary="mlx5_3/1 (eth3): link.error_recovery 38 in 5 s, 190x the fleet baseline of 0.2",
            evidence=[Evidence("link.error_recovery.delta", 38, "events", baseline=0.2)],
            confidence=0.9996,
            q_value=0.0004,
        ),
        Finding(
            kind="shared-component-fault",
            severity=Severity.MAJOR,
            host=None,
            component=shared,
            summary=f"{shared}: 2 of its 2 hosts have fabric findings, 1.33 expected by chance",
            evidence=[
                Evidence("flagged_under", 2, "hosts", baseline=1.33),
                Evidence("hosts_under", 2, "hosts"),
                Evidence("fleet_size", 3, "hosts"),
            ],
            confidence=0.992,
            q_value=0.008,
        ),
        Finding(
            kind="kernel-link-down",
            severity=Severity.MAJOR,
            host="gpu002",
            component="netdev:eth3",
            summary="eth3: 4 link-down message(s) in the kernel log, last at 2024-05-14T08:12:41.550190+0000",
            evidence=[
                Evidence("kernel_link_down_events", 4, "events", source="cmd:kernel-log", snapshot=0),
                Evidence("kernel_link_up_events", 4, "events", source="cmd:kernel-log", snapshot=0),
            ],
            confidence=0.7,
        ),
    ]


def hosts() -> list[dict]:
    return [{"host": h, "status": "ok", "reason": None, "identity": {}} for h in HOSTS]


def placements(desk: str) -> list[Placement]:
    return {"aws": _aws, "gcp": _gcp, "azure": _azure}.get(desk, _static)()


def _aws() -> list[Placement]:
    top = ["network-node:nn-1a2b3c4d5e6f7a8b9", "network-node:nn-0f1e2d3c4b5a69788"]
    bottom = {"gpu001": SHARED["aws"], "gpu002": SHARED["aws"], "gpu003": "network-node:nn-99aabbccddeeff001"}
    return [
        Placement(
            host=h,
            provider="aws",
            instance_id=f"i-0a1b2c3d4e5f6000{i}",
            instance_type="p5.48xlarge",
            region="us-east-1",
            zone="us-east-1a",
            placement_group="pg-train-48213",
            topology=[*top, bottom[h]],
            extra={"az_id": "use1-az4", "capacity_block_id": "cr-0c5e7a9b1d3f5a7c9"},
        )
        for i, h in enumerate(HOSTS, 1)
    ]


def _gcp() -> list[Placement]:
    subblock = {"gpu001": SHARED["gcp"], "gpu002": SHARED["gcp"], "gpu003": "subblock:a27d44b1"}
    return [
        Placement(
            host=h,
            provider="gcp",
            instance_id=f"48719236455300123{i}",
            instance_type="a3-ultragpu-8g",
            region="us-central1",
            zone="us-central1-b",
            topology=["block:0b6e5d12", subblock[h]],
            extra={
                "instance_name": f"a3u-train-{i:03d}",
                "project": "ml-train-prod",
                "cluster": "us-central1-cluster-jfhb",
                "host": f"h{i}c4e",
                "physical_host": f"/0b6e5d12/{subblock[h].split(':')[1]}/h{i}c4e",
            },
        )
        for i, h in enumerate(HOSTS, 1)
    ]


def _azure() -> list[Placement]:
    leaf = {"gpu001": LEAF, "gpu002": LEAF, "gpu003": "switch:leaf-18"}
    sub = "0b1f6471-1bf0-4dda-aec3-cb9272f09590"
    return [
        Placement(
            host=h,
            provider="azure",
            instance_id=h,
            instance_type="Standard_ND96isr_H100_v5",
            region="eastus",
            zone="2",
            topology=[leaf[h]],
            extra={
                "resource_id": f"/subscriptions/{sub}/resourceGroups/rg-train/providers/Microsoft.Compute/"
                f"virtualMachines/{h}",
                "physical_host_name": f"GZ21B07{i:02d}C3D4E",
                "platform_fault_domain": i - 1,
                "platform_update_domain": 0,
            },
        )
        for i, h in enumerate(HOSTS, 1)
    ]


def _static() -> list[Placement]:
    where = {"gpu001": (LEAF, "rack:r12"), "gpu002": (LEAF, "rack:r12"), "gpu003": ("switch:leaf-18", "rack:r13")}
    return [
        Placement(host=h, provider="static", instance_id=f"node-{i:04d}", zone="dc1-hall2", topology=list(where[h]))
        for i, h in enumerate(HOSTS, 1)
    ]


def _items(sources: list[str]) -> list[CaptureItem]:
    return [CaptureItem(s, 0, "command" if s.startswith("cmd:") else "file", "x", "stream.fc1", 10, "0" * 64, rc=0)
            for s in sources]


def host_captures() -> list[HostCapture]:
    """What an H100 host with ConnectX-7 NICs and NVSwitches captures (the index only): no DCGM, no perf tests."""
    sources = [
        "/sys/class/net/eth3/carrier_changes",
        "/sys/class/net/eth3/statistics/rx_crc_errors",
        "/sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error",
        "/sys/bus/pci/devices/0000:9c:00.0/current_link_speed",
        "/proc/driver/nvidia/version",
        "/proc/driver/nvidia-nvswitch/devices/0000:05:00.0/information",
        "/sys/module/mlx5_core/version",
        "cmd:ethtool-stats",
        "cmd:ethtool-link",
        "cmd:kernel-log",
        "cmd:nvidia-smi-q",
        "cmd:nvlink-errors",
        "cmd:mlnx-qos",
    ]
    return [HostCapture(h, HostStatus.OK, "ssh", items=_items(sources)) for h in HOSTS]


def events() -> list[EscalationEvent]:
    return [
        EscalationEvent("2024-05-14T08:31:05Z", "created", f"escalation {ESCALATION} opened"),
        EscalationEvent("2024-05-14T08:31:40Z", "bundle", "bundle 5e5e5e5e5e5e5e5e built"),
    ]
