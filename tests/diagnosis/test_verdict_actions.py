"""Owner and action per verdict: every verdict has an owner, and its action reads without a missing field and
without doubled words for a host suspect of every unit and for a shared one."""

from __future__ import annotations

import re

import pytest
from suspect_builders import CRITICAL, MAJOR, finding, nic_port_hardware, outcomes, xid

from fabricase.diagnosis import KIND_VERDICTS, VERDICTS, diagnose, verdict_of
from fabricase.diagnosis.core import action_text
from fabricase.diagnosis.verdicts import ACTION_FIELDS, COMPUTED_KINDS
from fabricase.models import Evidence

# One unit of each kind, as the diagnosis names it: (unit, components).
UNITS = [
    ("nic-port", ["rdma:mlx5_3/1", "netdev:ens4np0", "pcie:0000:4d:00.0"]),
    ("nic-port", ["netdev:ens4np0"]),
    ("nic", ["rdma:mlx5_0", "pcie:0000:18:00.0", "rdma:mlx5_0/1", "rdma:mlx5_0/2"]),
    ("gpu", ["gpu:3", "pcie:0000:9b:00.0", "nvlink:3/5"]),
    ("gpu", ["pcie:0000:5d:00.0", "pcie:0000:5d:00"]),
    ("pcie-device", ["pcie:0000:2a:00.0"]),
    ("nvswitch", ["nvswitch:0000:05:00.0"]),
    ("fabric-manager", ["fabric-manager"]),
    ("imex", ["imex"]),
    ("host", ["host"]),
]


def _doubled(text: str) -> list[str]:
    words = re.findall(r"[\w.:/()-]+", text.lower())
    return [a for a, b in zip(words, words[1:], strict=False) if a == b]


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_every_verdict_has_an_owner_text_and_an_action_for_every_unit(name):
    v = VERDICTS[name]
    assert v.name == name and v.owner in ("provider", "operator", "application")
    assert v.text.strip() and v.title.strip() and v.action.strip()
    assert set(re.findall(r"{(\w+)}", v.action)) <= set(ACTION_FIELDS), v.action
    for unit, components in UNITS:
        text = action_text(v, "gpu003", unit, components)
        assert text and text[0].isupper() and text.endswith("."), text
        assert "{" not in text and "PCI device 0000:5d" not in text
        assert text.count("gpu003") <= 1 or name in ("fabric-manager-down",), text
        assert not _doubled(text), (text, _doubled(text))
        assert " of of " not in text and "NIC NIC" not in text
    shared = action_text(v, None, "shared", ["switch:leaf-3"], {"gpu001", "gpu002"})
    assert shared and "{" not in shared and not _doubled(shared), shared


def test_every_kind_has_a_verdict():
    assert set(KIND_VERDICTS.values()) <= set(VERDICTS)
    assert not set(COMPUTED_KINDS) - {"pfc-storm"} & set(KIND_VERDICTS)


def test_config_drift_is_the_operators_with_a_set_like_the_fleet_action():
    drift = finding("config-drift", "netdev:ens4np0", evidence=[
        Evidence("netdev.ens4np0.pfc_enabled", "", "config", "3"),
        Evidence("netdev.ens4np0.trust", "pcp", "config", "dscp")])
    [s] = diagnose([drift], hosts=outcomes("gpu001"), hardware={"gpu001": nic_port_hardware()}).suspects
    assert s.verdict == "configuration-drift" and s.owner == "operator"
    assert s.action == ("Set pfc_enabled and trust on NIC port mlx5_3/1 (ens4np0) on gpu001 like the rest of the "
                        "fleet (pfc_enabled 3 where this host has none; trust dscp where this host has pcp).")


def test_one_drifting_setting_reads_plainly():
    drift = finding("config-drift", "host", evidence=[Evidence("host.mtu", 1500, "config", 9000)])
    [s] = diagnose([drift], hosts=outcomes("gpu001")).suspects
    assert s.action == "Set mtu on gpu001 like the rest of the fleet (9000 where this host has 1500)."


@pytest.mark.parametrize("code, verdict, owner", [
    (13, "application-error", "application"), (31, "application-error", "application"),
    (43, "application-error", "application"), (79, "gpu-off-bus", "provider"), (48, "gpu-memory-errors", "provider"),
    (74, "nvlink-errors", "provider"), (119, "gpu-fault", "provider")])
def test_xid_codes_pick_verdict_and_owner(code, verdict, owner):
    [s] = diagnose([xid(code, "gpu:3")], hosts=outcomes("gpu001")).suspects
    assert (s.verdict, s.owner) == (verdict, owner)
    assert VERDICTS[s.verdict].owner == owner


def test_an_application_xid_beside_a_hardware_one_is_the_hardware_verdict():
    f = finding("nvidia-xid", "gpu:3", severity=CRITICAL,
                evidence=[Evidence("xid_13", 4, "events"), Evidence("xid_79", 1, "events")])
    assert verdict_of(f) == "gpu-off-bus"


def test_xid_79_asks_the_provider_to_repair_the_gpu():
    [s] = diagnose([xid(79, "gpu:3")], hosts=outcomes("gpu001")).suspects
    assert s.action == "Repair or replace GPU 3 on gpu001: it fell off the bus."


@pytest.mark.parametrize("metric, verdict", [("pfc.tx_pause_us.p3.rate", "pfc-storm-source"),
                                             ("pfc.rx_pause_us.p3.rate", "congestion-victim")])
def test_congestion_direction_picks_source_or_victim(metric, verdict):
    for kind in ("congestion-outlier", "pfc-storm"):
        assert verdict_of(finding(kind, "netdev:eth0", evidence=[Evidence(metric, 0.5, "ratio")])) == verdict


def test_a_pause_storm_event_is_the_source():
    f = finding("pfc-storm", "netdev:eth0", severity=MAJOR, evidence=[Evidence("pfc.pause_storm_events.delta", 1,
                                                                               "events", 0)])
    assert verdict_of(f) == "pfc-storm-source"
