"""The exported names and labels are a contract (golden list), and each piece of a capture becomes the series the
docs promise: rates and totals, link states, findings, Xid events, escalations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricase.metrics import METRICS, FamiliesCollector, families, metric_names, registry_of, render
from fabricase.metrics.exposition import (
    Series,
    component_labels,
    escalation_series,
    finding_series,
    sample_series,
)
from fabricase.models import EscalationState, Evidence, Finding, MetricSample, Severity
from fabricase.tracker.store import Tracker

GOLDEN = Path(__file__).with_name("metric_names.golden")


def _golden_lines() -> list[str]:
    return [f"{m.name} {m.type} {','.join(m.labels)}" for m in sorted(METRICS, key=lambda m: m.name)]


def test_names_and_labels_match_the_golden_list():
    # Renaming a metric or a label breaks users' alerts and dashboards: change the golden file on purpose only.
    assert _golden_lines() == GOLDEN.read_text().splitlines()
    assert len(metric_names()) == len(METRICS)  # no name twice


def test_names_follow_prometheus_conventions():
    for m in METRICS:
        assert m.name.startswith("fabricase_") and m.name == m.name.lower(), m.name
        assert m.name.endswith("_total") == (m.type == "counter"), m.name
        assert "summary" not in m.labels and "reason" not in m.labels  # free text never becomes a label
        assert m.help and not m.help.endswith(".")


@pytest.mark.parametrize(("component", "labels"), [
    ("rdma:mlx5_3/1", {"device": "mlx5_3", "port": "1"}),
    ("rdma:efa_0", {"device": "efa_0", "port": ""}),
    ("netdev:ens1f0np0", {"device": "ens1f0np0"}),
    ("nvlink:7/17", {"gpu": "7", "link": "17"}),
    ("gpu:3", {"gpu": "3"}),
    ("pcie:0000:3b:00.0", {"device": "0000:3b:00.0"}),
    ("nvswitch:0000:05:00.0", {"device": "0000:05:00.0"}),
    ("fabric-manager", {}),
    ("host", {}),
])
def test_component_labels(component, labels):
    assert component_labels(component) == labels


def _series(series: Series) -> dict[str, dict[tuple[str, ...], float]]:
    return series.values


def test_counter_samples_become_rates_and_totals_and_missing_is_absent():
    samples = [
        MetricSample("h1", "rdma:mlx5_0/1", "phy.symbol_errors_uncorrected", 140, "errors", delta=40, rate=8.0),
        MetricSample("h1", "rdma:mlx5_1/1", "phy.symbol_errors_uncorrected", None, "errors"),  # not exposed
        MetricSample("h1", "rdma:mlx5_2/1", "rx.errors", 5, "packets", note="reset"),  # total but no rate
        MetricSample("h1", "netdev:ens1", "pfc.tx_pause_us.p3", 9_000_000, "us", delta=3_375_000, rate=675_000.0),
        MetricSample("h1", "rdma:mlx5_0/1", "raw:symbol_error", 140, "count", delta=40, rate=8.0),  # not exported
    ]
    values = _series(sample_series(samples))
    assert values["fabricase_rdma_symbol_errors_per_second"] == {("h1", "mlx5_0", "1"): 8.0}
    assert values["fabricase_rdma_symbol_errors_total"] == {("h1", "mlx5_0", "1"): 140}
    assert values["fabricase_rdma_receive_errors_total"] == {("h1", "mlx5_2", "1"): 5}
    assert "fabricase_rdma_receive_errors_per_second" not in values
    # microseconds paused per second -> seconds paused per second: the share of time the priority was paused
    assert values["fabricase_pfc_pause_seconds_per_second"] == {("h1", "ens1", "tx", "3"): pytest.approx(0.675)}
    assert values["fabricase_pfc_pause_seconds_total"] == {("h1", "ens1", "tx", "3"): pytest.approx(9.0)}
    assert not any("raw" in name for name in values)


def test_gauges_link_state_speed_and_perf():
    samples = [
        MetricSample("h1", "rdma:mlx5_0/1", "link.state", 4, "state", note="ACTIVE"),
        MetricSample("h1", "rdma:mlx5_1/1", "link.state", 1, "state", note="DOWN"),
        MetricSample("h1", "rdma:mlx5_0/1", "link.speed_gbps", 400.0, "Gb/s"),
        MetricSample("h1", "netdev:eth0", "speed", 100000, "Mb/s"),
        MetricSample("h1", "netdev:eth1", "carrier", 0, "flag"),
        MetricSample("h1", "nvlink:0/3", "nvlink.link_state", 0, "flag", note="inactive"),
        MetricSample("h1", "rdma:mlx5_0/1", "perf.rdma_bw_gbps", 390.0, "Gb/s", source="cmd:perf-ib_write_bw"),
        MetricSample("h1", "host", "perf.nccl_busbw_gbs", 360.0, "GB/s", source="cmd:perf-all_reduce_perf"),
    ]
    values = _series(sample_series(samples))
    assert values["fabricase_link_up"] == {("h1", "mlx5_0", "1"): 1.0, ("h1", "mlx5_1", "1"): 0.0,
                                           ("h1", "eth1", ""): 0}
    assert values["fabricase_link_speed_bytes_per_second"] == {("h1", "mlx5_0", "1"): 50e9, ("h1", "eth0", ""): 12.5e9}
    assert values["fabricase_nvlink_up"] == {("h1", "0", "3"): 0}
    assert values["fabricase_perf_rdma_bandwidth_bytes_per_second"] == {("h1", "mlx5_0", "1", "ib_write_bw"): 48.75e9}
    assert values["fabricase_perf_nccl_bus_bandwidth_bytes_per_second"] == {("h1", "", "", "all_reduce_perf"): 360e9}


def test_findings_become_series_without_free_text_and_xids_by_class():
    findings = [
        Finding("nvidia-xid", Severity.CRITICAL, "h2", "pcie:0000:3b:00", "GPU at PCI 0000:3b:00: Xid 79 ...",
                [Evidence("xid_79", 2, "events", None, "cmd:kernel-log", 0)], confidence=0.9),
        Finding("rdma-symbol-errors", Severity.MAJOR, "h1", "rdma:mlx5_0/1", "mlx5_0 port 1: +40 symbol errors",
                confidence=0.95),
        Finding("switch-errors", Severity.MAJOR, None, "switch:leaf-003", "6 of 16 hosts ...", confidence=None),
    ]
    values = _series(finding_series(findings))
    assert values["fabricase_findings"] == {("critical",): 1, ("major",): 2, ("minor",): 0, ("info",): 0}
    assert set(values["fabricase_finding"]) == {
        ("nvidia-xid", "critical", "h2", "pcie:0000:3b:00"), ("rdma-symbol-errors", "major", "h1", "rdma:mlx5_0/1"),
        ("switch-errors", "major", "", "switch:leaf-003")}
    assert values["fabricase_finding_confidence"][("rdma-symbol-errors", "major", "h1", "rdma:mlx5_0/1")] == 0.95
    assert ("switch-errors", "major", "", "switch:leaf-003") not in values["fabricase_finding_confidence"]
    assert values["fabricase_xid_events"] == {("h2", "0000:3b:00", "79", "pcie", "critical"): 2.0}
    text = render(registry_of(FamiliesCollector(families(finding_series(findings)))))
    assert "symbol errors" not in text and "Xid 79 ..." not in text


def test_a_label_the_metric_does_not_declare_is_refused():
    with pytest.raises(ValueError, match="no label 'summary'"):
        Series().set("fabricase_finding", 1, summary="free text")


def test_escalation_series_from_a_real_tracker(tmp_path: Path):
    clock = [datetime(2026, 11, 1, tzinfo=UTC)]
    tracker = Tracker(f"sqlite:///{tmp_path / 'tracker.db'}", now=lambda: clock[0])
    try:
        def new(provider: str, host: str):
            return tracker.create(provider=provider, title="t", symptom="s", severity="major", hosts=[host],
                                  components=[(host, "rdma:mlx5_0/1")])

        old = new("aws", "gpu001")
        tracker.mark_filed(old.id, provider_case_id="case-1", raw_status="opened", state="waiting-provider",
                           ticket_path=None, bundle_id=None, bundle_path=None)
        clock[0] += timedelta(days=2)
        new("aws", "gpu002")  # a draft: waiting on us, never stale
        gone = new("gcp", "gpu003")
        tracker.resolve(gone.id)
        clock[0] += timedelta(days=2)  # the aws case has waited 4 days with no reply: stale after 3
        values = _series(escalation_series(tracker.overview(state="open"), clock[0]))
    finally:
        tracker.close()
    assert values["fabricase_escalations_open"] == {("aws", "waiting-provider"): 1, ("aws", "draft"): 1}
    assert values["fabricase_escalation_oldest_age_seconds"] == {("aws",): 4 * 86400}
    assert values["fabricase_escalation_stale"] == {("aws",): 1}
    assert EscalationState.RESOLVED.value not in {k[1] for k in values["fabricase_escalations_open"]}


def test_rendered_text_parses_back():
    samples = [MetricSample("h1", "rdma:mlx5_0/1", "phy.symbol_errors_uncorrected", 140, "errors", delta=40, rate=8.0)]
    text = render(registry_of(FamiliesCollector(families(sample_series(samples)))))
    parsed = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    assert parsed["fabricase_rdma_symbol_errors_total"].value == 140
    assert parsed["fabricase_rdma_symbol_errors_per_second"].labels == {"host": "h1", "device": "mlx5_0", "port": "1"}
