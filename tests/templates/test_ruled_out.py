"""What the capture ruled out: which checks ran on which hosts, and the negatives a ticket may state."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import ticket_cases as tc

from fabricase.models import CaptureItem, Evidence, Finding, HostCapture, HostStatus, Severity
from fabricase.templates.ruled_out import CHECKS, checks_run, ruled_out

FINDINGS_DOC = Path(__file__).resolve().parents[2] / "docs" / "findings.md"
# Kinds no check stands for, and why: the ticket says these some other way, or they are not negatives.
NOT_A_CHECK = {
    "host-unreachable": "capture status: the ticket lists hosts not captured",
    "shared-component-fault": "fires with the host findings it links",
    "fleet-too-small": "says a check could not judge (unjudged_by)",
    "switch-power-limit": "a limit of the port test: said in the diagnosis's limits, not a negative",
    "rdma-counter-saturated": "info: context, not a fault",
    "nccl-nic-errors": "from a job log given by the user, not a capture check",
    "nccl-timeout": "from a job log given by the user, not a capture check",
    "tcp-throughput-low": "iperf3 is not among the default perf tests",
    "perf-test-failed": "a failed tool run, not a negative",
    "probe-unreadable": "says the probe record could not be read, not a negative",
}
H100 = {
    "link-flap", "port-down", "speed", "phy", "netdev-errors", "rdma-errors", "discards", "pfc", "pcie-link",
    "pcie-aer", "nic-firmware", "xid", "sxid", "nvlink", "gpu-fabric", "gpu-memory", "config-drift", "congestion",
    "fleet",
}


def item(source, *, kind=None, rc=0, size=10, error=None):
    kind = kind or ("command" if source.startswith("cmd:") else "file")
    return CaptureItem(source, 0, kind, "x", "stream.fc1", size, "0" * 64, rc=rc, error=error)


def host(name, *items):
    return HostCapture(name, HostStatus.OK, "ssh", items=list(items))


def test_checks_run_on_an_h100_host_capture():
    run = checks_run(tc.host_captures())
    assert set(run) == set(tc.HOSTS)
    assert all(names == H100 for names in run.values())  # no DCGM, no perf tests captured


@pytest.mark.parametrize(
    "empty",
    [
        item("cmd:kernel-log", size=0),  # `command -v tool || exit 0`: the tool was missing
        item("cmd:kernel-log", rc=1),
        item("cmd:kernel-log", error="timed out after 20 s"),
        item("cmd:kernel-log", kind="stderr"),
    ],
)
def test_an_item_without_data_runs_no_check(empty):
    assert "xid" not in checks_run([host("h", empty, item("/proc/driver/nvidia/version"))])["h"]
    assert "xid" in checks_run([host("h", item("cmd:kernel-log"), item("/proc/driver/nvidia/version"))])["h"]


def test_a_check_needs_every_group_of_sources():
    """An SXid can only be ruled out on a host with NVSwitches, and only when its kernel log was read."""
    assert "sxid" not in checks_run([host("h", item("cmd:kernel-log"))])["h"]
    both = host("h", item("cmd:kernel-log"), item("/proc/driver/nvidia-nvswitch/devices/0000:05:00.0/information"))
    assert "sxid" in checks_run([both])["h"]


def test_ruled_out_lists_only_checks_that_ran_and_did_not_fire():
    run = {"gpu001": {"xid", "pcie-link"}, "gpu002": {"xid"}, "gpu003": {"xid", "pcie-link"}}
    fired = [Finding("nvidia-xid", Severity.CRITICAL, "gpu002", "gpu:3", "Xid 79")]
    clear, not_run = ruled_out(run, fired)
    assert [c.text for c in clear] == ["no PCIe downgrade on 2 of 3 hosts (1 without the data)"]
    assert "xid" not in {c.name for c in not_run}  # it fired: the finding says more than a negative
    assert {c.name for c in not_run} == {c.name for c in CHECKS if not c.opt_in} - {"xid", "pcie-link"}


def test_an_opt_in_test_nobody_ran_is_no_gap_and_one_that_ran_is_a_negative():
    """The probe runs only when asked for: a capture without it is not 'not checked'; one with it rules out."""
    run = {h: {"xid"} for h in ("a", "b")}
    assert "probe" not in {c.name for c in ruled_out(run, [])[1]}
    with_probe = {h: {"xid", "probe"} for h in ("a", "b")}
    clear, _ = ruled_out(with_probe, [])
    assert "no slow host, NIC or path in the probe's pair tests and bisection on any of the 2 hosts" in [
        c.text for c in clear]
    assert "probe" in checks_run([host("h", item("cmd:perf-probe-r1-ib_write_bw-001"))])["h"]


def test_wording_for_all_hosts_and_for_one():
    assert [c.text for c in ruled_out({"a": {"xid"}, "b": {"xid"}}, [])[0]] == ["no Xid on any of the 2 hosts"]
    assert [c.text for c in ruled_out({"a": {"xid"}}, [])[0]] == ["no Xid on the only host"]


def test_a_fleet_comparison_needs_enough_hosts_and_a_fleet_to_judge():
    three = {h: {"config-drift", "fleet"} for h in ("a", "b", "c")}
    four = three | {"d": {"config-drift", "fleet"}}
    assert "config-drift" in {c.name for c in ruled_out(three, [])[1]}
    assert "config-drift" in {c.check.name for c in ruled_out(four, [])[0]}
    too_small = Finding("fleet-too-small", Severity.INFO, "a", "fleet", "cannot judge")
    clear, not_run = ruled_out(four, [too_small])
    assert "fleet" in {c.name for c in not_run} and "fleet" not in {c.check.name for c in clear}


def test_every_documented_kind_is_a_check_or_says_why_not():
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", FINDINGS_DOC.read_text(), re.M))
    kinds = {k for k in documented if "-" in k}  # the kinds tables; single words are components and severities
    covered = set().union(*(c.kinds for c in CHECKS))
    assert covered <= kinds, covered - kinds  # no check waits for a kind nothing emits
    assert kinds - covered - set(NOT_A_CHECK) == set()


def test_check_names_are_unique_and_negatives_read_as_such():
    names = [c.name for c in CHECKS]
    assert len(names) == len(set(names))
    assert all(c.what.startswith("no ") for c in CHECKS)


def test_checks_run_cost_on_a_large_fleet():
    """1,024 hosts x 4,000 items: one sort and a binary search per prefix per host (measured in the report,
    not asserted in time); here only that the answer is right at that size."""
    sources = [f"/sys/class/net/eth{i % 16}/statistics/c{i}" for i in range(3000)]
    sources += [f"/sys/class/infiniband/mlx5_{i % 8}/ports/1/counters/c{i}" for i in range(1000)]
    big = [host(f"gpu{i:04d}", *(item(s) for s in sources)) for i in range(64)]
    run = checks_run(big)
    expected = {"link-flap", "port-down", "speed", "netdev-errors", "rdma-errors", "discards", "congestion", "fleet"}
    assert len(run) == 64 and all(names == expected for names in run.values())


def _suspect(host, verdict, components=("rdma:mlx5_3/1",)):
    from fabricase.diagnosis import VERDICTS, Suspect

    v = VERDICTS[verdict]
    return Suspect(id=f"S-{host}", host=host, unit="nic-port", components=list(components), verdict=verdict,
                   verdict_text=v.text, severity=Severity.MAJOR, confidence=0.95, q_value=None, owner=v.owner,
                   action="a", evidence=["e"], identity={}, findings=[])


THREE = {h: {"phy", "rdma-errors", "nvlink", "xid", "fleet"} for h in ("gpu001", "gpu002", "gpu003")}


def test_no_phy_line_beside_a_suspect_with_symbol_errors():
    """The issue's ticket said "no PHY, FEC or FCS errors" next to a port with symbol errors: a symbol error is a
    PHY error whatever rule reported it (here rdma-symbol-errors and a fleet outlier on the PHY counter)."""
    symbol = Finding("rdma-symbol-errors", Severity.MAJOR, "gpu002", "rdma:mlx5_3/1", "symbol_error +40",
                     evidence=[Evidence("phy.symbol_errors_uncorrected.delta", 40, "errors", baseline=0)])
    outlier = Finding("fleet-outlier", Severity.MAJOR, "gpu002", "rdma:mlx5_3/1", "outlier",
                      evidence=[Evidence("phy.symbol_errors_uncorrected.delta", 40, "errors", baseline=0.1)])
    for fired in ([symbol], [outlier]):
        clear, _ = ruled_out(THREE, fired, suspects=[_suspect("gpu002", "bad-link")])
        texts = [c.text for c in clear]
        assert "no PHY, FEC or FCS errors on the other 2 hosts" in texts, texts
        assert not any(t.startswith("no PHY") and "any of the" in t for t in texts)


def test_a_suspect_verdict_excludes_its_topic_even_without_a_finding_of_its_kinds():
    """Xid 74 is an NVLink error: beside that suspect, NVLink is not ruled out on its host."""
    xid = Finding("nvidia-xid", Severity.MAJOR, "gpu003", "gpu:2", "Xid 74",
                  evidence=[Evidence("xid_74", 1, "events")])
    clear, _ = ruled_out(THREE, [xid], suspects=[_suspect("gpu003", "nvlink-errors", ("gpu:2",))])
    texts = [c.text for c in clear]
    assert "no NVLink errors or inactive links on the other 2 hosts" in texts
    assert "no Xid on the other 2 hosts" in texts


def test_a_topic_that_fired_beside_no_suspect_is_not_ruled_out_at_all():
    noise = Finding("rdma-transport-errors", Severity.MINOR, "gpu001", "rdma:mlx5_1/1", "out_of_sequence +1",
                    evidence=[Evidence("rdma.out_of_sequence.delta", 1, "packets")])
    clear, not_run = ruled_out(THREE, [noise], suspects=[_suspect("gpu002", "bad-link")])
    assert "rdma-errors" not in {c.check.name for c in clear} | {c.name for c in not_run}
    assert "rdma-errors" not in {c.check.name for c in ruled_out(THREE, [noise])[0]}  # without suspects, as before


def test_the_other_hosts_wording():
    from fabricase.templates.ruled_out import CHECKS, CheckResult

    phy = next(c for c in CHECKS if c.name == "phy")
    assert CheckResult(phy, 15, 16, excluded=1).text == "no PHY, FEC or FCS errors on the other 15 hosts"
    assert CheckResult(phy, 1, 2, excluded=1).text == "no PHY, FEC or FCS errors on the other host"
    assert CheckResult(phy, 12, 16, excluded=1).text == (
        "no PHY, FEC or FCS errors on 12 of the other 15 hosts (3 without the data)")
