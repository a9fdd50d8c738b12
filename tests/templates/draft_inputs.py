"""A fixed, realistic set of inputs for the ticket and summary golden tests."""

from __future__ import annotations

from fabricase.models import Evidence, Finding, Placement, Severity

CREATED_AT = "2024-05-14T08:30:00Z"
SYMPTOM = "allreduce busbw fell from 360 to 210 GB/s on job 48213 (64 nodes)"


def findings() -> list[Finding]:
    return [
        Finding(
            kind="netdev-errors",
            severity=Severity.MAJOR,
            host="gpu003",
            component="netdev:eth2",
            summary="eth2 receive errors at 41.5/s while its peers show none",
            evidence=[
                Evidence(
                    "rx_errors",
                    1245,
                    "errors",
                    baseline=0,
                    source="/sys/class/net/eth2/statistics/rx_errors",
                    snapshot=1,
                ),
                Evidence("rx_errors_rate", 41.5, "/s", baseline=0.0),
            ],
            q_value=0.0000031,
        ),
        Finding(
            kind="link-flap",
            severity=Severity.CRITICAL,
            host="gpu002",
            component="rdma:mlx5_3/1",
            summary="mlx5_3 port 1 link went down and up 12 times in 30 s",
            evidence=[
                Evidence(
                    "carrier_changes",
                    12,
                    "changes",
                    baseline=0,
                    source="/sys/class/net/ib3/carrier_changes",
                    snapshot=1,
                ),
                Evidence("operstate", "up", ""),
            ],
            confidence=0.99,
            related=["gpu002 netdev:ib3"],
        ),
        Finding(
            kind="symbol-errors",
            severity=Severity.MINOR,
            host=None,
            component="switch:leaf-17",
            summary="two hosts behind leaf-17 | both with symbol errors",
            evidence=[Evidence("hosts_affected", 2, "hosts")],
            confidence=0.7,
        ),
    ]


def hosts() -> list[dict]:
    names = [f"gpu{i:03d}" for i in range(1, 9)]
    out = [{"host": n, "status": "ok", "reason": None, "identity": {}} for n in names]
    out[1]["identity"] = {"product_name": "p5.48xlarge", "bios_version": "1.0", "sys_vendor": "Amazon EC2"}
    out[6] = {
        "host": "gpu007",
        "status": "unreachable",
        "reason": "ssh: connect to host gpu007 port 22: timed out",
        "identity": {},
    }
    out[7] = {"host": "gpu008", "status": "partial", "reason": "stream cut off after 2.1 MiB", "identity": {}}
    return out


def placements() -> list[Placement]:
    return [
        Placement(
            host="gpu002",
            provider="aws",
            instance_id="i-0abc123def4567890",
            zone="us-east-1a",
            topology=["nn-1a2b", "nn-3c4d", "nn-5e6f"],
        ),
        Placement(host="gpu004", provider="aws", instance_id="i-0fff", zone="us-east-1a"),
    ]
