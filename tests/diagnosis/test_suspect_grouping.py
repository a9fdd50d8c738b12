"""Findings -> suspects: one suspect per physical thing, named by all its aliases; every major or critical finding
in exactly one suspect; minor findings support a suspect of the same unit or fall to background / minor; ids stable
and independent of the findings' order."""

from __future__ import annotations

import hashlib
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from suspect_builders import (
    CRITICAL,
    INFO,
    MAJOR,
    MINOR,
    delta,
    finding,
    gpu_hardware,
    nic_port_hardware,
    outcomes,
    xid,
)

from fabricase.diagnosis import HostHardware, diagnose, finding_ids
from fabricase.models import Evidence, Finding, Severity


def _port_findings(host: str = "gpu001") -> list[Finding]:
    return [
        finding("rdma-symbol-errors", "rdma:mlx5_3/1", host, evidence=[delta("phy.symbol_errors_uncorrected", 40)]),
        finding("phy-errors", "netdev:ens4np0", host, evidence=[delta("phy.fcs_errors", 45)]),
        finding("pcie-aer", "pcie:0000:4d:00.0", host, evidence=[delta("pcie.aer_nonfatal", 2)]),
        finding("fleet-outlier", "netdev:ens4np0", host, CRITICAL, q_value=1e-9,
                evidence=[Evidence("phy.fcs_errors.delta", 45, "packets", 0.0)]),
    ]


def test_a_port_seen_as_rdma_netdev_and_pcie_is_one_suspect_named_by_all_three():
    d = diagnose(_port_findings(), hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()})
    [s] = d.suspects
    assert s.unit == "nic-port" and s.host == "gpu001"
    assert s.components[:3] == ["rdma:mlx5_3/1", "netdev:ens4np0", "pcie:0000:4d:00.0"]
    assert len(s.findings) == 4
    assert s.severity == CRITICAL and s.q_value == 1e-9
    assert s.verdict == "bad-link" and s.owner == "provider"
    assert s.name == "gpu001 mlx5_3/1 (ens4np0)"
    assert d.verdict_line == "1 suspect on 1 of 1 host; 0 hosts healthy"


def test_without_the_aliases_the_same_findings_are_three_suspects():
    # What the capture's aliases buy: without them rdma, netdev and pcie are three things.
    d = diagnose(_port_findings(), hosts=outcomes("gpu001"))
    assert len(d.suspects) == 3


def test_two_ports_of_one_host_are_two_suspects():
    hw = nic_port_hardware(port="mlx5_4/1", netdev="ens5np0", pci="0000:5d:00.0", hw=nic_port_hardware())
    findings = [finding("rdma-symbol-errors", "rdma:mlx5_3/1"), finding("phy-errors", "netdev:ens5np0")]
    d = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": hw})
    assert sorted(s.components[0] for s in d.suspects) == ["rdma:mlx5_3/1", "rdma:mlx5_4/1"]


def test_the_same_component_on_two_hosts_is_two_suspects():
    hardware = {h: nic_port_hardware(h) for h in ("gpu001", "gpu002")}
    d = diagnose(_port_findings("gpu001") + _port_findings("gpu002"), hosts=outcomes("gpu001", "gpu002"),
                 hardware=hardware)
    assert sorted(s.host for s in d.suspects) == ["gpu001", "gpu002"]
    assert len({s.id for s in d.suspects}) == 2


def test_a_gpus_xid_gpu_and_nvlink_findings_are_one_gpu_suspect():
    hw = gpu_hardware(HostHardware("gpu001"), "3", "0000:9b:00.0")
    findings = [xid(79), finding("gpu-memory-remap", "gpu:3"), finding("nvlink-inactive", "nvlink:3/5")]
    d = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": hw})
    [s] = d.suspects
    assert s.unit == "gpu" and s.verdict == "gpu-off-bus"
    assert s.components[:2] == ["gpu:3", "pcie:0000:9b:00.0"]
    assert {"pcie:0000:9b:00", "nvlink:3/5"} <= set(s.components)
    assert s.name == "gpu001 GPU 3"
    assert s.identity["serial"] == "1650124030003" and s.identity["pci"] == "0000:9b:00.0"


def test_a_gpu_known_only_by_its_pci_address_is_named_so():
    [s] = diagnose([xid(79, "pcie:0000:5d:00")], hosts=outcomes("gpu001")).suspects
    assert s.unit == "gpu"
    assert s.name == "gpu001 GPU at 0000:5d:00.0"
    assert "GPU at 0000:5d:00.0 on gpu001" in s.action and "PCI device" not in s.action
    assert s.identity["pci"] == "0000:5d:00.0"


def test_a_host_finding_related_to_a_shared_switch_goes_to_the_switch_suspect():
    shared = finding("shared-component-fault", "switch:leaf-3", None, MAJOR, q_value=1e-4,
                     evidence=[Evidence("flagged_under", 3, "hosts", 0.2), Evidence("hosts_under", 8, "hosts")])
    hosts = [finding("rdma-symbol-errors", "rdma:mlx5_0/1", h, related=["switch:leaf-3"])
             for h in ("gpu001", "gpu002", "gpu003")]
    d = diagnose(hosts + [shared], hosts=outcomes("gpu001", "gpu002", "gpu003", "gpu004"))
    [s] = d.suspects
    assert s.host is None and s.unit == "shared" and s.verdict == "switch-fault"
    assert s.hosts == ["gpu001", "gpu002", "gpu003"]
    assert len(s.findings) == 4
    assert s.name == "switch leaf-3"
    assert s.action.startswith("Check switch leaf-3:")
    assert s.evidence[0].startswith("3 of 8 hosts below it flagged")
    assert d.hosts_with_suspects == ["gpu001", "gpu002", "gpu003"]


def test_minor_findings_support_a_suspect_of_the_same_unit():
    findings = [finding("rdma-symbol-errors", "rdma:mlx5_3/1"),
                finding("rdma-transport-errors", "netdev:ens4np0", severity=MINOR)]
    d = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()})
    [s] = d.suspects
    assert s.findings == ["rdma-symbol-errors@gpu001/rdma:mlx5_3/1", "rdma-transport-errors@gpu001/netdev:ens4np0"]
    assert d.minor == [] and d.background == []


def test_minor_findings_on_no_suspect_are_minor_or_background():
    findings = [finding("rdma-transport-errors", "rdma:mlx5_1/1", severity=MINOR),
                finding("link-down", "netdev:eth9", severity=MINOR),
                finding("rdma-counter-saturated", "rdma:mlx5_2/1", severity=INFO)]
    d = diagnose(findings, hosts=outcomes("gpu001"))
    assert d.suspects == []
    # No samples: nothing to sum up per fleet, so the background kind stays a minor finding too; info is dropped.
    assert sorted(d.minor) == ["link-down@gpu001/netdev:eth9", "rdma-transport-errors@gpu001/rdma:mlx5_1/1"]


def test_a_port_with_provider_and_operator_findings_gives_one_suspect_per_owner():
    drift = finding("config-drift", "netdev:ens4np0", evidence=[Evidence("netdev.ens4np0.pfc_enabled", "", "config",
                                                                         "3")])
    findings = [finding("rdma-symbol-errors", "rdma:mlx5_3/1"), drift]
    d = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()})
    assert sorted(s.owner for s in d.suspects) == ["operator", "provider"]
    assert len({s.id for s in d.suspects}) == 2


def test_an_rdma_device_level_finding_is_its_nic_not_the_host():
    hw = nic_port_hardware(port="mlx5_0/1", netdev="ib0", pci="0000:18:00.0")
    hw.ports["mlx5_0/2"] = {"pci": "0000:18:00.0"}
    [s] = diagnose([finding("nic-firmware-fault", "rdma:mlx5_0")], hosts=outcomes("gpu001"),
                   hardware={"gpu001": hw}).suspects
    assert s.unit == "nic" and s.components[0] == "rdma:mlx5_0"
    assert "NIC mlx5_0 on gpu001" in s.action and s.identity["pci"] == "0000:18:00.0"


def test_a_pcie_finding_on_a_one_port_nic_joins_its_port():
    findings = [finding("pcie-downgraded", "pcie:0000:4d:00.0"), finding("rdma-symbol-errors", "rdma:mlx5_3/1")]
    d = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()})
    [s] = d.suspects
    assert s.verdict == "bad-link" and len(s.findings) == 2


# Property: over random finding lists, every major/critical finding is in exactly one suspect, ids are unique, and
# the diagnosis does not depend on the findings' order.

HOSTS = ("gpu001", "gpu002")
COMPONENTS = ("rdma:mlx5_3/1", "netdev:ens4np0", "pcie:0000:4d:00.0", "rdma:mlx5_4/1", "netdev:eth9", "gpu:3",
              "nvlink:3/5", "pcie:0000:9b:00", "pcie:0000:5d:00.0", "nvswitch:0000:05:00.0", "fabric-manager", "imex",
              "host", "rdma:mlx5_0")
KINDS = ("rdma-symbol-errors", "phy-errors", "link-flap", "pcie-downgraded", "nvidia-xid", "nvlink-errors",
         "config-drift", "fleet-outlier", "congestion-outlier", "rdma-transport-errors", "nccl-timeout",
         "gpu-memory-remap", "no-such-kind")
SEVERITIES = (CRITICAL, MAJOR, MINOR, INFO)

_finding = st.builds(
    lambda kind, host, comp, sev, code, rel, conf: Finding(
        kind, sev, host, comp, f"{kind} {comp}",
        [Evidence(f"xid_{code}" if kind == "nvidia-xid" else "phy.fcs_errors.delta", code, "events", 0)],
        conf, None, ["switch:leaf-1"] if rel else []),
    st.sampled_from(KINDS), st.sampled_from(HOSTS), st.sampled_from(COMPONENTS), st.sampled_from(SEVERITIES),
    st.sampled_from((13, 48, 74, 79, 119)), st.booleans(), st.one_of(st.none(), st.floats(0, 1)))
_shared = st.builds(lambda sev, comp: Finding("shared-component-fault", sev, None, comp, "shared", [], 0.99, 1e-4),
                    st.sampled_from(SEVERITIES), st.sampled_from(("switch:leaf-1", "rack:r1")))


def _hardware() -> dict[str, HostHardware]:
    return {h: gpu_hardware(nic_port_hardware(h)) for h in HOSTS}


def _by_identity(d, findings: list[Finding]) -> dict[str, list[tuple]]:
    """Suspect id -> its findings as (kind, host, component, severity), sorted: comparable across orders."""
    ids = dict(zip(finding_ids(findings), findings, strict=True))
    return {s.id: sorted((ids[fid].kind, ids[fid].host or "", ids[fid].component, ids[fid].severity.rank)
                         for fid in s.findings) for s in d.suspects}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_finding, _shared), max_size=30), st.randoms(use_true_random=False),
       st.booleans())
def test_every_serious_finding_is_in_exactly_one_suspect(findings, rnd: random.Random, with_hardware):
    hardware = _hardware() if with_hardware else None
    d = diagnose(findings, hosts=outcomes(*HOSTS), hardware=hardware)
    ids = finding_ids(findings)
    placed = [fid for s in d.suspects for fid in s.findings]
    assert len(placed) == len(set(placed)), "a finding in two suspects"
    for fid, f in zip(ids, findings, strict=True):
        if f.severity in (Severity.CRITICAL, Severity.MAJOR):
            assert fid in placed
        elif f.severity == Severity.MINOR:
            places = (fid in placed) + (fid in d.minor) + any(fid in b.findings for b in d.background)
            assert places == 1, fid
    assert len({s.id for s in d.suspects}) == len(d.suspects)
    for s in d.suspects:
        assert s.owner in ("provider", "operator", "application")
        assert s.action and "{" not in s.action
        assert s.severity in (Severity.CRITICAL, Severity.MAJOR)
    # The same findings in another order: the same suspects, with the same findings, in the same order.
    shuffled = list(findings)
    rnd.shuffle(shuffled)
    again = diagnose(shuffled, hosts=outcomes(*HOSTS), hardware=hardware)
    assert [s.id for s in again.suspects] == [s.id for s in d.suspects]
    assert _by_identity(again, shuffled) == _by_identity(d, findings)
    assert [(s.verdict, s.owner, s.action, s.components) for s in again.suspects] == \
        [(s.verdict, s.owner, s.action, s.components) for s in d.suspects]


def test_suspect_ids_are_stable_across_runs():
    # Pinned: an id is a hash of host, unit and owner, so the same capture names the same suspect in every run
    # (tickets and the tracker refer to it).
    d = diagnose(_port_findings(), hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()})
    assert [s.id for s in d.suspects] == ["S" + hashlib.sha256(b"gpu001|port:mlx5_3/1|provider").hexdigest()[:10]]
    again = diagnose(list(reversed(_port_findings())), hosts=outcomes("gpu001"),
                     hardware={"gpu001": nic_port_hardware()})
    assert again.to_dict() == d.to_dict()


def test_an_unmapped_address_an_xid_names_is_a_gpu_in_any_order():
    findings = [finding("pcie-aer", "pcie:0000:9b:00.0"), xid(48)]
    for order in (findings, findings[::-1]):
        [s] = diagnose(order, hosts=outcomes("gpu001")).suspects
        assert s.unit == "gpu" and s.name == "gpu001 GPU at 0000:9b:00.0"
