"""The report's first part: the header (symptom, escalation id, bundle id, verdict line) and one card per suspect
with its mini-plot; then the heat map, the background, and last the raw findings, folded."""

from __future__ import annotations

import dataclasses

from report_helpers import RDMA_METRIC, dom, fleet, rdma_sample

from fabricase.diagnosis import Background, Diagnosis, HostOutcome, Suspect, finding_id
from fabricase.models import Evidence, Finding, MetricSample, Severity
from fabricase.report import BUNDLE_PENDING, NOT_FILED, html_report
from fabricase.report import cards as cards_module
from fabricase.report.cards import KEY_RATIO, cards, cited_rates, key_rate
from fabricase.report.plots import FULL, MINI, plot
from fabricase.report.rates import FleetMetric, MetricRate, fleet_rates

HOT = {(i, i % 8): 8.0 for i in range(1, 17, 2)}  # eight hosts with one port each far above the fleet


def outlier(host: str, port: int, severity: Severity = Severity.CRITICAL) -> Finding:
    return Finding("fleet-outlier", severity, host, f"rdma:mlx5_{port}/1", f"mlx5_{port}/1 stands out",
                   [Evidence(f"{RDMA_METRIC}.delta", 40, "errors", 0.0)], confidence=0.999, q_value=1e-9)


def suspect(host: str | None = "gpu0003", component: str = "rdma:mlx5_3/1", **changes) -> Suspect:
    """A suspect as diagnosis.diagnose makes one; `changes` replace any field."""
    base = Suspect(
        id="s-0001", host=host, unit="nic-port", components=[component, "netdev:ens4np0", "pcie:0000:4d:00.0"],
        verdict="bad-link", verdict_text="bad link (cable, optic or switch port)", severity=Severity.CRITICAL,
        confidence=0.999, q_value=1e-9, owner="provider",
        action=f"Inspect or replace the cable or optic between NIC port {component} of {host} and its switch port.",
        evidence=[f"{RDMA_METRIC} +40 (8/s); fleet median 0/s, p99 0/s over 128 ports"],
        identity={"pci": "0000:4d:00.0", "mac": "b8:3f:d2:00:00:03", "node_guid": "0xb83fd20300000003",
                  "instance_id": "i-0abc"},
        findings=[], key_number=f"{RDMA_METRIC} +40 (8/s)")
    return dataclasses.replace(base, **changes)


def diagnosis_of(*suspects: Suspect, hosts: int = 16, background: list[Background] | None = None) -> Diagnosis:
    return Diagnosis(list(suspects), background or [],
                     [HostOutcome(f"gpu{i:04d}", "ok") for i in range(1, hosts + 1)])


# --- the order of the page -------------------------------------------------------------------------------------------

def test_suspect_cards_come_first_then_heat_map_background_and_the_findings_folded_last():
    capture, samples = fleet(16, hot=HOT)
    findings = [outlier(f"gpu{i:04d}", p) for i, p in HOT]
    text = html_report(capture, findings, [], samples).decode()  # the bundler's call: the diagnosis made here
    page = dom(text)
    assert len(page.cards) == 8 and page.mini_plots == 8
    order = page.sections
    assert order.index("suspects") < order.index("heatmap") < order.index("background") < order.index("findings")
    assert order[0] == "suspects" and order[-1] == "findings"
    heat_map = text.index('<section id="heatmap">')
    assert all(m < heat_map for m in _positions(text, '<article class="card '))
    assert page.findings_folded == [True]  # one findings table, in a closed <details>
    assert page.finding_rows == len(findings)
    assert "8 suspects on 8 of 16 hosts; 8 hosts healthy" in text


def _positions(text: str, needle: str) -> list[int]:
    out, at = [], text.find(needle)
    while at >= 0:
        out.append(at)
        at = text.find(needle, at + 1)
    return out


def test_the_header_names_the_symptom_the_escalation_and_the_bundle():
    capture, samples = fleet(4)
    text = html_report(capture, [], [], samples, symptom="allreduce busbw fell from 360 to 210 GB/s",
                       escalation_id="FAB-1234", bundle_id="sha256:9f2c").decode()
    header = text[text.index("<header>"):text.index("</header>")]
    for shown in ("allreduce busbw fell from 360 to 210 GB/s", "FAB-1234", "sha256:9f2c",
                  "no suspect on 4 hosts; 4 hosts healthy"):
        assert shown in header, shown
    assert "No suspect: nothing to repair or reconfigure was found." in text
    unfiled = html_report(capture, [], [], samples).decode()
    header = unfiled[unfiled.index("<header>"):unfiled.index("</header>")]
    assert NOT_FILED in header and BUNDLE_PENDING in header and "(none given)" in header


# --- a card ----------------------------------------------------------------------------------------------------------

def test_a_card_shows_what_the_owner_needs_and_its_key_metric_against_the_fleet():
    capture, samples = fleet(16, hot={(3, 3): 8.0, (5, 1): 0.2})
    f = outlier("gpu0003", 3)
    s = suspect(findings=[finding_id(f)], severity=Severity.MAJOR)
    background = [Background("rdma.out_of_sequence", "rdma", 61, 128, 0.058)]
    text = html_report(capture, [f], [], samples, diagnosis=diagnosis_of(s, background=background)).decode()
    page = dom(text)
    assert page.cards == ["card s-major"] and page.mini_plots == 1
    card = text[text.index('<article class="card'):text.index("</article>")]
    for shown in ("major", s.name, s.verdict_text, "provider", s.action, s.evidence[0], "q = 1e-09",
                  "instance_id <b>i-0abc</b>", "pci <b>0000:4d:00.0</b>", "mac <b>b8:3f:d2:00:00:03</b>"):
        assert shown in card, shown
    assert card.index("instance_id") < card.index("pci") < card.index("mac")  # what a provider looks up first
    assert f"{RDMA_METRIC} of gpu0003 rdma:mlx5_3/1" in card  # the plot marks the suspect's own port
    background_section = text[text.index('<section id="background">'):text.index('<section id="plots">')]
    assert "out_of_sequence rose on 61 of 128 ports at fleet-normal rates (median 0.058/s)" in background_section


def test_everything_a_card_shows_is_escaped():
    evil = "<script>alert(1)</script>"
    capture, samples = fleet(4)
    s = suspect(host=evil, action="<img src=x onerror=alert(2)>", evidence=["<b>40</b> errors"],
                identity={"serial": "<u>SN</u>"}, verdict_text="<i>bad</i>", hosts=[evil])
    text = html_report(capture, [], [], samples, diagnosis=diagnosis_of(s), symptom="<svg onload=alert(3)>",
                       escalation_id="<em>E</em>", bundle_id="<s>B</s>").decode()
    for raw in ("<script>alert", "<img src=x", "<b>40", "<u>SN", "<i>bad", "<svg onload", "<em>E", "<s>B"):
        assert raw not in text, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and dom(text).tags.get("script", 0) == 0


def test_more_suspects_than_cards_are_counted(monkeypatch):
    monkeypatch.setattr(cards_module, "MAX_CARDS", 2)
    capture, samples = fleet(4)
    many = [suspect(id=f"s-{i}", host=f"gpu{i:04d}") for i in range(1, 4)]
    text = html_report(capture, [], [], samples, diagnosis=diagnosis_of(*many, hosts=4)).decode()
    assert len(dom(text).cards) == 2 and "1 more suspects are in the diagnosis" in text


# --- the key metric --------------------------------------------------------------------------------------------------

def pause(host: str, port: int, rate: float) -> MetricSample:
    return MetricSample(host, f"netdev:ens1f{port}np{port}", "pfc.tx_pause_us.p3", 0, "us", delta=rate * 5, rate=rate)


def test_the_key_metric_is_the_cited_one_even_when_it_is_not_an_error_counter():
    samples = {f"gpu{i:04d}": [pause(f"gpu{i:04d}", p, 980_000.0 if (i, p) == (5, 0) else 5.0) for p in range(2)]
               for i in range(1, 17)}
    samples["gpu0005"].append(MetricSample("gpu0005", "netdev:ens1f0np0", "rx_errors", 0, "packets", delta=5,
                                           rate=1.0))
    storm = Finding("pfc-storm", Severity.MAJOR, "gpu0005", "netdev:ens1f0np0", "pause storm",
                    [Evidence("pfc.pause_storm_events", 2, "events", 0), Evidence("pfc.tx_pause_us.p3.delta", 4.9e6,
                                                                                  "us", 26.0)])
    s = suspect(host="gpu0005", component="netdev:ens1f0np0", components=["netdev:ens1f0np0"])
    rates, errors = fleet_rates(samples)
    cited = cited_rates(samples, ["pfc.pause_storm_events", "pfc.tx_pause_us.p3"])
    host, component, rate, distribution = key_rate(s, [storm], cited, rates, errors)
    assert (host, component, rate.metric, rate.rate) == ("gpu0005", "netdev:ens1f0np0", "pfc.tx_pause_us.p3", 980_000)
    assert distribution.values[-1] == 980_000.0 and len(distribution.values) == 32


def test_an_uncited_counter_is_drawn_only_far_above_the_fleet():
    """A speed downshift cites gauges only: a port's background error counter is not its key metric, a counter
    KEY_RATIO times the fleet mean or more is."""
    downshift = Finding("rdma-speed-downshift", Severity.MAJOR, "gpu0002", "rdma:mlx5_1/1", "200 Gb/s",
                        [Evidence("link.speed_gbps", 200, "Gb/s", 400)])
    s = suspect(host="gpu0002", component="rdma:mlx5_1/1", components=["rdma:mlx5_1/1"])
    for rate, drawn in ((0.2, False), (50.0, True)):
        _, samples = fleet(16, hot={(2, 1): rate, **{(i, 0): 0.2 for i in range(3, 17)}})
        rates, errors = fleet_rates(samples)
        ratio = rates[("gpu0002", "rdma:mlx5_1/1")].worst.ratio
        assert (ratio >= KEY_RATIO) is drawn
        got = key_rate(s, [downshift], cited_rates(samples, ["link.speed_gbps"]), rates, errors)
        assert (got is not None) is drawn


def test_a_shared_suspect_plots_the_worst_port_below_it():
    _, samples = fleet(16, hot={(3, 0): 2.0, (4, 0): 9.0})
    leaf = Finding("shared-component-fault", Severity.MAJOR, None, "switch:leaf-000", "6 hosts below err",
                   [Evidence(f"{RDMA_METRIC}.delta", 45, "errors", 0)],
                   related=["gpu0003/rdma:mlx5_0/1", "gpu0004/rdma:mlx5_0/1"])
    s = suspect(host=None, unit="shared", components=["switch:leaf-000"], hosts=["gpu0003", "gpu0004"],
                findings=[finding_id(leaf)], identity={})
    rates, errors = fleet_rates(samples)
    [c], omitted = cards(diagnosis_of(s), [leaf], samples, rates, errors)
    assert omitted == 0 and c.below == "gpu[0003-0004]"
    assert c.plotted == "gpu0003 rdma:mlx5_0/1" and c.plot.rate == "2"  # the first named that moved


def test_a_suspect_of_states_and_logs_has_no_plot():
    capture, samples = fleet(4)
    xid = Finding("nvidia-xid", Severity.CRITICAL, "gpu0002", "pcie:0000:19:00", "Xid 79",
                  [Evidence("xid_79", 1, "events", None)])
    s = suspect(host="gpu0002", component="pcie:0000:19:00.0", components=["pcie:0000:19:00.0"],
                findings=[finding_id(xid)], verdict_text="GPU fell off the bus")
    text = html_report(capture, [xid], [], samples, diagnosis=diagnosis_of(s, hosts=4)).decode()
    assert dom(text).mini_plots == 0 and "nothing to plot: the evidence is a state" in text


# --- the mini-plot ---------------------------------------------------------------------------------------------------

def test_mini_plot_tick_labels_stay_apart_and_inside():
    values = tuple(sorted([0.0] * 20 + [10.0 ** (e / 3) for e in range(-9, 18)]))
    fm = FleetMetric("netdev", "pfc.tx_pause_us.p3", "us", values)
    mini = plot(MetricRate(fm.metric, "us", 980_000.0, fm.mean, 980_000.0 / fm.mean), fm, MINI)
    shown = [(x, label, anchor) for x, label, anchor in mini.ticks if label]
    assert 2 <= len(shown) < len(mini.ticks)  # some labels dropped for room, the axis still has its ticks
    spans = [(x - MINI.label_px * len(label) * (1 if anchor == "end" else 0.5),
              x if anchor == "end" else x + MINI.label_px * len(label) / 2) for x, label, anchor in shown]
    zero_end = (MINI.zero_x0 + MINI.zero_x1) / 2 + MINI.label_px / 2
    assert spans[0][0] > zero_end
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] <= MINI.width
    full = plot(MetricRate(fm.metric, "us", 980_000.0, fm.mean, None), fm)
    assert full.frame == FULL and all(label for _, label, _ in full.ticks)  # the full plots keep every label


def test_a_card_reads_the_sample_of_a_captured_host_only():
    """Samples of a host outside the capture do not join the fleet a card is drawn against (as in the heat map)."""
    capture, samples = fleet(4, hot={(2, 0): 3.0})
    samples["gpu9999"] = [rdma_sample("gpu9999", 0, 100.0)]
    f = outlier("gpu0002", 0)
    text = html_report(capture, [f], [], samples,
                       diagnosis=diagnosis_of(suspect(host="gpu0002", component="rdma:mlx5_0/1",
                                                      findings=[finding_id(f)]), hosts=4)).decode()
    assert "over 32 comparable components" in text  # 4 hosts x 8 ports, not 33
