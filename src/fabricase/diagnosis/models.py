"""The diagnosis records: what people and providers read (docs/diagnosis.md). Plain dataclasses, JSON-ready."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from fabricase.diagnosis.naming import NOUNS, component_words, fmt_number, plural
from fabricase.models import Severity

if TYPE_CHECKING:
    from fabricase.analysis.power import PowerStatement

__all__ = [
    "OWNERS",
    "Background",
    "Diagnosis",
    "HostHardware",
    "HostOutcome",
    "Owner",
    "Suspect",
]

# Who repairs or reconfigures it. A cloud desk is given only provider-owned suspects.
Owner = str  # "provider" | "operator" | "application"
OWNERS = ("provider", "operator", "application")


@dataclass
class Suspect:
    """One physical thing to repair, replace or reconfigure (a NIC port, a NIC, a GPU, an NVSwitch, the fabric
    manager or IMEX of a host, a host, or a shared switch, rack, network node, block or sub-block)."""

    id: str  # stable across runs of the same capture: a hash of host, unit and owner
    host: str | None  # None for a shared component
    unit: str  # "nic-port" | "nic" | "gpu" | "pcie-device" | "nvswitch" | "fabric-manager" | "imex" | "host" | "shared"
    components: list[str]  # the primary name first, then its aliases: rdma:mlx5_3/1, netdev:ens4np0, pcie:...
    verdict: str  # a verdicts.VERDICTS key, e.g. "bad-link"
    verdict_text: str  # the verdict in a fabric engineer's words: "bad link (cable, optic or switch port)"
    severity: Severity
    confidence: float | None
    q_value: float | None
    owner: Owner
    action: str  # what we ask the owner to do, in the owner's terms
    evidence: list[str]  # three to five lines a person reads, each against the fleet
    identity: dict[str, str]  # what the owner needs to find the part: instance_id, pci, node_guid, port_guid, netdev,
    # mac, serial, uuid, ... (docs/diagnosis.md lists every key)
    findings: list[str]  # ids of the findings behind it (diagnosis.finding_id), strongest first
    key_number: str = ""  # the one number a terminal line shows: "symbol_error 40 in 5 s (fleet p99 0)"
    hosts: list[str] = field(default_factory=list)  # a shared component: the hosts below it that it hurts
    related: list[str] = field(default_factory=list)  # other suspects' ids that look like the same fault

    @property
    def name(self) -> str:
        """`gpu003 mlx5_5/1 (ens6np0)`: the host and the primary component in the engineer's words."""
        return suspect_name(self)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = str(self.severity)
        d["name"] = self.name
        return d


@dataclass
class Background:
    """Counters that rose at fleet-normal rates, summed up per fleet instead of one finding per port."""

    metric: str  # the normalized counter, e.g. rdma.out_of_sequence
    family: str  # component family: rdma, netdev, nvlink, pcie
    rose_on: int  # components on which it rose
    compared: int  # comparable components that report it
    median_rate: float | None  # per second, among those on which it rose
    unit: str = "/s"
    findings: list[str] = field(default_factory=list)  # the minor per-port findings folded into this line

    @property
    def text(self) -> str:
        return background_text(self)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["text"] = self.text
        return d


@dataclass
class HostOutcome:
    """What a capture says of one host, as the diagnosis counts it."""

    host: str
    status: str  # HostStatus value
    reason: str | None = None
    suspects: int = 0


@dataclass
class HostHardware:
    """One host's components and their aliases, read while its items are read for analysis.

    ports: RDMA port (`mlx5_3/1`) -> facts (netdev, pci, node_guid, port_guid, mac, firmware, hca_type, board_id,
    link_layer). netdevs: netdev (`ens4np0`) -> facts (rdma, pci, mac, driver, firmware). gpus: index (str) ->
    facts (pci, serial, uuid, model). pci: normalized PCI address (`0000:4d:00.0`) -> ("rdma", "mlx5_3") /
    ("netdev", "ens4np0") / ("gpu", "3"). GUIDs read `0xa088c20300da6300`. identity: host facts the provider needs
    (instance_id and provider from DMI, board_asset_tag, product_name, product_serial, physical_host_name,
    hostname)."""

    host: str
    ports: dict[str, dict[str, str]] = field(default_factory=dict)
    netdevs: dict[str, dict[str, str]] = field(default_factory=dict)
    gpus: dict[str, dict[str, str]] = field(default_factory=dict)
    pci: dict[str, tuple[str, str]] = field(default_factory=dict)
    identity: dict[str, str] = field(default_factory=dict)


@dataclass
class Diagnosis:
    """Findings turned into suspects, background lines and host counts: what the terminal, the ticket, the report
    and the metrics are built from."""

    suspects: list[Suspect]
    background: list[Background]
    hosts: list[HostOutcome]
    minor: list[str] = field(default_factory=list)  # ids of minor findings on no suspect and in no background line
    limits: list[str] = field(default_factory=list)  # what could not be judged ("fleet too small", ...)
    # What the capture could not rule out: analysis.power's statements (an interval too short, a fleet too small)
    power: list[PowerStatement] = field(default_factory=list)

    @property
    def hosts_captured(self) -> list[str]:
        return [h.host for h in self.hosts if h.status in ("ok", "partial")]

    @property
    def hosts_not_captured(self) -> list[HostOutcome]:
        return [h for h in self.hosts if h.status not in ("ok", "partial")]

    @property
    def hosts_with_suspects(self) -> list[str]:
        return sorted({s.host for s in self.suspects if s.host} | {h for s in self.suspects for h in s.hosts})

    @property
    def verdict_line(self) -> str:
        return verdict_line(self)

    @property
    def power_text(self) -> list[str]:
        """What the capture could not rule out, as the report and the ticket say it (analysis.power)."""
        from fabricase.analysis.power import power_sentences

        return power_sentences(self.power) if self.power else []

    @property
    def power_short(self) -> list[str]:
        """The same in a terminal line each."""
        from fabricase.analysis.power import power_short

        return power_short(self.power) if self.power else []

    def for_owner(self, owner: Owner) -> list[Suspect]:
        return [s for s in self.suspects if s.owner == owner]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict_line,
            "suspects": [s.to_dict() for s in self.suspects],
            "background": [b.to_dict() for b in self.background],
            "hosts": [asdict(h) for h in self.hosts],
            "minor_findings": list(self.minor),
            "limits": list(self.limits),
            # only when there is something to say: summaries of captures long and large enough stay as they were
            **({"power": [p.to_dict() for p in self.power], "power_text": self.power_text} if self.power else {}),
        }


def suspect_name(s: Suspect) -> str:
    if s.host is None:
        return component_words(s.components[:1]) if s.components else "shared component"
    what = component_words(s.components, s.unit)
    if s.unit == "host" or what == "host":
        return s.host
    return f"{s.host} {what}"


def background_text(b: Background) -> str:
    noun = NOUNS.get(b.family, "components")
    rate = f" (median {fmt_number(b.median_rate)}{b.unit})" if b.median_rate is not None else ""
    metric = b.metric.removeprefix("rdma.")
    return f"{metric} rose on {b.rose_on:,} of {b.compared:,} {noun} at fleet-normal rates{rate}"


def verdict_line(d: Diagnosis) -> str:
    """`8 suspects on 8 of 16 hosts; 8 hosts healthy; 2 hosts not captured`. Suspects count among the captured
    hosts only: a host that could not be captured is said so, not counted as one of the captured."""
    captured = d.hosts_captured
    captured_set = set(captured)
    on_captured = [s for s in d.suspects if s.host is None or s.host in captured_set]
    suspect_hosts = {h for s in on_captured for h in ({s.host} | set(s.hosts)) if h in captured_set}
    shared = [s for s in on_captured if s.host is None]
    healthy = [h for h in captured if h not in suspect_hosts]
    parts = []
    if on_captured:
        where = f"on {len(suspect_hosts):,} of {plural(len(captured), 'host')}"
        if shared and not (suspect_hosts - {h for s in shared for h in s.hosts}):
            where = f"({plural(len(shared), 'shared component')}) over {len(suspect_hosts):,} of " \
                    f"{plural(len(captured), 'host')}"
        parts.append(f"{plural(len(on_captured), 'suspect')} {where}")
    else:
        parts.append(f"no suspect on {plural(len(captured), 'host')}")
    parts.append(f"{plural(len(healthy), 'host')} healthy")
    if d.hosts_not_captured:
        parts.append(f"{plural(len(d.hosts_not_captured), 'host')} not captured")
    return "; ".join(parts)
