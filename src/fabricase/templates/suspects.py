"""The ticket's facts from the diagnosis: which suspects a desk gets, the title, the scope line, and one flat fact
dict per suspect for its section (verdict, where, strength, evidence, identity, action).

A desk is given only the suspects its owner can act on (`for_desk`): a cloud's desk the provider's (hardware,
cabling, switches); configuration drift and application errors go to the user's summary. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fabricase.diagnosis import VERDICTS, Diagnosis, HostOutcome, Suspect, diagnose, pci_key
from fabricase.diagnosis.naming import fmt_number, plural
from fabricase.models import Finding, Placement

__all__ = [
    "IDENTITY_LABELS",
    "EVIDENCE_SHOWN",
    "SUSPECT_HEADING",
    "TITLE_MAX",
    "diagnosis_of",
    "fault_phrase",
    "for_desk",
    "host_outcomes",
    "is_suspect_section",
    "leftover_history",
    "scope_line",
    "shorten",
    "suspect_facts",
    "suspect_history",
    "suspect_hosts",
    "ticket_title",
]

TITLE_MAX = 120
TITLE_HEAD = "[fabricase] "
# A suspect's section heading; bundler.body keeps such a section whole or leaves it out, never cuts inside it.
SUSPECT_HEADING = "Suspect {index} of {total}: {what}"
_SUSPECT_SECTION = re.compile(r"^Suspect \d+ of \d+: ")

# Verdicts about a link, whose title says which fabric: "RoCE link errors", "InfiniBand link flapping".
_LINK_VERDICTS = frozenset({"bad-link", "link-down", "link-flapping", "speed-downshift"})
_LINK_LAYERS = {"ethernet": "RoCE", "infiniband": "InfiniBand"}

# identity key -> how the ticket names it, in the order a provider's engineer looks for the part: where the
# machine is, then the part's own ids. Keys not listed follow, sorted; _HIDDEN ones are said elsewhere.
IDENTITY_LABELS: dict[str, str] = {
    "instance_id": "instance",
    "zone": "zone",
    "physical_host": "physical host",
    "physical_host_name": "physical host",
    "board_asset_tag": "asset tag",
    "chassis_asset_tag": "chassis tag",
    "product_serial": "host serial",
    "pci": "PCI",
    "netdev": "netdev",
    "mac": "MAC",
    "node_guid": "GUID",
    "port_guid": "port GUID",
    "serial": "serial",
    "uuid": "UUID",
    "model": "model",
    "hca_type": "HCA",
    "board_id": "board id",
    "firmware": "firmware",
    "fw": "firmware",
    "topology": "below",
    "instance_ids": "instances",
}
EVIDENCE_SHOWN = 3  # evidence lines in a ticket's suspect section; summary.json has them all
# Said elsewhere (the title's fabric, the hosts section's region, type and placement group) or not the part's.
_HIDDEN = frozenset({"hostname", "link_layer", "instance_type", "region", "placement_group", "provider", "rdma",
                     "driver", "name", "product_name"})
# host summary identity keys a provider can find a machine by (the kernel or BIOS version is the user's concern)
_HOST_KEYS = ("board_asset_tag", "product_serial", "chassis_asset_tag", "product_name", "physical_host_name")


def host_outcomes(hosts: Iterable[Mapping[str, Any]]) -> list[HostOutcome]:
    """HostOutcome records from host summaries (`escalate.host_summaries`: host, status, reason, identity)."""
    return [HostOutcome(str(h["host"]), str(h["status"]), h.get("reason")) for h in hosts]


def diagnosis_of(findings: Sequence[Finding], hosts: Iterable[Mapping[str, Any]],
                 placements: Sequence[Placement] = ()) -> Diagnosis:
    """The diagnosis of findings alone (no hardware aliases or fleet samples): what a caller that has not
    diagnosed the capture gets."""
    return diagnose(findings, hosts=host_outcomes(hosts), placements=placements)


def for_desk(diagnosis: Diagnosis, owner: str) -> tuple[list[Suspect], list[Suspect]]:
    """(the suspects the desk's owner acts on, the others), each most severe first."""
    mine = [s for s in diagnosis.suspects if s.owner == owner]
    return mine, [s for s in diagnosis.suspects if s.owner != owner]


def suspect_hosts(s: Suspect) -> list[str]:
    """The host of a suspect, or the hosts below a shared one."""
    return [s.host] if s.host else list(s.hosts)


def is_suspect_section(title: str) -> bool:
    """Whether a ticket section (by its heading) is one suspect's."""
    return bool(_SUSPECT_SECTION.match(title))


def fault_phrase(s: Suspect) -> str:
    """`RoCE link errors`: the verdict's title phrase, with the fabric for a link."""
    verdict = VERDICTS.get(s.verdict)
    phrase = verdict.title if verdict else s.verdict_text
    layer = _LINK_LAYERS.get(str(s.identity.get("link_layer", "")).lower())
    return f"{layer} {phrase}" if layer and s.verdict in _LINK_VERDICTS else phrase


def shorten(text: str, limit: int) -> str:
    """One line of at most `limit` characters, shortened at a word boundary (never inside a word or an id)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if limit < 3:
        return ""
    head = text[: limit - 3]
    cut = len(head) if text[limit - 3] == " " else head.rfind(" ")
    return (head[:cut].rstrip(" ,;:") if cut > 0 else "") + "..."


def _what(s: Suspect) -> str:
    """`RoCE link errors on gpu003 mlx5_5/1 (ens6np0)`; a shared one `errors under one switch (switch leaf-3,
    6 hosts)`."""
    if s.host is None:
        below = f", {plural(len(s.hosts), 'host')}" if s.hosts else ""
        return f"{fault_phrase(s)} ({s.name}{below})"
    return f"{fault_phrase(s)} on {s.name}"


def _others(lead: Suspect, rest: Sequence[Suspect]) -> str:
    """` and 7 more faulty components on 7 hosts`."""
    if not rest:
        return ""
    hosts = {h for s in rest for h in suspect_hosts(s)}
    more = f" and {len(rest)} more faulty component{'s' if len(rest) > 1 else ''}"
    if hosts <= set(suspect_hosts(lead)):
        return more + " on the same host"
    return more + f" on {plural(len(hosts), 'host')}"


def ticket_title(suspects: Sequence[Suspect], symptom: str, n_hosts: int, limit: int = TITLE_MAX) -> str:
    """`[fabricase] RoCE link errors on gpu003 mlx5_5/1 (ens6np0) and 7 more faulty components on 7 hosts`:
    the most severe suspect and the scope; without suspects the symptom on the captured hosts. At most
    `limit` characters, shortened at a word boundary, the scope kept whole."""
    if suspects:
        lead = suspects[0]
        what, tail = _what(lead), _others(lead, suspects[1:])
        what = what[:1].upper() + what[1:]
    else:
        what = " ".join(symptom.split()) or "fabric fault"
        tail = f" on {plural(n_hosts, 'host')}"
    room = limit - len(TITLE_HEAD) - len(tail)
    if room < 12:  # no room for the fault beside its scope: the whole line, shortened
        return shorten(TITLE_HEAD + what + tail, limit)
    return TITLE_HEAD + shorten(what, room) + tail


def scope_line(diagnosis: Diagnosis, owned: Sequence[Suspect], owner: str = "provider") -> str:
    """`8 suspects on 8 of 16 captured hosts; 8 hosts checked and healthy; 2 not captured`: only the desk's
    suspects count as suspects; a host with only another owner's suspects is neither healthy nor listed."""
    captured = [h for h in diagnosis.hosts if h.status in ("ok", "partial")]
    mine = {h for s in owned for h in suspect_hosts(s)}
    theirs = {h for s in diagnosis.suspects if s.owner != owner for h in suspect_hosts(s)} - mine
    clean = [h for h in captured if h.host not in mine | theirs]
    parts = []
    if owned:
        shared = sum(1 for s in owned if s.host is None)
        among = "" if not shared else " (shared)" if len(owned) == 1 else f" ({shared} of them shared)"
        parts.append(f"{plural(len(owned), 'suspect')}{among} on {len(mine):,} of "
                     f"{plural(len(captured), 'captured host')}")
    else:
        parts.append(f"no suspect on the {plural(len(captured), 'captured host')}")
    if theirs:
        side = "on our side" if owner == "provider" else "for others"
        parts.append(f"{plural(len(theirs), 'host')} with an issue {side}")
    healthy = sum(1 for h in clean if h.status == "ok")
    parts.append(f"{plural(healthy, 'host')} checked and healthy")
    if partial := sum(1 for h in clean if h.status == "partial"):
        parts.append(f"{partial:,} partly captured")
    if diagnosis.hosts_not_captured:
        parts.append(f"{len(diagnosis.hosts_not_captured):,} not captured")
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


def _components(s: Suspect) -> list[str]:
    """The suspect's names and aliases, each once (`pcie:0000:cb:00` is `pcie:0000:cb:00.0`)."""
    seen, out = set(), []
    for c in s.components:
        family, _, name = c.partition(":")
        key = (family, pci_key(name) or name) if family == "pcie" else (family, name)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _identity(s: Suspect, host_identity: Mapping[str, Any]) -> list[str]:
    """`label value` pairs: the suspect's identity, then what the host summary adds (asset tag, serial); the
    PCI address and netdev only when its names (the section's "where") do not already say them."""
    facts = {k: v for k, v in s.identity.items() if v not in (None, "")}
    named = {c.partition(":")[2] for c in s.components}
    named |= {pci_key(n) for n in named if pci_key(n)}
    for key in ("pci", "netdev"):
        if key in facts and str(facts[key]) in named:
            facts.pop(key)
    for key in _HOST_KEYS:
        if host_identity.get(key) not in (None, "") and key not in facts:
            facts[key] = host_identity[key]
    if "physical_host" in facts:
        facts.pop("physical_host_name", None)
    if "topology" in facts:  # the nearest level: the hosts section has the whole path
        facts["topology"] = str(facts["topology"]).split(" > ")[-1].replace(":", " ", 1)
    if facts.get("port_guid") == facts.get("node_guid"):
        facts.pop("port_guid", None)
    known = [k for k in IDENTITY_LABELS if k in facts and k not in _HIDDEN]
    rest = sorted(k for k in facts if k not in IDENTITY_LABELS and k not in _HIDDEN)
    return [f"{IDENTITY_LABELS.get(k, k.replace('_', ' '))} {facts[k]}" for k in known + rest]


def _strength(s: Suspect) -> str:
    parts = [str(s.severity)]
    if s.confidence is not None:
        parts.append(f"confidence {fmt_number(s.confidence)}")
    if s.q_value is not None:
        parts.append(f"q-value {s.q_value:.2g}" if s.q_value < 0.01 else f"q-value {fmt_number(s.q_value)}")
    return ", ".join(parts)


def suspect_history(s: Suspect, history: Mapping[str, str]) -> str | None:
    """The repeat-offender line (tracker.stats.history_lines: key -> line) for this suspect: its port's, else
    its host's; a shared suspect's component's."""
    if not history:
        return None
    keys = [*(f"{s.host}/{c}" for c in s.components), s.host] if s.host else list(s.components)
    return next((history[k] for k in keys if k in history), None)


def leftover_history(owned: Sequence[Suspect], history: Mapping[str, str], hosts: Iterable[str]) -> list[str]:
    """History lines for the ticket's hosts that no suspect section says (a ticket on a symptom alone), each
    with the thing it is about: `gpu001: second escalation for this host since ...`."""
    said = {s.host for s in owned if s.host} | {c for s in owned if not s.host for c in s.components}
    wanted = set(hosts)
    out = []
    for key, line in history.items():
        host = key.partition("/")[0] if "/" in key and ":" not in key.partition("/")[0] else key
        if host in wanted and host not in said:
            out.append(f"{key}: {line}")
    return out


def suspect_facts(s: Suspect, index: int, total: int,
                  host_identity: Mapping[str, Any] | None = None, history: str | None = None) -> dict[str, Any]:
    """Everything a suspect's section shows, as flat facts. history: its repeat-offender line, if any."""
    if s.host:
        where = f"{s.host}: {', '.join(_components(s))}"
    else:
        below = f", above {len(s.hosts)} hosts" if s.hosts else ""
        where = f"{', '.join(_components(s))} (shared{below})"
    what = _what(s)
    # "q = ..." repeats the strength line's q-value and confidence
    shown = [line for line in s.evidence if not line.startswith("q = ")]
    return {
        "id": s.id,
        "index": index,
        "total": total,
        "heading": SUSPECT_HEADING.format(index=index, total=total, what=what),
        "what": what,
        "name": s.name,
        "host": s.host,
        "hosts": list(s.hosts),
        "unit": s.unit,
        "components": _components(s),
        "verdict": s.verdict,
        "verdict_text": s.verdict_text,
        "severity": str(s.severity),
        "confidence": s.confidence,
        "q_value": s.q_value,
        "strength": _strength(s),
        "owner": s.owner,
        "where": where,
        "evidence": shown[:EVIDENCE_SHOWN],
        "evidence_more": len(shown[EVIDENCE_SHOWN:]),
        "identity": _identity(s, host_identity or {}),
        "action": s.action,
        "key_number": s.key_number,
        "history": history,
    }
