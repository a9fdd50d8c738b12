"""The ticket's severity: from the suspects and the stated impact (`ticket_severity`, the `CEILING` table), then
in each desk's own scale: AWS severityCode, GCP priority, Azure severity, Jira and Zendesk priority. Pure: an
explicit table, the scales each desk's class declares (`scale`, read through the provider registry) and a few
small functions.

fabricase decides how bad the fault is (`critical|major|minor|info`): the worst suspect the desk is given,
`critical` only when the fault is wide (one noisy port is never "system down"), and never above the stated
impact. The desk's scale is only a translation, capped where the account's support plan cannot file the
level (AWS `critical` needs Enterprise On-Ramp or Enterprise; Azure `highestcriticalimpact` is for Premium
customers). Sources: ../shared/reference/cloud-apis.md sections 1.1 (AWS `describe_severity_levels`), 2.2
(GCP `Case.priority`), 3.2 (Azure `SupportTicketDetails.severity`), 4 (Zendesk `ticket.priority`); Jira: the
default priority scheme of Jira Cloud.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabricase.declared import DeclaredTable
from fabricase.errors import ConfigError
from fabricase.models import Severity

if TYPE_CHECKING:
    from fabricase.diagnosis import Suspect

__all__ = [
    "CEILING",
    "DOWN_UNITS",
    "DOWN_VERDICTS",
    "GENERIC",
    "SCALES",
    "DeskSeverity",
    "Level",
    "Scale",
    "TicketSeverity",
    "desk_severity",
    "plan_max_level",
    "scale_for",
    "ticket_severity",
]

# A critical suspect makes a critical ticket only when the fault is wide: critical suspects on several hosts,
# a critical shared component (switch, rack, network node) or a critical suspect that takes a GPU or a whole
# host out of the job. One port of one host leaves the job running on the others: impaired, never "down".
DOWN_VERDICTS = frozenset({"gpu-off-bus", "gpu-fabric-not-ready"})
DOWN_UNITS = frozenset({"host", "nvswitch", "shared"})

# (worst suspect severity, wide) -> the highest severity the ticket may be filed at; None: no suspect (the
# symptom alone, nothing localized). The stated impact (`--severity`, else the worst finding) caps it further.
CEILING: dict[tuple[Severity | None, bool], Severity] = {
    (Severity.CRITICAL, True): Severity.CRITICAL,
    (Severity.CRITICAL, False): Severity.MAJOR,
    (Severity.MAJOR, True): Severity.MAJOR,
    (Severity.MAJOR, False): Severity.MAJOR,
    (Severity.MINOR, True): Severity.MINOR,
    (Severity.MINOR, False): Severity.MINOR,
    (Severity.INFO, True): Severity.INFO,
    (Severity.INFO, False): Severity.INFO,
    (None, False): Severity.MAJOR,
}


@dataclass(frozen=True)
class TicketSeverity:
    """What the ticket is filed at (fabricase's scale) and why, in one clause for the ticket."""

    severity: Severity
    stated: Severity
    worst: Severity | None  # the worst suspect's; None without suspects
    wide: bool
    reason: str


def _wide(critical: Sequence[Suspect]) -> str:
    """Why the critical suspects make a wide fault ("" when they do not)."""
    hosts = sorted({h for s in critical for h in ([s.host] if s.host else s.hosts)})
    if len({s.host for s in critical if s.host}) > 1:
        return f"critical suspects on {len(hosts)} hosts"
    for s in critical:
        if s.unit == "shared" or s.host is None:
            return f"critical shared component {s.components[0] if s.components else 'above the hosts'}"
        if s.verdict in DOWN_VERDICTS or s.unit in DOWN_UNITS:
            return f"{s.verdict_text} on {s.host}"
    return ""


def ticket_severity(suspects: Sequence[Suspect], stated: Severity | str) -> TicketSeverity:
    """The severity to file at, from the desk's suspects (`CEILING`) and the stated impact, which caps it."""
    stated = Severity(stated)
    worst = min((s.severity for s in suspects), key=lambda s: s.rank) if suspects else None
    why = _wide([s for s in suspects if s.severity == Severity.CRITICAL]) if worst == Severity.CRITICAL else ""
    wide = bool(why)
    ceiling = CEILING[(worst, wide)]
    if worst is None:
        reason = "no component was localized"
    elif worst == Severity.CRITICAL and not wide:
        lead = next(s for s in suspects if s.severity == Severity.CRITICAL)
        reason = f"the worst suspect is critical but one part of one host ({lead.name}): impaired, not down"
    elif wide:
        reason = why
    else:
        reason = f"the worst suspect is {worst}"
    severity = ceiling if ceiling.rank >= stated.rank else stated  # rank 0 is critical: the lower of the two
    if severity != ceiling:
        reason += f"; the stated impact is {stated}"
    return TicketSeverity(severity, stated, worst, wide, reason)


@dataclass(frozen=True)
class Level:
    """One level of a desk's scale: `code` as the API takes it, `label` as the desk's people say it, and the
    support plans that may file it (None: any plan that can file at all)."""

    code: str
    label: str
    plans: frozenset[str] | None = None


@dataclass(frozen=True)
class Scale:
    desk: str
    field: str  # the API field the code goes in
    levels: tuple[Level, ...]  # lowest first
    default: Mapping[Severity, str]  # fabricase severity -> level code

    def level(self, code: str) -> Level:
        for lv in self.levels:
            if lv.code == code:
                return lv
        valid = ", ".join(lv.code for lv in self.levels)
        raise ConfigError(f"{self.desk} {self.field} {code!r} is not a level; valid: {valid}")

    def rank(self, code: str) -> int:
        return self.levels.index(self.level(code))


# Desks without a scale of their own (email, the outbox, the generic ticket, a static provider's default
# desk) say fabricase's.
GENERIC = Scale(
    "generic",
    "severity",
    tuple(Level(s.value, s.value) for s in (Severity.INFO, Severity.MINOR, Severity.MAJOR, Severity.CRITICAL)),
    {s: s.value for s in Severity},
)


# Each registered desk's scale as its class declares it (`scale`: AwsProvider, JiraDesk, ...), and `generic`: read
# from the provider registry at each look-up (fabricase.declared).
SCALES: Mapping[str, Scale] = DeclaredTable("scale", Scale, GENERIC)


@dataclass(frozen=True)
class DeskSeverity:
    """The level to file at. `wanted` is the mapped level before any cap; `capped_by` says why it differs."""

    desk: str
    field: str
    code: str
    label: str
    severity: Severity
    wanted: str
    capped_by: str | None = None

    @property
    def capped(self) -> bool:
        return self.code != self.wanted


def scale_for(desk: str) -> Scale:
    """The desk's scale; desks without one use fabricase's own (`generic`)."""
    return SCALES.get(desk, GENERIC)


def plan_max_level(desk: str, plan: str) -> str:
    """The highest level a support plan may file at (plan names lower-case, words joined by `-`)."""
    scale = scale_for(desk)
    allowed = [lv.code for lv in scale.levels if lv.plans is None or plan in lv.plans]
    return allowed[-1]


def desk_severity(
    desk: str,
    severity: Severity | str,
    *,
    max_level: str | None = None,
    plan: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> DeskSeverity:
    """Map a fabricase severity to the desk's level, then cap it at `max_level` and at what `plan` allows.

    `overrides` replaces the default mapping for some severities (`{"major": "urgent"}`). A level or severity
    that is not on the scale is a ConfigError listing the valid ones.
    """
    try:
        severity = Severity(severity)
    except ValueError:
        raise ConfigError(f"unknown severity {severity!r}; valid: {', '.join(s.value for s in Severity)}") from None
    scale = scale_for(desk)
    mapping = dict(scale.default)
    for name, code in (overrides or {}).items():
        try:
            mapping[Severity(name)] = scale.level(code).code
        except ValueError:
            valid = ", ".join(s.value for s in Severity)
            raise ConfigError(f"severity mapping: unknown severity {name!r}; valid: {valid}") from None
    wanted = mapping[severity]
    code, capped_by = wanted, None
    caps = [(max_level, f"max_level {max_level}")] if max_level else []
    if plan:
        caps.append((plan_max_level(desk, plan), f"{plan} support plan"))
    for cap, why in caps:
        if scale.rank(cap) < scale.rank(code):
            code, capped_by = cap, why
    return DeskSeverity(scale.desk, scale.field, code, scale.level(code).label, severity, wanted, capped_by)
