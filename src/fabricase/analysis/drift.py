"""Configuration drift: hosts whose fabric configuration differs from the fleet's majority.

Pure: host -> its flat configuration record (`fabricase.analysis.hostconfig.host_config`) in, findings out.
For every key, the fleet majority is the value held by at least 60 % of the hosts that report the key (a None
value is "not captured" and does not count), among at least 4 such hosts; each host with another value is
drift. A host's drifting keys are grouped into one `config-drift` finding per component (`netdev:<if>`,
`rdma:<dev>/<port>`, `fabric-manager`, or `host` for the kernel and driver module versions).

Severity: major for PFC priorities, ECN, trust mode and MTU on a fabric port (a port that carries RDMA: the
netdev of an RDMA port in some host's record, or a port the fleet runs PFC on); minor for versions (driver,
firmware, kernel, modules, fabric manager), the same settings on other ports, and any other key.
Not compared: `host`, and per-port `bus_info`, `speed_mbps` and `lanes` (hardware placement and link state,
judged by the link rules, not configuration).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from fabricase.models import Evidence, Finding, Severity

__all__ = ["CONFIG_DRIFT", "MIN_HOSTS", "MIN_SHARE", "config_drift_findings", "fleet_majority"]

CONFIG_DRIFT = "config-drift"
MIN_HOSTS = 4
MIN_SHARE = 0.6
_SKIPPED_ATTRS = {"bus_info", "speed_mbps", "lanes"}
_FABRIC_ATTRS = {"mtu", "pfc_enabled", "trust", "ecn_np_enabled", "ecn_rp_enabled"}
_PRIORITY_ATTRS = {
    "pfc_enabled": "PFC",
    "ecn_np_enabled": "ECN (notification point)",
    "ecn_rp_enabled": "ECN (reaction point)",
}
_VERSION_LABELS = {"driver_version": "driver version", "firmware": "firmware", "driver": "driver"}


def _split(key: str) -> tuple[str, str | None, str]:
    """(component, port or None, attribute) of a host_config key."""
    if key == "kernel":
        return "host", None, "kernel"
    head, _, attr = key.rpartition(".")
    if head.startswith("netdev."):
        port = head[len("netdev."):]
        return f"netdev:{port}", port, attr
    if head.startswith("rdma."):
        return f"rdma:{head[len('rdma.'):]}", None, attr
    if head.startswith("module."):
        return "host", None, key
    if head.replace("_", "-") == "fabric-manager":
        return "fabric-manager", None, attr
    return "host", None, key


def fleet_majority(values: Mapping[str, Any]) -> tuple[Any, int, int] | None:
    """(majority value, hosts holding it, hosts reporting a value) over host -> value, or None when fewer than
    MIN_HOSTS hosts report a value or no value reaches MIN_SHARE of them."""
    present = [v for v in values.values() if v is not None]
    if len(present) < MIN_HOSTS:
        return None
    value, count = min(Counter(present).items(), key=lambda vc: (-vc[1], str(vc[0])))
    if count < MIN_SHARE * len(present):
        return None
    return value, count, len(present)


def _prio_set(value: Any) -> set[str]:
    return {p for p in str(value).split(",") if p}


def _prio_words(prios: set[str]) -> str:
    ordered = sorted(prios, key=lambda p: (len(p), p))
    return f"priority {ordered[0]}" if len(ordered) == 1 else f"priorities {','.join(ordered)}"


def _clause(attr: str, value: Any, majority: Any, count: int, total: int) -> str:
    """'PFC off on priority 3 while 1,019 of 1,024 hosts enable it'."""
    hosts = f"{count:,} of {total:,} hosts"
    if attr in _PRIORITY_ATTRS:
        name, have, want = _PRIORITY_ATTRS[attr], _prio_set(value), _prio_set(majority)
        if have < want:
            missing = want - have
            return (f"{name} off on {_prio_words(missing)} while {hosts} enable "
                    f"{'it' if len(missing) == 1 else 'them'}")
        if want < have:
            return f"{name} on {_prio_words(have - want)} while {hosts} leave it off"
        mine = f"on {_prio_words(have)}" if have else "off"
        theirs = f"on {_prio_words(want)}" if want else "off"
        return f"{name} {mine} while {hosts} have it {theirs}"
    if attr == "mtu":
        return f"MTU {value} while {hosts} use {majority}"
    if attr == "trust":
        return f"trust mode {value} while {hosts} use {majority}"
    if attr == "kernel":
        return f"kernel {value} while {hosts} run {majority}"
    if attr.startswith("module.") and attr.endswith(".version"):
        return f"{attr[len('module.'):-len('.version')]} module version {value} while {hosts} run {majority}"
    if attr in _VERSION_LABELS:
        return f"{_VERSION_LABELS[attr]} {value} while {hosts} run {majority}"
    if attr == "version":
        return f"version {value} while {hosts} run {majority}"
    return f"{attr} = {value} while {hosts} have {majority}"


def config_drift_findings(configs: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """One `config-drift` finding per (host, component) whose configuration differs from the fleet majority,
    sorted by host and component. configs: host -> host_config record."""
    keys = sorted({k for record in configs.values() for k in record} - {"host"})
    fabric_ports = {
        port
        for record in configs.values()
        for key, value in record.items()
        if key.startswith("rdma.") and key.endswith(".netdev") and isinstance(value, str)
        for port in value.split(",")
        if port
    }
    for key in keys:  # ports the fleet runs PFC on are fabric ports too
        component, port, attr = _split(key)
        found = fleet_majority({h: r.get(key) for h, r in configs.items()}) if attr == "pfc_enabled" else None
        if port and found and found[0]:
            fabric_ports.add(port)
    drift: dict[tuple[str, str], list[tuple[str, str, Severity, float, Evidence]]] = {}
    for key in keys:
        component, port, attr = _split(key)
        if attr in _SKIPPED_ATTRS:
            continue
        values = {host: record.get(key) for host, record in configs.items()}
        found = fleet_majority(values)
        if found is None:
            continue
        majority, count, total = found
        for host in sorted(values):
            value = values[host]
            if value is None or value == majority:
                continue
            fabric = attr in _FABRIC_ATTRS and port in fabric_ports
            severity = Severity.MAJOR if fabric else Severity.MINOR
            evidence = Evidence(key, _shown(value), "config", baseline=_shown(majority))
            clause = _clause(attr, value, majority, count, total)
            drift.setdefault((host, component), []).append((key, clause, severity, count / total, evidence))

    findings = []
    for (host, component), entries in sorted(drift.items()):
        entries.sort(key=lambda e: (e[2].rank, e[0]))
        findings.append(Finding(
            kind=CONFIG_DRIFT,
            severity=entries[0][2],
            host=host,
            component=component,
            summary=f"{host}{_subject(component)} has " + "; ".join(e[1] for e in entries),
            evidence=[e[4] for e in sorted(entries, key=lambda e: e[0])],
            confidence=round(min(e[3] for e in entries), 3),
        ))
    return findings


def _shown(value: Any) -> Any:
    """Evidence value: ints as numbers, strings as they are, with "" (no priority enabled) kept as ""."""
    return value if isinstance(value, int | float | str) else str(value)


def _subject(component: str) -> str:
    """' eth2' for netdev:eth2, ' mlx5_0/1' for rdma:mlx5_0/1, ' fabric manager', '' for the host."""
    if component == "host":
        return ""
    if component == "fabric-manager":
        return " fabric manager"
    return " " + component.partition(":")[2]
