"""Which metrics `fabricase export` writes: error counters only, no raw `_total` values, names by glob.

At fleet scale most series are traffic and link-state gauges that node_exporter already has; a textfile of
the error counters alone is what alerting on a flaky link needs, at a fraction of the series. Filters work on
the exposed names of metrics/names.py (a counter's ends in `_total`), so they mean the same in the textfile,
in `--metric` globs and in docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from prometheus_client.core import Metric

from fabricase.errors import ConfigError
from fabricase.metrics.names import METRICS

__all__ = ["ERROR_METRICS", "ExportFilter", "check_globs", "exposed_name", "filter_families"]

# Counters that count something going wrong (errors, drops, discards, retransmits, link flaps), per family.
# Traffic (bytes, pause frames, ECN marks) and FEC corrections (healthy links correct all the time) are not.
_ERROR_BASES = {
    "rdma": ("symbol_errors", "link_down_events", "link_error_recoveries", "link_integrity_errors",
             "receive_errors", "receive_remote_physical_errors", "receive_buffer_overruns", "transmit_discards",
             "ack_timeouts", "out_of_sequence_packets", "sequence_error_naks", "retransmitted_packets",
             "transport_retries_exceeded", "rnr_retries_exceeded"),
    "netdev": ("receive_errors", "transmit_errors", "receive_crc_errors", "receive_dropped", "transmit_dropped",
               "carrier_changes", "symbol_errors", "fcs_errors", "link_down_events", "fec_uncorrectable_blocks",
               "receive_port_discards", "receive_host_discards", "transmit_discards", "pause_storm_events"),
    "nvlink": ("replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors", "ecc_data_errors"),
}  # fmt: skip

# Each error counter's rate and raw value, and the kernel's GPU (Xid) and NVSwitch (SXid) error events.
ERROR_METRICS: frozenset[str] = frozenset(
    {f"fabricase_{family}_{base}{suffix}" for family, bases in _ERROR_BASES.items() for base in bases
     for suffix in ("_per_second", "_total")} | {"fabricase_xid_events", "fabricase_nvswitch_sxid_events"})


@dataclass(frozen=True)
class ExportFilter:
    """What to keep: the error metrics (errors_only) and/or names matching `include` (all when neither is
    given), less names matching `exclude`, less every `_total` counter when not `totals`."""

    errors_only: bool = False
    totals: bool = True
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.errors_only or not self.totals or bool(self.include or self.exclude)

    def keeps(self, name: str) -> bool:
        """Whether the metric with this exposed name is written."""
        chosen = not (self.errors_only or self.include) or (self.errors_only and name in ERROR_METRICS) or any(
            fnmatchcase(name, glob) for glob in self.include)
        if not chosen or any(fnmatchcase(name, glob) for glob in self.exclude):
            return False
        return self.totals or not name.endswith("_total")

    def describe(self) -> dict:
        """For --json: the filter as given."""
        return {"errors_only": self.errors_only, "totals": self.totals, "metric": list(self.include),
                "exclude": list(self.exclude)}


def check_globs(globs: tuple[str, ...], option: str) -> None:
    """ConfigError for a glob that matches no metric fabricase exports (a typo would silently drop all)."""
    names = [m.name for m in METRICS]
    for glob in globs:
        if not any(fnmatchcase(n, glob) for n in names):
            raise ConfigError(f"{glob!r} matches no metric fabricase exports (names: docs/metrics.md)", where=option)


def exposed_name(family: Metric) -> str:
    """A family's name as exposed: prometheus_client's counter families drop the `_total`."""
    return f"{family.name}_total" if family.type == "counter" else family.name


def filter_families(families: list[Metric], keep: ExportFilter) -> list[Metric]:
    """The families the filter keeps, in their order."""
    if not keep.active:
        return families
    return [f for f in families if keep.keeps(exposed_name(f))]

