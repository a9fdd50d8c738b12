"""The metric names fabricase exports, with their type, unit and labels: the stable contract that alert rules,
dashboards and users' queries are written against (docs/metrics.md lists the same, and a test keeps them equal).

A name may gain a label value, never lose or rename a label. Counters are listed by their exposed name
(`..._total`). Every label has a bounded set of values: hosts, devices, ports, GPUs, links, finding kinds and
components, verdicts, owners, catalog classes; never free text such as a finding's summary or an action.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["METRICS", "MetricDef", "metric_def", "metric_names"]


@dataclass(frozen=True)
class MetricDef:
    name: str  # as exposed (a counter's ends in _total)
    type: str  # "gauge" | "counter"
    unit: str  # in words, for the docs
    labels: tuple[str, ...]
    help: str

    @property
    def family(self) -> str:
        """The name prometheus_client's families take: a counter's without _total."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name


_PORT = ("host", "device", "port")
_NETDEV = ("host", "device")
_NVLINK = ("host", "gpu", "link")
_PERF = ("host", "device", "port", "test")
_FINDING = ("kind", "severity", "host", "component")
_SUSPECT = ("host", "component", "verdict", "owner", "severity")
_DESK = ("provider", "desk")


def _counter(base: str, labels: tuple[str, ...], what: str, unit: str) -> tuple[MetricDef, MetricDef]:
    """A hardware counter as two series: its rate over the capture interval and its latest raw value."""
    return (
        MetricDef(f"{base}_per_second", "gauge", f"{unit}/s", labels,
                  f"{what} per second between the capture's two counter snapshots"),
        MetricDef(f"{base}_total", "counter", unit, labels, f"{what}: the hardware counter's latest value"),
    )


_RDMA_COUNTERS = (
    ("symbol_errors", "symbol errors (minor link errors on a lane)", "errors"),
    ("link_down_events", "times link training failed and the link went down", "events"),
    ("link_error_recoveries", "successful link error recoveries (retrains)", "events"),
    ("link_integrity_errors", "local physical errors over the LocalPhyErrors threshold", "events"),
    ("receive_errors", "received packets with errors (CRC, length)", "packets"),
    ("receive_remote_physical_errors", "received packets marked bad upstream", "packets"),
    ("receive_buffer_overruns", "input buffer overruns", "events"),
    ("transmit_discards", "outbound packets discarded", "packets"),
    ("ack_timeouts", "requester ACK timeouts", "events"),
    ("out_of_sequence_packets", "packets received out of sequence", "packets"),
    ("sequence_error_naks", "sequence-error NAKs received", "events"),
    ("retransmitted_packets", "retransmitted packets", "packets"),
    ("transport_retries_exceeded", "transport retry limit exhausted (QP to error)", "events"),
    ("rnr_retries_exceeded", "RNR NAK retry limit exhausted (QP to error)", "events"),
    ("receive_bytes", "bytes received", "bytes"),
    ("transmit_bytes", "bytes sent", "bytes"),
)
_NETDEV_COUNTERS = (
    ("receive_errors", "received packets with errors (sysfs rx_errors)", "packets"),
    ("transmit_errors", "transmit errors (sysfs tx_errors)", "packets"),
    ("receive_crc_errors", "received frames with a bad CRC (sysfs rx_crc_errors)", "frames"),
    ("receive_dropped", "received packets dropped by the kernel (sysfs rx_dropped)", "packets"),
    ("transmit_dropped", "packets dropped on transmit (sysfs tx_dropped)", "packets"),
    ("carrier_changes", "carrier up/down transitions (sysfs carrier_changes)", "transitions"),
    ("receive_bytes", "bytes received (sysfs rx_bytes)", "bytes"),
    ("transmit_bytes", "bytes sent (sysfs tx_bytes)", "bytes"),
    ("symbol_errors", "PCS symbol errors the FEC did not correct (ethtool)", "symbols"),
    ("fcs_errors", "received frames with a bad FCS at the PHY (ethtool)", "frames"),
    ("link_down_events", "PHY link-down events (ethtool)", "events"),
    ("fec_uncorrectable_blocks", "FEC blocks the PHY could not correct (ethtool)", "blocks"),
    ("fec_corrections", "bits the FEC corrected (ethtool)", "bits"),
    ("receive_port_discards", "packets the port dropped for lack of buffer (ethtool)", "packets"),
    ("receive_host_discards", "packets dropped for lack of host receive buffers (ethtool)", "packets"),
    ("transmit_discards", "outbound packets discarded (ethtool)", "packets"),
    ("pause_storm_events", "PFC pause storm warnings and errors (ethtool)", "events"),
    ("ecn_marked_packets", "received packets with ECN congestion marks (ethtool)", "packets"),
)
_NVLINK_COUNTERS = (
    ("replay_errors", "NVLink replay errors", "errors"),
    ("recovery_errors", "NVLink recovery errors", "errors"),
    ("crc_flit_errors", "NVLink flit CRC errors", "errors"),
    ("crc_data_errors", "NVLink data CRC errors", "errors"),
    ("ecc_data_errors", "NVLink data ECC errors", "errors"),
)

METRICS: tuple[MetricDef, ...] = (
    # capture
    MetricDef("fabricase_capture_timestamp_seconds", "gauge", "seconds since the epoch", (),
              "When the exported capture was taken"),
    MetricDef("fabricase_capture_interval_seconds", "gauge", "seconds", (),
              "Seconds between the capture's two counter snapshots"),
    MetricDef("fabricase_capture_hosts", "gauge", "hosts", ("status",), "Hosts of the capture by capture status"),
    MetricDef("fabricase_host_capture_status", "gauge", "1", ("host", "status"),
              "1 for the host's capture status (ok, partial, timed-out, unreachable, auth-failed, failed)"),
    MetricDef("fabricase_host_info", "gauge", "1", ("host", "provider", "instance_id", "instance_type", "zone"),
              "1 per placed host: where the provider (or the static inventory) puts it"),
    # links
    MetricDef("fabricase_link_up", "gauge", "1", _PORT,
              "1 when an RDMA port is ACTIVE or a network interface has carrier, else 0 (port empty for an interface)"),
    MetricDef("fabricase_link_speed_bytes_per_second", "gauge", "bytes/s", _PORT,
              "Negotiated link speed of an RDMA port or network interface"),
    MetricDef("fabricase_link_width_lanes", "gauge", "lanes", _PORT, "Active lanes of an RDMA port or interface"),
    MetricDef("fabricase_netdev_mtu_bytes", "gauge", "bytes", _NETDEV, "MTU of a network interface"),
    MetricDef("fabricase_netdev_bit_error_ratio", "gauge", "ratio", ("host", "device", "stage"),
              "Bit error ratio over the capture interval, before (pre_fec) or after (post_fec) the FEC"),
    MetricDef("fabricase_module_temperature_celsius", "gauge", "degrees Celsius", _NETDEV,
              "Transceiver module temperature"),
    MetricDef("fabricase_nvlink_up", "gauge", "1", _NVLINK, "1 when an NVLink is active, else 0"),
    MetricDef("fabricase_nvlink_speed_bytes_per_second", "gauge", "bytes/s", _NVLINK, "NVLink speed"),
    MetricDef("fabricase_gpu_nvlinks_active", "gauge", "links", ("host", "gpu"), "Active NVLinks of a GPU"),
    # counters, as rates and totals
    *(m for base, what, unit in _RDMA_COUNTERS for m in _counter(f"fabricase_rdma_{base}", _PORT, what, unit)),
    *(m for base, what, unit in _NETDEV_COUNTERS for m in _counter(f"fabricase_netdev_{base}", _NETDEV, what, unit)),
    *_counter("fabricase_netdev_pause_frames", ("host", "device", "direction"), "link-level pause frames", "frames"),
    *_counter("fabricase_pfc_pause_seconds", ("host", "device", "direction", "priority"),
              "time a PFC priority was paused (per second: the share of time paused)", "seconds"),
    *_counter("fabricase_pfc_pause_frames", ("host", "device", "direction", "priority"), "PFC pause frames", "frames"),
    *(m for base, what, unit in _NVLINK_COUNTERS for m in _counter(f"fabricase_nvlink_{base}", _NVLINK, what, unit)),
    # kernel log
    MetricDef("fabricase_xid_events", "gauge", "events", ("host", "gpu", "code", "class", "catalog_severity"),
              "NVIDIA Xid events in the captured kernel log window, by code, catalog class and catalog severity"),
    MetricDef("fabricase_nvswitch_sxid_events", "gauge", "events",
              ("host", "device", "code", "class", "catalog_severity"),
              "NVSwitch SXid events in the captured kernel log window, by code, catalog class and catalog severity"),
    # perf tests
    MetricDef("fabricase_perf_rdma_bandwidth_bytes_per_second", "gauge", "bytes/s", _PERF,
              "perftest average bandwidth at the largest message size"),
    MetricDef("fabricase_perf_rdma_messages_per_second", "gauge", "messages/s", _PERF,
              "perftest message rate at the largest message size"),
    MetricDef("fabricase_perf_rdma_latency_seconds", "gauge", "seconds", (*_PERF, "stat"),
              "perftest latency at the smallest message size (stat: typical or p99)"),
    MetricDef("fabricase_perf_nccl_bus_bandwidth_bytes_per_second", "gauge", "bytes/s", _PERF,
              "nccl-tests bus bandwidth at the largest size"),
    MetricDef("fabricase_perf_nccl_average_bus_bandwidth_bytes_per_second", "gauge", "bytes/s", _PERF,
              "nccl-tests average bus bandwidth over all sizes"),
    MetricDef("fabricase_perf_nccl_wrong_elements", "gauge", "elements", _PERF,
              "nccl-tests wrong results (0 when the check passed)"),
    MetricDef("fabricase_perf_tcp_throughput_bytes_per_second", "gauge", "bytes/s", (*_PERF, "direction"),
              "iperf3 throughput (direction: received or sent)"),
    MetricDef("fabricase_perf_tcp_retransmitted_segments", "gauge", "segments", _PERF, "iperf3 TCP retransmits"),
    # findings
    MetricDef("fabricase_findings", "gauge", "findings", ("severity",), "Findings of the capture by severity"),
    MetricDef("fabricase_finding", "gauge", "1", _FINDING,
              "1 per open finding (host empty for a shared component such as a switch)"),
    MetricDef("fabricase_finding_confidence", "gauge", "probability", _FINDING,
              "Calibrated confidence of a finding, where it has one"),
    # diagnosis
    MetricDef("fabricase_suspect", "gauge", "1", _SUSPECT,
              "1 per suspect: the thing to repair or reconfigure (component: its primary name), its verdict, who "
              "owns the repair and its severity (host empty for a shared component such as a switch)"),
    # escalations (tracker)
    MetricDef("fabricase_escalations_open", "gauge", "escalations", ("provider", "state"),
              "Open escalations by provider and state"),
    MetricDef("fabricase_escalation_oldest_age_seconds", "gauge", "seconds", ("provider",),
              "Age of the provider's oldest open escalation"),
    MetricDef("fabricase_escalation_stale", "gauge", "escalations", ("provider",),
              "Open escalations waiting on the provider with no reply for the stale period (3 days by default)"),
    # providers' track records (tracker/stats.py)
    MetricDef("fabricase_provider_cases", "gauge", "cases", _DESK,
              "Cases filed with the provider's desk (the sample behind its reply and resolve times)"),
    MetricDef("fabricase_provider_first_reply_seconds", "gauge", "seconds", (*_DESK, "quantile"),
              "Time from filing to the provider's first reply: median (quantile 0.5) and 90th percentile (0.9)"),
    MetricDef("fabricase_provider_resolve_seconds", "gauge", "seconds", (*_DESK, "quantile"),
              "Time from filing to resolution of the resolved cases: median (quantile 0.5) and 90th percentile"),
    MetricDef("fabricase_provider_open_cases", "gauge", "cases", (*_DESK, "age"),
              "Open cases by age since filing (age: <1d, 1-7d, 7-30d, >30d)"),
    MetricDef("fabricase_provider_reopen_ratio", "gauge", "ratio", _DESK,
              "Share of the resolved cases that were reopened"),
    MetricDef("fabricase_repeat_offender", "gauge", "escalations", ("provider", "host", "component"),
              "Escalations in one run of a host (component host), port or switch (host empty): each escalated "
              "within 30 days of an earlier one's resolution"),
)  # fmt: skip

_BY_NAME = {m.name: m for m in METRICS}


def metric_names() -> list[str]:
    """Every exposed metric name, sorted."""
    return sorted(_BY_NAME)


def metric_def(name: str) -> MetricDef:
    return _BY_NAME[name]
