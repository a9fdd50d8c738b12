import json
import random

import pytest
from capture_builder import HEALTHY_COUNTERS, degraded_eth2, healthy_eth0, make_capture, sysfs_net, write_host

from fabricase.analysis import analyze, analyze_host, findings_from_json, findings_to_json
from fabricase.analysis.rules import RULES
from fabricase.errors import ParseError
from fabricase.models import Evidence, Finding, HostStatus, Severity

NET = "/sys/class/net"


def _rules_only(findings):
    """The per-host rule findings: a one-host capture also says the fleet is too small for statistics."""
    return [f for f in findings if f.kind != "fleet-too-small"]


def test_healthy_and_degraded_interface(tmp_path):
    hc = write_host(tmp_path, "gpu002", {**healthy_eth0(), **degraded_eth2()})
    findings = analyze(make_capture(tmp_path, [hc]))
    assert [f.kind for f in findings if f.kind == "fleet-too-small"] == ["fleet-too-small"]
    assert _rules_only(findings) == [
        Finding(
            "link-flap", Severity.MAJOR, "gpu002", "netdev:eth2",
            "eth2: link flapping, carrier_changes +4 (0.4/s) in 10 s",
            [Evidence("carrier_changes.delta", 4, "transitions", 0, f"{NET}/eth2/carrier_changes", 1)],
            confidence=0.95,
        ),
        Finding(
            "netdev-errors", Severity.MAJOR, "gpu002", "netdev:eth2",
            "eth2: rx_crc_errors +57 (5.7/s), rx_errors +57 (5.7/s) in 10 s",
            [
                Evidence("rx_crc_errors.delta", 57, "packets", 0, f"{NET}/eth2/statistics/rx_crc_errors", 1),
                Evidence("rx_errors.delta", 57, "packets", 0, f"{NET}/eth2/statistics/rx_errors", 1),
            ],
            confidence=0.95,
        ),
    ]  # fmt: skip


def test_healthy_host_has_no_findings(tmp_path):
    assert analyze(make_capture(tmp_path, [write_host(tmp_path, "gpu001", healthy_eth0())])) == []


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (HostStatus.UNREACHABLE, "ssh: connect to host gpu007 port 22: No route to host"),
        (HostStatus.TIMED_OUT, "no output after 120 s"),
        (HostStatus.AUTH_FAILED, "Permission denied (publickey)"),
        (HostStatus.FAILED, None),
    ],
)
def test_unreachable_host(tmp_path, status, reason):
    hc = write_host(tmp_path, "gpu007", {}, status=status, reason=reason, interval_s=None)
    assert analyze(make_capture(tmp_path, [hc])) == [
        Finding(
            "host-unreachable", Severity.MAJOR, "gpu007", "host",
            f"gpu007: capture {status}: {reason or 'no reason recorded'}",
            [Evidence("host_status", str(status), "state", "ok", "host.json")],
            confidence=0.9,
        )
    ]  # fmt: skip


def test_partial_host_is_analyzed_without_an_unreachable_finding(tmp_path):
    hc = write_host(tmp_path, "gpu003", degraded_eth2(), status=HostStatus.PARTIAL, reason="stream cut")
    assert [f.kind for f in _rules_only(analyze(make_capture(tmp_path, [hc])))] == ["link-flap", "netdev-errors"]


def test_minor_counters_and_drops_alone(tmp_path):
    files = sysfs_net("eth4", {"statistics/rx_missed_errors": "1\n"}, {"statistics/rx_missed_errors": "9\n"})
    files |= sysfs_net("eth5", {"statistics/rx_dropped": "100\n"}, {"statistics/rx_dropped": "160\n"})
    findings = analyze_host(write_host(tmp_path, "h", files))
    assert [(f.component, f.kind, f.severity, f.confidence) for f in findings] == [
        ("netdev:eth4", "netdev-errors", Severity.MINOR, 0.95),
        ("netdev:eth5", "netdev-errors", Severity.MINOR, 0.6),
    ]
    assert findings[1].summary == "eth5: rx_dropped +60 (6/s) in 10 s"


def test_wrapped_counter_lowers_confidence(tmp_path):
    files = sysfs_net("eth0", {"statistics/rx_frame_errors": f"{2**32 - 3}\n"}, {"statistics/rx_frame_errors": "4\n"})
    (finding,) = analyze_host(write_host(tmp_path, "h", files))
    assert finding.severity == Severity.MAJOR and finding.confidence == 0.8
    assert finding.evidence[0].value == 7


def test_reset_counter_gives_no_finding(tmp_path):
    files = sysfs_net("eth0", {"statistics/rx_crc_errors": "5000\n"}, {"statistics/rx_crc_errors": "3\n"})
    assert analyze_host(write_host(tmp_path, "h", files)) == []


def test_carrier_down_count_when_carrier_changes_is_absent(tmp_path):
    files = sysfs_net("eth0", {"carrier_down_count": "1\n"}, {"carrier_down_count": "2\n"})
    (finding,) = analyze_host(write_host(tmp_path, "h", files))
    assert finding.kind == "link-flap"
    assert finding.evidence == [
        Evidence("carrier_down_count.delta", 1, "transitions", 0, f"{NET}/eth0/carrier_down_count", 1)
    ]


def test_link_down_physical_only(tmp_path):
    files = sysfs_net("eth3", {"operstate": "down\n", "carrier": "0\n"}, {"operstate": "down\n", "carrier": "0\n"})
    files |= sysfs_net("eth9", {"operstate": "down\n", "carrier": ""})  # admin down: carrier read fails
    files |= sysfs_net("docker0", {"operstate": "down\n"}, {"operstate": "down\n"})
    files |= sysfs_net("veth12ab", {"operstate": "lowerlayerdown\n"})
    files |= sysfs_net("lo", {"operstate": "unknown\n"})
    assert analyze_host(write_host(tmp_path, "h", files)) == [
        Finding(
            "link-down", Severity.MINOR, "h", "netdev:eth3",
            "eth3: operstate down, no carrier (cable, transceiver or link partner)",
            [Evidence("operstate", "down", "state", "up", f"{NET}/eth3/operstate", 1),
             Evidence("carrier", 0, "flag", 1, f"{NET}/eth3/carrier", 1)],
            confidence=0.9,
        ),
        Finding(
            "link-down", Severity.MINOR, "h", "netdev:eth9",
            "eth9: operstate down, carrier unreadable, possibly administratively down",
            [Evidence("operstate", "down", "state", "up", f"{NET}/eth9/operstate", 0)],
            confidence=0.6,
        ),
    ]  # fmt: skip


KERNEL_LOG = """\
2026-11-29T22:59:58.000001+0000 gpu002 kernel: mlx5_core 0000:3b:00.0 eth2: Link down
2026-11-29T22:59:59.000002+0000 gpu002 kernel: mlx5_core 0000:3b:00.0 eth2: Link up
2026-11-29T23:00:00.000003+0000 gpu002 kernel: mlx5_core 0000:3b:00.0 eth2: Link down
2026-11-29T23:00:00.500000+0000 gpu002 kernel: docker0: Link is Down
2026-11-29T23:00:01.000004+0000 gpu002 kernel: NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, GPU has fallen off the bus.
2026-11-29T23:00:02.000005+0000 gpu002 kernel: NVRM: Xid (PCI:0000:9b:00): 45, pid=1234, name=python3, Ch 00000001
2026-11-29T23:00:03.000006+0000 gpu002 kernel: NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, GPU has fallen off the bus.
2026-11-29T23:00:04.000007+0000 gpu002 kernel: ata3: SATA link down (SStatus 0 SControl 300)
"""


def test_kernel_log_findings(tmp_path):
    hc = write_host(tmp_path, "gpu002", {(0, "cmd:kernel-log"): KERNEL_LOG})
    assert analyze_host(hc) == [
        Finding(
            "nvidia-xid", Severity.CRITICAL, "gpu002", "pcie:0000:9b:00",
            "GPU at PCI 0000:9b:00: Xid 45 ROBUST_CHANNEL_PREEMPTIVE_REMOVAL x1; "
            "79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS x2 in the kernel log, "
            "last at 2026-11-29T23:00:03.000006+0000",
            [Evidence("xid_45", 1, "events", None, "cmd:kernel-log", 0),
             Evidence("xid_79", 2, "events", None, "cmd:kernel-log", 0)],
            confidence=0.9,
        ),
        Finding(
            "kernel-link-down", Severity.MINOR, "gpu002", "netdev:eth2",
            "eth2: 2 link-down message(s) in the kernel log, last at 2026-11-29T23:00:00.000003+0000",
            [Evidence("kernel_link_down_events", 2, "events", None, "cmd:kernel-log", 0),
             Evidence("kernel_link_up_events", 1, "events", None, "cmd:kernel-log", 0)],
            confidence=0.7,
        ),
    ]  # fmt: skip


def test_failed_kernel_log_command_is_no_data(tmp_path):
    hc = write_host(tmp_path, "h", {(0, "cmd:kernel-log"): ""})
    hc.items[0].rc = 1
    assert analyze_host(hc) == []


def test_analyze_is_deterministic_and_order_independent(tmp_path):
    hosts = [
        write_host(tmp_path, "gpu002", {**healthy_eth0(), **degraded_eth2(), (0, "cmd:kernel-log"): KERNEL_LOG}),
        write_host(tmp_path, "gpu007", {}, status=HostStatus.UNREACHABLE, reason="timeout", interval_s=None),
        write_host(tmp_path, "gpu001", healthy_eth0()),
    ]
    first = findings_to_json(analyze(make_capture(tmp_path, hosts)))
    rng = random.Random(4)
    for _ in range(5):
        rng.shuffle(hosts)
        for hc in hosts:
            rng.shuffle(hc.items)
        assert findings_to_json(analyze(make_capture(tmp_path, hosts))) == first
    kinds = [(f["severity"], f["host"], f["component"], f["kind"]) for f in json.loads(first)]
    assert kinds == [
        ("critical", "gpu002", "pcie:0000:9b:00", "nvidia-xid"),  # Xid 79: fell off the bus (catalog)
        ("major", "gpu002", "netdev:eth2", "link-flap"),
        ("major", "gpu002", "netdev:eth2", "netdev-errors"),
        ("major", "gpu007", "host", "host-unreachable"),
        ("minor", "gpu002", "netdev:eth2", "kernel-link-down"),
        ("info", None, "fleet", "fleet-too-small"),
    ]


def test_findings_json_round_trip(tmp_path):
    findings = analyze(make_capture(tmp_path, [write_host(tmp_path, "gpu002", degraded_eth2())]))
    text = findings_to_json(findings)
    assert findings_from_json(text) == findings
    assert findings_from_json('{"findings": ' + text + "}") == findings
    assert text.endswith("\n") and '"severity": "major"' in text
    assert findings_to_json([]) == "[]\n"


@pytest.mark.parametrize("text", ["", "{", "{}", '"x"', '[{"kind": "x"}]', '[{"kind": "k", "severity": "bad"}]'])
def test_findings_from_bad_json(text):
    with pytest.raises(ParseError):
        findings_from_json(text)


def test_rules_are_registered_explicitly():
    assert [r.__name__ for r in RULES] == [
        "host_unreachable",
        "netdev_errors",
        "link_flap",
        "link_down",
    ]


def test_counters_tolerate_missing_interval(tmp_path):
    s1 = dict(HEALTHY_COUNTERS, **{"statistics/rx_crc_errors": "2\n"})
    hc = write_host(tmp_path, "h", sysfs_net("eth0", HEALTHY_COUNTERS, s1), interval_s=None)
    (finding,) = analyze_host(hc)
    assert finding.summary == "eth0: rx_crc_errors +2 between snapshots"
