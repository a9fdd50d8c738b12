"""Stated power: a capture too short or a fleet too small says what it could not rule out, in the terminal, the
HTML report and the ticket's "Ruled out"; a long capture of a large fleet says nothing of the sort."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from fabricase.analysis.power import (
    DetectableRate,
    FleetSize,
    fmt_rate,
    power_sentences,
    power_short,
    power_statements,
    threshold_count,
)
from fabricase.cli.screen import print_diagnosis
from fabricase.diagnosis import diagnose
from fabricase.models import Capture, HostCapture, HostStatus, MetricSample, Severity
from fabricase.report import html_report
from fabricase.templates import render_draft

SYMBOL = "phy.symbol_errors_uncorrected"


def _fleet(n_hosts: int, interval_s: float, ports: int = 8, errors: dict[tuple[int, int], int] | None = None
           ) -> tuple[list[HostCapture], dict[str, list[MetricSample]]]:
    """`n_hosts` hosts with `ports` mlx5 InfiniBand 400 Gb/s ports each, read over `interval_s`; every symbol error
    count 0 except `errors` {(host index, port): count}."""
    errors = errors or {}
    hosts = [HostCapture(f"gpu{i:04d}", HostStatus.OK, "fake") for i in range(1, n_hosts + 1)]
    samples = {}
    for i, hc in enumerate(hosts, 1):
        rows = []
        for p in range(ports):
            comp = f"rdma:mlx5_{p}/1"
            n = float(errors.get((i, p), 0))
            rows += [
                MetricSample(hc.host, comp, SYMBOL, 100 + n, "errors", delta=n, rate=n / interval_s,
                             source=f"/sys/class/infiniband/mlx5_{p}/ports/1/counters/symbol_error"),
                MetricSample(hc.host, comp, "rx.bytes", 1e12, "bytes", delta=1e9 * interval_s, rate=1e9),
                MetricSample(hc.host, comp, "port.vendor", None, "", note="mlx5"),
                MetricSample(hc.host, comp, "link.layer", None, "", note="InfiniBand"),
                MetricSample(hc.host, comp, "link.speed_gbps", 400, "Gb/s"),
            ]
        samples[hc.host] = rows
    return hosts, samples


def _capture(hosts: list[HostCapture], interval_s: float) -> Capture:
    return Capture(Path("/nonexistent"), 2, "2026-11-30T00:00:00Z", "0.1.0", interval_s, {"rdma": 1},
                   {"hosts": "gpu[0001-0016]"}, hosts)


def _terminal(diagnosis, width: int = 200) -> str:
    console = Console(record=True, width=width, color_system=None, file=io.StringIO())
    print_diagnosis(diagnosis, [], console=console)
    return console.export_text()


def _ticket(hosts, diagnosis, tmp_path) -> str:
    draft = render_draft(provider="generic", symptom="allreduce slow", severity=Severity.MAJOR, findings=[],
                         hosts=[{"host": h.host, "status": "ok", "reason": None, "identity": {}} for h in hosts],
                         placements=[], bundle_id=None, capture_created_at="2026-11-30T00:00:00Z",
                         escalation_id="FC-0001", checks={h.host: {"fleet"} for h in hosts}, diagnosis=diagnosis,
                         template_dir=tmp_path)
    return " ".join(draft.body.split())  # the ticket wraps long lines


def _ruled_out(ticket: str) -> str:
    return ticket.split("Ruled out", 1)[1].split("Not checked", 1)[0]


# ---------------------------------------------------------------- the numbers


def test_a_quiet_fleet_needs_the_fleets_minimum_events():
    assert threshold_count(1e-4, 3, 128) == 5  # fleet.MIN_EVENTS: the tail alone would say 2
    assert threshold_count(0.0, 60, 10**6) == 5


def test_a_busy_background_raises_the_threshold_to_the_poisson_tail_at_alpha_over_m():
    from scipy import stats

    k = threshold_count(10.0, 3, 128)  # 30 expected over the interval
    cut = 0.01 / 128
    assert stats.poisson.sf(k - 1, 30) <= cut < stats.poisson.sf(k - 2, 30)
    assert threshold_count(10.0, 3, 128 * 1000) > k  # more tests, a stricter cut


@pytest.mark.parametrize(("per_s", "text"), [(5 / 3, "6,000/h"), (5 / 60, "300/h"), (500 / 3600, "500/h"),
                                             (0.00139, "5/h"), (12.34, "44,000/h"), (1234.5, "1,200/s")])
def test_rates_read_as_an_engineer_writes_them_never_rounded_up(per_s, text):
    assert fmt_rate(per_s) == text


def test_a_3_s_capture_of_16_hosts_states_the_rate_it_could_not_see():
    hosts, samples = _fleet(16, 3.0)
    (rate,) = power_statements(samples)
    assert isinstance(rate, DetectableRate)
    assert (rate.family, rate.components, rate.tests, rate.threshold) == ("rdma", 128, 128, 5)
    assert rate.rate_per_s == pytest.approx(5 / 3) and rate.advised_rate_per_s == pytest.approx(5 / 60)
    assert rate.text == ("an error rate below 6,000/h on a single RDMA port cannot be told from background in a "
                         "3 s interval: capture with `--interval 60` to see rates down to 300/h")


def test_the_detectable_rate_follows_the_background():
    _, quiet = _fleet(16, 3.0)
    _, busy = _fleet(16, 3.0, errors={(h, p): 20 for h in range(1, 17) for p in range(8)})
    assert power_statements(busy)[0].rate_per_s > 5 * power_statements(quiet)[0].rate_per_s


def test_a_60_s_capture_says_nothing_about_its_interval():
    _, samples = _fleet(16, 60.0)
    assert power_statements(samples) == []
    _, samples = _fleet(1024, 60.0, ports=1)
    assert power_statements(samples) == []


def test_a_6_host_fleet_gets_the_fleet_size_line():
    _, samples = _fleet(6, 60.0, ports=1)
    (size,) = power_statements(samples)
    assert isinstance(size, FleetSize)
    assert (size.components, size.per_host, size.needed, size.hosts_needed) == (6, 1, 8, 8)
    assert size.text == ("6 hosts: fleet statistics need at least 8 comparable components; "
                         "6 mlx5 InfiniBand 400 Gb/s RDMA ports (1 per host) are too few to tell a faulty one from "
                         "noise: that takes at least 8 hosts")


def test_a_short_capture_of_a_small_fleet_says_only_the_fleet_size():
    _, samples = _fleet(6, 3.0, ports=1)
    assert [p.kind for p in power_statements(samples)] == ["fleet-size"]  # nothing was judged: no rate to state


# ---------------------------------------------------------------- where it is said


def test_a_3_s_capture_of_16_hosts_gets_the_interval_advice_everywhere(tmp_path):
    hosts, samples = _fleet(16, 3.0)
    d = diagnose([], hosts=hosts, samples=samples)
    assert [p.kind for p in d.power] == ["detectable-rate"]
    assert d.to_dict()["power"][0]["text"] == d.power[0].text
    advice = "an error rate below 6,000/h on a single RDMA port cannot be told from background in a 3 s interval"

    screen = _terminal(d)
    assert "Not ruled out: a port's errors below 6,000/h in 3 s; --interval 60 sees 300/h\n" in screen
    assert screen.index("Background:") < screen.index("Not ruled out:")  # under the background it qualifies
    assert d.to_dict()["power_text"] == [advice + ": capture with `--interval 60` to see rates down to 300/h"]

    page = html_report(_capture(hosts, 3.0), [], [], samples, diagnosis=d).decode()
    background = page.split('<section id="background">', 1)[1].split("</section>", 1)[0]
    assert re.search(r"Not ruled out: an error rate below 6,000/h on a single RDMA port cannot be told", background)
    assert "--interval 60" in background

    ruled = _ruled_out(_ticket(hosts, d, tmp_path))
    assert "no error counter stands out from the fleet on any of the 16 hosts; not ruled out: " + advice in ruled
    assert "capture with `--interval 60`" in ruled


def test_a_60_s_capture_gets_no_interval_advice(tmp_path):
    hosts, samples = _fleet(16, 60.0)
    d = diagnose([], hosts=hosts, samples=samples)
    assert d.power == [] and "power" not in d.to_dict()
    assert "Not ruled out" not in _terminal(d)
    assert "Not ruled out" not in html_report(_capture(hosts, 60.0), [], [], samples, diagnosis=d).decode()
    ticket = _ticket(hosts, d, tmp_path)
    assert "no error counter stands out from the fleet on any of the 16 hosts" in ticket
    assert "not ruled out" not in ticket and "--interval" not in ticket


def test_a_6_host_fleet_gets_the_fleet_size_line_everywhere(tmp_path):
    hosts, samples = _fleet(6, 60.0, ports=1)
    d = diagnose([], hosts=hosts, samples=samples)
    line = "6 hosts: fleet statistics need at least 8 comparable components"
    assert "Not ruled out: 6 hosts, 6 comparable RDMA ports: fleet statistics need 8\n" in _terminal(d)
    assert "Not ruled out: " + line in html_report(_capture(hosts, 60.0), [], [], samples, diagnosis=d).decode()
    assert "not ruled out: " + line in _ruled_out(_ticket(hosts, d, tmp_path))


def test_the_hosts_own_intervals_come_before_the_samples():
    from fabricase.diagnosis.core import _power

    class _Host:  # a captured host whose snapshots say 3 s; its samples carry no rate to infer it from
        def __init__(self, host: str) -> None:
            self.host, self.interval_s = host, 3.0

    _, samples = _fleet(16, 60.0)
    for rows in samples.values():
        for i, s in enumerate(rows):
            rows[i] = MetricSample(s.host, s.component, s.metric, s.value, s.unit, source=s.source, note=s.note,
                                   delta=s.delta, rate=None if s.delta is not None else s.rate)
    assert [p.interval_s for p in _power(samples, [_Host(h) for h in samples])] == [3.0]


def _with_interfaces(samples: dict[str, list[MetricSample]], interval_s: float) -> None:
    for host, rows in samples.items():
        rows += [MetricSample(host, f"netdev:eth{i}", "rx_errors", 0, "errors", delta=0.0, rate=0.0) for i in range(2)]
        rows += [MetricSample(host, f"netdev:eth{i}", "rx_bytes", 1e12, "bytes", delta=1e9 * interval_s, rate=1e9)
                 for i in range(2)]


def test_one_sentence_for_every_family_at_the_same_interval():
    _, samples = _fleet(16, 3.0)
    _with_interfaces(samples, 3.0)
    statements = power_statements(samples)
    assert [s.family for s in statements] == ["netdev", "rdma"]  # one record per family
    assert power_sentences(statements) == [
        "an error rate below 6,000/h on a single interface or RDMA port cannot be told from background in a 3 s "
        "interval: capture with `--interval 60` to see rates down to 300/h"]
    assert power_short(statements) == ["a port's errors below 6,000/h in 3 s; --interval 60 sees 300/h"]


def test_the_terminal_line_fits_80_columns():
    hosts, samples = _fleet(16, 3.0)
    screen = _terminal(diagnose([], hosts=hosts, samples=samples), width=80)
    (line,) = [x for x in screen.splitlines() if x.startswith("Not ruled out")]
    assert len(line) <= 80 and not line.endswith("…")


def _read_twice(samples: dict[str, list[MetricSample]], first_delta: float | None) -> dict[str, list[MetricSample]]:
    """Each symbol error counter read a second time, from another source, before the first: with `first_delta`
    (None: a read that gave no delta)."""
    out = {}
    for host, rows in samples.items():
        extra = [MetricSample(s.host, s.component, s.metric, s.value, s.unit, delta=first_delta,
                              rate=None if first_delta is None else first_delta / 3.0, source=f"{s.source}.again")
                 for s in rows if s.metric == SYMBOL]
        out[host] = extra + rows
    return out


@pytest.mark.parametrize(("first_delta", "as_if"), [(None, {(2, 1): 3}), (0.0, {})])
def test_a_counter_read_twice_counts_once(first_delta, as_if):
    """One counter is one component's exposure however many sources read it: the first read with a delta counts
    (0 here: as if the port's 3 errors were not there), a read without one does not stand in its way (the power
    statements read the fleet step's columns)."""
    _, samples = _fleet(16, 3.0, errors={(2, 1): 3})
    intervals = {h: 3.0 for h in samples}
    expected = power_statements(_fleet(16, 3.0, errors=as_if)[1], intervals=intervals)
    twice = power_statements(_read_twice(samples, first_delta), intervals=intervals)
    assert expected and [s.to_dict() for s in twice] == [s.to_dict() for s in expected]
    clean = power_statements(_fleet(16, 3.0)[1], intervals=intervals)
    with_errors = power_statements(samples, intervals=intervals)
    assert [s.to_dict() for s in with_errors] != [s.to_dict() for s in clean]  # the 3 errors do count once


def test_negative_deltas_and_unknown_intervals_are_left_out():
    _, samples = _fleet(16, 3.0)
    base = power_statements(samples, intervals={h: 3.0 for h in samples})
    for rows in samples.values():  # a counter that went backwards (a reset) says nothing of the exposure
        rows.append(MetricSample(rows[0].host, "rdma:mlx5_9/1", SYMBOL, 1, "errors", delta=-5.0, rate=None,
                                 source="/sys/class/infiniband/mlx5_9/ports/1/counters/symbol_error"))
    assert [s.to_dict() for s in power_statements(samples, intervals={h: 3.0 for h in samples})] == \
        [s.to_dict() for s in base]


def _gathers(monkeypatch) -> list[int]:
    """How many times the fleet's counters are gathered, by any caller."""
    from fabricase.analysis import fleet, fleet_gather, power

    calls: list[int] = []
    real = fleet_gather.gather_counters

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(fleet, "gather_counters", counting)
    monkeypatch.setattr(power, "gather_counters", counting)
    return calls


def test_the_power_statements_read_the_fleet_steps_columns_instead_of_gathering_again(monkeypatch):
    """The diagnosis of 1,024 HGX hosts gathered every error counter of the fleet a second time for its power
    statements (0.4 s of the serial tail after the capture); analyze's fleet step hands its columns over."""
    from fabricase.analysis import fleet_groups

    hosts, samples = _fleet(16, 3.0, errors={(2, 1): 5})
    intervals = {h.host: 3.0 for h in hosts}
    fresh = power_statements(samples, intervals=intervals)
    calls = _gathers(monkeypatch)
    prepared = fleet_groups(samples, intervals=intervals, inputs=True)
    assert power_statements(samples, intervals=intervals, prepared=prepared) == fresh
    assert len(calls) == 1 and fresh and any(isinstance(s, DetectableRate) for s in fresh)


def test_columns_gathered_over_other_intervals_are_gathered_again(monkeypatch):
    from fabricase.analysis import fleet_groups

    hosts, samples = _fleet(16, 3.0, errors={(2, 1): 5})
    prepared = fleet_groups(samples, intervals={h.host: 30.0 for h in hosts}, inputs=True)
    calls = _gathers(monkeypatch)
    intervals = {h.host: 3.0 for h in hosts}
    assert power_statements(samples, intervals=intervals, prepared=prepared) == power_statements(
        samples, intervals=intervals)
    assert len(calls) == 2  # once with the prepared columns refused, once without them


def test_diagnose_capture_gathers_the_fleets_counters_once(tmp_path, monkeypatch):
    import fabricase.analysis as analysis_module
    from fabricase.pipeline import diagnose_capture

    hosts, samples = _fleet(16, 3.0, errors={(2, 1): 5})
    capture = _capture(hosts, 3.0)
    monkeypatch.setattr(analysis_module, "_host_outcomes", lambda capture, hosts, per_host: [
        analysis_module.Outcome(analysis_module._HostResult([], samples[h.host], None, []), None, h.status, h.reason)
        for h in hosts])
    calls = _gathers(monkeypatch)
    groups: list = []
    real_groups = analysis_module.fleet_groups
    monkeypatch.setattr(analysis_module, "fleet_groups", lambda *a, **kw: groups.append(real_groups(*a, **kw))
                        or groups[-1])
    analysis = diagnose_capture(capture)
    assert len(calls) == 1
    assert analysis.diagnosis.power == power_statements(samples, intervals={h.host: 3.0 for h in hosts})
    # The columns are stated from at once and then dropped: not kept through the rest of the analysis.
    assert len(groups) == 1 and groups[0].counters is None
