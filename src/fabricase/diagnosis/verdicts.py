"""Verdicts: what is wrong with a suspect, in a fabric engineer's words, who owns the repair and what we ask for.
An explicit registry (docs/diagnosis.md has the same table); the finding kind (and, for a few kinds, the metric or
the Xid code) picks the verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabricase.models import Finding

__all__ = ["ACTION_FIELDS", "COMPUTED_KINDS", "KIND_VERDICTS", "VERDICTS", "Verdict", "priority", "verdict_of"]


@dataclass(frozen=True)
class Verdict:
    name: str
    text: str  # in a fabric engineer's words
    owner: str  # provider | operator | application
    # What we ask for. Fields: {where} the part and its host ("NIC port mlx5_3/1 (eth3) on gpu003"; the host alone
    # for a host suspect; the component for a shared one), {part} the part alone ("GPU 4"), {nic} the NIC a port
    # belongs to ("NIC mlx5_3 (eth3) on gpu003"), {host} the host (for a shared suspect: the hosts below it),
    # {below} the hosts below a shared suspect ("the host" for a host's own), {what} and {value} a drifting
    # setting and the fleet's value.
    action: str
    title: str  # the ticket title's phrase: "{title} on gpu003 mlx5_5/1 (ens6np0)"


ACTION_FIELDS = ("where", "part", "nic", "host", "below", "what", "value")

_NVLINK = "Repair the NVLinks of {where}, or replace the host's GPU baseboard."
_CABLE = "Inspect or replace the cable or optic between {where} and its switch port, and check that switch port."
_RETURN_GPU = "Repair or replace {where}."

# In priority order: when a suspect has findings of several verdicts, the first of this list names it.
VERDICTS: dict[str, Verdict] = {v.name: v for v in (
    Verdict("gpu-off-bus", "GPU fell off the bus", "provider",
            "Repair or replace {where}: it fell off the bus.", "GPU fell off the bus"),
    Verdict("host-unreachable", "host could not be inspected", "operator",
            "Check that {host} is up and reachable, then capture it again.", "host could not be inspected"),
    Verdict("link-down", "link down", "provider",
            "Check the cable, optic and switch port of {where}: the link is down.", "link down"),
    Verdict("link-flapping", "link flapping", "provider", _CABLE, "link flapping"),
    Verdict("bad-link", "bad link (cable, optic or switch port)", "provider", _CABLE, "link errors"),
    Verdict("speed-downshift", "speed downshift", "provider",
            "Reseat or replace the cable or optic of {where}: it trained below its peers' speed.",
            "speed downshift"),
    Verdict("nic-fault", "NIC firmware or hardware fault", "provider",
            "Return {nic}: its firmware or hardware reported a fatal error.", "NIC fault"),
    Verdict("pcie-degraded", "PCIe link degraded", "provider",
            "Reseat or replace {where}, or its riser or slot: its PCIe link is degraded.",
            "PCIe link degraded"),
    Verdict("gpu-memory-errors", "GPU memory errors", "provider", _RETURN_GPU, "GPU memory errors"),
    Verdict("nvlink-down", "NVLink down", "provider", _NVLINK, "NVLink down"),
    Verdict("nvlink-errors", "NVLink errors", "provider", _NVLINK, "NVLink errors"),
    Verdict("gpu-fabric-not-ready", "GPU fabric not ready", "provider",
            "Check the NVSwitch fabric of {host}: {part} did not complete fabric registration.",
            "GPU fabric not ready"),
    Verdict("gpu-fault", "GPU fault", "provider", _RETURN_GPU, "GPU fault"),
    Verdict("nvswitch-errors", "NVSwitch errors", "provider", "Repair or replace {where}.", "NVSwitch errors"),
    Verdict("fabric-manager-down", "fabric manager down", "operator",
            "Start nvidia-fabricmanager on {host}: its NVSwitches are registered but the fabric manager is not "
            "active.", "fabric manager down"),
    Verdict("imex-down", "IMEX domain not healthy", "operator",
            "Check the IMEX daemon of {host} and its peers.", "IMEX not healthy"),
    Verdict("switch-fault", "shared switch or network fault", "provider",
            "Check {where}: its ports and the links down to {below}.", "errors under one switch"),
    Verdict("pfc-storm-source", "PFC storm source", "provider",
            "Check {where}: it sends PFC pause frames most of the time (a stuck receive path or NIC), pausing "
            "the switch ports above it.", "PFC storm"),
    Verdict("congestion-victim", "congestion victim", "operator",
            "Look for the congestion source upstream of {where}: it is paused, not the cause.", "congestion"),
    Verdict("rdma-transport-errors", "RDMA transport errors", "provider",
            "Check the path of {where}: its queue pairs time out or retry (the far end or a congested path).",
            "RDMA transport errors"),
    Verdict("low-bandwidth", "bandwidth below expectation", "provider",
            "Check the path of {where}: its measured bandwidth is below what its links can do.", "low bandwidth"),
    Verdict("wrong-results", "collective returned wrong results", "provider",
            "Repair or replace the GPUs or NVLinks of {host}: the collective returned wrong data.",
            "wrong collective results"),
    Verdict("configuration-drift", "configuration drift", "operator",
            "Set {what} on {where} like the rest of the fleet ({value}).", "configuration drift"),
    Verdict("collective-timeout", "collective timeout", "application",
            "Check the job's ranks on {host}: a collective timed out there (often waiting for a broken rank).",
            "collective timeout"),
    Verdict("application-error", "application error", "application",
            "Check the job running on {host}: {part} reported an application fault, not a hardware one.",
            "application error"),
    Verdict("perf-test-failed", "perf test failed", "operator",
            "Check the perf tools and their set-up on {host}: the test could not run.", "perf test failed"),
)}

KIND_VERDICTS: dict[str, str] = {
    "host-unreachable": "host-unreachable",
    "rdma-port-down": "link-down", "link-down": "link-down",
    "link-flap": "link-flapping", "rdma-link-flap": "link-flapping", "kernel-link-down": "link-flapping",
    "rdma-symbol-errors": "bad-link", "phy-errors": "bad-link", "netdev-errors": "bad-link",
    "rdma-port-errors": "bad-link",
    "rdma-speed-downshift": "speed-downshift", "link-speed-downshift": "speed-downshift",
    "nic-firmware-fault": "nic-fault", "nic-driver-warning": "nic-fault",
    "pcie-downgraded": "pcie-degraded", "gpu-pcie-downgraded": "pcie-degraded", "pcie-aer": "pcie-degraded",
    "kernel-pcie-aer": "pcie-degraded", "pcie-link-limited": "pcie-degraded",
    "gpu-memory-remap": "gpu-memory-errors",
    "nvlink-inactive": "nvlink-down", "nvlink-errors": "nvlink-errors",
    "gpu-fabric-unhealthy": "gpu-fabric-not-ready", "dcgm-health": "gpu-fault",
    "nvswitch-sxid": "nvswitch-errors", "nvswitch-fm-errors": "nvswitch-errors",
    "fabric-manager-down": "fabric-manager-down", "imex-unhealthy": "imex-down",
    "shared-component-fault": "switch-fault",
    "pfc-storm": "pfc-storm-source",  # when it sent pause; one that only received it: congestion-victim
    "rdma-transport-errors": "rdma-transport-errors", "nccl-nic-errors": "rdma-transport-errors",
    "nccl-busbw-low": "low-bandwidth", "nccl-busbw-collapse": "low-bandwidth", "rdma-bw-low": "low-bandwidth",
    "rdma-bw-outlier": "low-bandwidth", "tcp-throughput-low": "low-bandwidth",
    "nccl-wrong-results": "wrong-results", "nccl-timeout": "collective-timeout",
    "perf-test-failed": "perf-test-failed",
    # The active probe: a host, NIC or path measured slow. A slow path is low-bandwidth, not switch-fault: the
    # probe knows two hosts that are slow with each other, not which switch (if any) lies between them; a
    # topology that names the switch is what makes it a switch fault (shared-component-fault).
    "probe-slow-host": "low-bandwidth", "probe-slow-nic": "low-bandwidth", "probe-slow-path": "low-bandwidth",
    "probe-below-expected": "low-bandwidth", "probe-collective-slow": "low-bandwidth",
    "probe-unreadable": "perf-test-failed",
    "config-drift": "configuration-drift",
    # Minor or info only (never a suspect's lead on their own), listed so that every kind has a verdict.
    "nic-discards": "congestion-victim", "rdma-counter-saturated": "bad-link",
}

# Kinds whose verdict depends on the finding, not the kind alone (verdict_of): docs/diagnosis.md explains each.
COMPUTED_KINDS = ("nvidia-xid", "fleet-outlier", "congestion-outlier", "pfc-storm")

# Xid codes (NVIDIA's catalog) by what they say about the GPU. Any other code: gpu-fault.
_XID_VERDICTS: dict[int, str] = {
    79: "gpu-off-bus", 48: "gpu-memory-errors", 63: "gpu-memory-errors", 64: "gpu-memory-errors",
    94: "gpu-memory-errors", 95: "gpu-memory-errors", 92: "gpu-memory-errors",
    74: "nvlink-errors", **dict.fromkeys(range(144, 151), "nvlink-errors"),
    13: "application-error", 31: "application-error", 43: "application-error", 45: "application-error",
    68: "application-error", 69: "application-error",
}
_XID = re.compile(r"^xid_(\d+)$")

# fleet-outlier: the metric that stood out picks the verdict.
_METRIC_VERDICTS: tuple[tuple[str, str], ...] = (
    ("link.down", "link-flapping"), ("link.error_recovery", "link-flapping"), ("carrier", "link-flapping"),
    ("phy.", "bad-link"), ("rx.errors", "bad-link"), ("rx.remote_physical", "bad-link"), ("link.integrity", "bad-link"),
    ("rx_crc", "bad-link"), ("rx_frame", "bad-link"), ("rx.buffer_overrun", "bad-link"),
    ("rdma.", "rdma-transport-errors"), ("nvlink.", "nvlink-errors"), ("pcie.", "pcie-degraded"),
    ("tx.discards", "congestion-victim"), ("rx.discards", "congestion-victim"),
)


def _metric_verdict(metric: str) -> str:
    metric = metric.removeprefix("raw:")
    for prefix, verdict in _METRIC_VERDICTS:
        if metric.startswith(prefix):
            return verdict
    return "bad-link"


def verdict_of(f: Finding) -> str:
    """The verdict one finding points to."""
    if f.kind == "nvidia-xid":
        codes = [int(m[1]) for ev in f.evidence if (m := _XID.match(ev.metric))]
        named = [_XID_VERDICTS.get(c, "gpu-fault") for c in codes] or ["gpu-fault"]
        return min(named, key=_PRIORITY.__getitem__)
    if f.kind in ("fleet-outlier",):
        metrics = [ev.metric.split(".delta")[0].split(".count")[0] for ev in f.evidence if ev.metric]
        return _metric_verdict(metrics[0]) if metrics else "bad-link"
    if f.kind in ("congestion-outlier", "pfc-storm"):
        # The port that sends pause (or trips the NIC's pause-storm watchdog) is the source; one that only
        # receives it is a victim of congestion further on.
        sent = any(".tx_pause" in ev.metric or "pause_storm" in ev.metric for ev in f.evidence)
        return "pfc-storm-source" if sent or (f.kind == "pfc-storm" and not f.evidence) else "congestion-victim"
    return KIND_VERDICTS.get(f.kind, "bad-link" if f.component.startswith(("rdma:", "netdev:")) else "gpu-fault")


_PRIORITY = {name: i for i, name in enumerate(VERDICTS)}


def priority(verdict: str) -> int:
    return _PRIORITY.get(verdict, len(_PRIORITY))
