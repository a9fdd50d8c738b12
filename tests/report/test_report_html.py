"""The HTML report without a browser: self-contained, escaped, deterministic, and the numbers it draws."""

from __future__ import annotations

import dataclasses
import re
import sys
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest
from report_helpers import RDMA_METRIC, capture_of, dom, fleet, leaf_placements, rdma_sample

from fabricase.analysis import analyze, host_samples
from fabricase.models import Evidence, Finding, HostCapture, HostStatus, InputFile, MetricSample, Placement, Severity
from fabricase.placements import inventory_placements, topology_of
from fabricase.report import html_report
from fabricase.report.gaps import collection_gaps
from fabricase.report.heatmap import GROUP_SIZE, MAX_FAMILY_COLUMNS, heat_map, host_groups
from fabricase.report.plots import X0, X1, suspects
from fabricase.report.rates import fleet_rates, level_of

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import fleetgen  # noqa: E402

REPO = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """A real capture directory: 64 hosts x 8 RDMA ports, NVLinks and RoCE ports, symbol errors on one port."""
    folder = tmp_path_factory.mktemp("scenario") / "capture"
    fleetgen.build(next(s for s in fleetgen.scenarios(64, 1, 1) if s.kind == "symbol-errors"), folder, seed=3)
    return folder


def load(folder: Path):
    from fabricase.capturedir import load_capture

    capture = load_capture(folder)
    placements = inventory_placements(folder / "inventory.json", [h.host for h in capture.hosts])
    return capture, analyze(capture, topology=topology_of(placements)), placements


def outlier(host: str, port: int, severity: Severity = Severity.CRITICAL) -> Finding:
    return Finding("fleet-outlier", severity, host, f"rdma:mlx5_{port}/1", f"mlx5_{port}/1 stands out",
                   [Evidence(f"{RDMA_METRIC}.delta", 40, "errors", 0.0)], confidence=0.999, q_value=1e-9)


# --- self-contained, escaped, deterministic ------------------------------------------------------------------------

def test_report_is_one_self_contained_file(scenario):
    capture, findings, placements = load(scenario)
    html = html_report(capture, findings, placements)
    assert b"http://" not in html and b"https://" not in html
    text = html.decode()
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    for loader in ("<script", "<link", "<img", "<iframe", "<object", "<embed", "@import", "url(", " src="):
        assert loader not in text, loader
    assert set(re.findall(r'href="([^"]*)"', text)) <= {"#suspects", "#heatmap", "#background", "#plots", "#topology",
                                                         "#gaps", "#findings"}


def test_untrusted_names_and_summaries_are_escaped():
    evil = "<script>alert(1)</script>"
    hosts = [HostCapture(evil, HostStatus.UNREACHABLE, "ssh", reason='ssh: "<b>refused</b>"'),
             HostCapture("gpu0001", HostStatus.OK, "ssh")]
    findings = [
        Finding("host-unreachable", Severity.MAJOR, evil, "host", f"{evil} could not be reached"),
        Finding("netdev-errors", Severity.MAJOR, "gpu0001", "netdev:<img src=x onerror=alert(2)>",
                "<img src=x onerror=alert(3)>", [Evidence("rx_errors.delta", 5, "packets", 0, source="<i>x</i>")]),
        Finding("shared-component-fault", Severity.MAJOR, None, "switch:<svg onload=alert(4)>", "switch",
                related=[f"{evil}/rdma:mlx5_0/1"]),
    ]
    placements = [Placement(evil, "static", instance_id="<u>i-1</u>", topology=["switch:<svg onload=alert(4)>"]),
                  Placement("gpu0001", "static", topology=["switch:<svg onload=alert(4)>"])]
    samples = {evil: [rdma_sample(evil, 0, 3.0)], "gpu0001": [rdma_sample("gpu0001", 0, 0.0)]}
    text = html_report(capture_of(hosts), findings, placements, samples).decode()
    for raw in ("<script>alert", "<img src=x", "<svg onload", "<b>refused", "<u>i-1", "<i>x</i>"):
        assert raw not in text, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=alert(3)&gt;" in text
    # the escaped host still names its row of the heat map
    assert evil in dom(text).host_headers


def test_same_inputs_give_the_same_bytes(scenario):
    capture, findings, placements = load(scenario)
    first = html_report(capture, findings, placements)
    samples = {hc.host: host_samples(hc) for hc in capture.hosts}
    again, _, _ = load(scenario)
    # given samples, reversed host and placement order, findings unsorted: the same report
    assert html_report(again, list(reversed(findings)), list(reversed(placements)),
                       dict(reversed(list(samples.items())))) == first


def test_a_fleet_of_1024_hosts_x_8_ports_stays_small_and_complete(capsys):
    capture, samples = fleet(1024, hot={(517, 3): 8.0, (9, 1): 0.2})
    names = [hc.host for hc in capture.hosts]
    findings = [outlier("gpu0517", 3)]
    html = html_report(capture, findings, leaf_placements(names), samples)
    page = dom(html.decode())
    assert page.heat_rows == [8] * 1024  # every host, every port, in 64 groups of 16
    assert page.groups == 64 and page.open_groups == 1  # only the group holding the critical port unfolds
    assert page.heat_classes.count("l4 sv-critical") == 1 and page.finding_rows == 1
    with capsys.disabled():
        print(f"\nreport for 1,024 hosts x 8 ports: {len(html):,} bytes")
    assert len(html) < 400_000
    unplaced = html_report(capture, findings, [], samples)
    assert dom(unplaced.decode()).groups == 1024 // GROUP_SIZE


# --- the numbers behind the colours ---------------------------------------------------------------------------------

def test_levels_follow_the_ratio_to_the_fleet_mean():
    _, samples = fleet(100, hot={(1, 0): 50.0, (2, 0): 2.0, (3, 0): 0.5, (4, 0): 0.05})
    rates, fleet_metrics = fleet_rates(samples)
    mean = fleet_metrics[("rdma", RDMA_METRIC)].mean
    assert mean == pytest.approx(52.55 / 800)
    levels = [rates[(f"gpu{i:04d}", "rdma:mlx5_0/1")].level for i in range(1, 6)]
    assert levels == [4, 3, 2, 1, 0]  # 761x, 30x, 7.6x, 0.76x the mean, and a port that did not move
    assert rates[("gpu0002", "rdma:mlx5_0/1")].worst.ratio == pytest.approx(2.0 / mean)
    assert [level_of(r) for r in (None, 0.5, 1.0, 9.9, 10.0, 100.0)] == [1, 1, 2, 2, 3, 4]


def test_virtual_interfaces_and_counter_resets_are_left_out():
    samples = {"h1": [
        MetricSample("h1", "netdev:docker0", "rx_errors", 5, "packets", delta=5, rate=1.0),
        MetricSample("h1", "netdev:eth0", "rx_errors", 5, "packets", delta=-5, rate=-1.0),
        MetricSample("h1", "netdev:eth1", "rx_errors", 5, "packets", delta=5, rate=1.0),
        MetricSample("h1", "netdev:eth1", "rx_bytes", 5, "bytes", delta=5, rate=1.0),
    ]}
    rates, fleet_metrics = fleet_rates(samples)
    assert list(rates) == [("h1", "netdev:eth1")] and list(fleet_metrics) == [("netdev", "rx_errors")]


def test_wide_families_fold_into_parents_then_keep_the_hottest():
    host = HostCapture("gpu0001", HostStatus.OK, "fake")
    nvlink = [MetricSample("gpu0001", f"nvlink:{g}/{link}", "nvlink.replay_errors", 0, "errors", delta=0, rate=0.0)
              for g in range(8) for link in range(18)]
    pcie = [MetricSample("gpu0001", f"pcie:0000:{b:02x}:00.0", "aer_correctable", 0, "errors", delta=0, rate=0.0)
            for b in range(40)]
    findings = [Finding("nvlink-errors", Severity.MAJOR, "gpu0001", "nvlink:2/1", "replays"),
                Finding("pcie-aer", Severity.MAJOR, "gpu0001", "pcie:0000:27:00.0", "aer")]
    rates, _ = fleet_rates({"gpu0001": nvlink + pcie})
    heat = heat_map([host], rates, findings, [])
    assert [c.label for c in heat.columns if c.family == "nvlink"] == [f"{g}/*" for g in range(8)]
    kept = [c.label for c in heat.columns if c.family == "pcie"]
    assert len(kept) == MAX_FAMILY_COLUMNS and "0000:27:00.0" in kept  # the one with a finding is kept
    assert dict((f, hidden) for f, _, hidden in heat.spans) == {"nvlink": 0, "pcie": 40 - MAX_FAMILY_COLUMNS}
    cell = heat.groups[0].rows[0].cells[[c.label for c in heat.columns].index("2/*")]
    assert cell.severity == "major" and "nvlink:2/1" in cell.title


def test_groups_follow_topology_and_a_shared_finding_unfolds_its_group():
    capture, samples = fleet(40)
    names = [hc.host for hc in capture.hosts]
    placements = leaf_placements(names[:32])  # two leaves; eight hosts not placed
    groups = host_groups(names, placements)
    assert [(label, len(hosts)) for label, _, hosts in groups] == [
        ("switch:leaf-000 > rack:r000", 16), ("switch:leaf-001 > rack:r001", 16), ("not placed", 8)]
    shared = Finding("shared-component-fault", Severity.MAJOR, None, "switch:leaf-001", "leaf-001")
    rates, _ = fleet_rates(samples)
    heat = heat_map(capture.hosts, rates, [shared], placements)
    assert [g.open for g in heat.groups] == [False, True, False]
    big = host_groups([f"n{i}" for i in range(150)], [Placement(f"n{i}", "aws", topology=["nn:1"]) for i in range(150)])
    assert [label for label, _, _ in big] == ["nn:1 (1/3)", "nn:1 (2/3)", "nn:1 (3/3)"]


def test_a_suspect_is_marked_beyond_the_fleet():
    _, samples = fleet(64, hot={(5, 2): 20.0, (6, 1): 0.2, (7, 4): 0.4})
    rates, fleet_metrics = fleet_rates(samples)
    shared = Finding("shared-component-fault", Severity.MAJOR, None, "switch:leaf-000", "leaf",
                     related=["gpu0007/rdma:mlx5_4/1", "nccl-log:gpu0001/rdma:mlx5_0/1"])
    found, omitted = suspects([shared, outlier("gpu0005", 2)], rates, fleet_metrics)
    assert [(s.host, s.component, s.severity) for s in found] == [
        ("gpu0005", "rdma:mlx5_2/1", "critical"), ("gpu0007", "rdma:mlx5_4/1", "major")]
    assert omitted == 0
    p = found[0].plots[0]
    assert p.metric == RDMA_METRIC and p.n == 512 and p.zeros == 509 and p.above == "0%"
    assert X0 <= p.box[0] <= p.box[4] < p.marker_x <= X1  # the suspect is the fleet's maximum
    assert sum(b.count for b in p.bars) == 3 and p.zero_bar.count == 509


def test_a_finding_without_a_moving_counter_has_no_plot():
    _, samples = fleet(8)
    rates, fleet_metrics = fleet_rates(samples)
    found, _ = suspects([Finding("link-down", Severity.MINOR, "gpu0002", "rdma:mlx5_1/1", "down")], rates,
                        fleet_metrics)
    assert found[0].plots == ()


# --- collection gaps -----------------------------------------------------------------------------------------------

def test_gaps_group_hosts_items_and_inputs(scenario):
    capture, _, _ = load(scenario)
    for hc in [*capture.hosts[:3], capture.hosts[5]]:
        hc.items = list(hc.items)  # edited below: kept through release(), not decoded from the index again
    for hc in capture.hosts[:3]:
        cmd = next(it for it in hc.items if it.kind == "command")
        cmd.error, cmd.rc = "command not found", 127
    big = next(it for it in capture.hosts[5].items if it.kind == "file")
    big.truncated = True
    capture.hosts += [HostCapture("gpu0100", HostStatus.UNREACHABLE, "ssh", reason="no route to host"),
                      HostCapture("gpu0101", HostStatus.UNREACHABLE, "ssh", reason="no route to host"),
                      HostCapture("gpu0102", HostStatus.TIMED_OUT, "ssh", reason="timed out after 90 s")]
    capture.inputs = [InputFile("nccl-log", "/logs/rank0.log", "inputs/nccl-log/000-rank0.log", 10, "0" * 64, True)]
    gaps = collection_gaps(capture)
    # fleetgen's background resets a counter now and then (a driver reload): those hosts' rates are unknown, and
    # they are partial, each with the port it names
    assert [(g.status, g.hosts, g.count) for g in gaps.hosts] == [
        ("unreachable", "gpu[0100-0101]", 2), ("partial", "gpu0058", 1), ("partial", "gpu0028", 1),
        ("timed-out", "gpu0102", 1)]
    assert [(g.problem, g.hosts) for g in gaps.failed] == [("command not found", "gpu[0001-0003]")]
    assert [(g.source, g.hosts) for g in gaps.truncated] == [(big.source, "gpu0006")]
    assert gaps.inputs_truncated == ("/logs/rank0.log",) and not gaps.empty
    text = html_report(capture, [], []).decode()
    assert "gpu[0100-0101]" in text and "no route to host" in text and "command not found" in text


def test_a_clean_capture_says_it_has_no_gaps():
    capture, samples = fleet(4)
    assert collection_gaps(capture).empty
    assert "None: every host was captured in full" in html_report(capture, [], [], samples).decode()


# --- packaging -----------------------------------------------------------------------------------------------------

def test_the_template_ships_as_package_data():
    template = resources.files("fabricase") / "report" / "templates" / "report.html.j2"
    assert template.is_file()
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["fabricase"]
    assert any(fnmatch("report/templates/report.html.j2", g) for g in globs), (
        'pyproject.toml [tool.setuptools.package-data] fabricase must list "report/templates/*.j2"')


def test_finding_hosts_outside_the_capture_do_not_break_the_report():
    capture, samples = fleet(2)
    stray = dataclasses.replace(outlier("gpu9999", 0), summary="a host that was not captured")
    text = html_report(capture, [stray], [Placement("gpu9999", "static", topology=["switch:x"])], samples).decode()
    assert "a host that was not captured" in text and dom(text).heat_rows == [8, 8]
