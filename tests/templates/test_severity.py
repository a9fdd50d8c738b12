"""The ticket's severity from its suspects and the stated impact (one noisy port is never "system down"), then in
each desk's scale: the mapping, caps by max_level and support plan, errors, and the docs tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import suspect_cases as sc

from fabricase.diagnosis import VERDICTS
from fabricase.errors import ConfigError
from fabricase.models import Severity
from fabricase.templates import render_draft
from fabricase.templates.severity import CEILING, SCALES, desk_severity, plan_max_level, scale_for, ticket_severity

DOC = Path(__file__).resolve().parents[2] / "docs" / "tickets.md"

# desk -> level for critical, major, minor, info: written out, so a change to the registry is a visible choice
EXPECTED = {
    "aws": ("critical", "high", "normal", "low"),
    "gcp": ("P1", "P2", "P3", "P4"),
    "azure": ("critical", "moderate", "minimal", "minimal"),
    "jira": ("Highest", "High", "Medium", "Low"),
    "zendesk": ("urgent", "high", "normal", "low"),
    "generic": ("critical", "major", "minor", "info"),
}
SEVERITIES = (Severity.CRITICAL, Severity.MAJOR, Severity.MINOR, Severity.INFO)


@pytest.mark.parametrize("desk", sorted(EXPECTED))
def test_default_mapping(desk):
    assert tuple(desk_severity(desk, s).code for s in SEVERITIES) == EXPECTED[desk]


def test_the_scales_are_the_apis_own_codes():
    """cloud-apis.md: AWS describe_severity_levels codes, GCP Case.priority, Azure severity, Zendesk priority."""
    codes = {desk: [lv.code for lv in scale.levels] for desk, scale in SCALES.items()}
    assert codes["aws"] == ["low", "normal", "high", "urgent", "critical"]
    assert codes["gcp"] == ["P4", "P3", "P2", "P1", "P0"]
    assert codes["azure"] == ["minimal", "moderate", "critical", "highestcriticalimpact"]
    assert codes["zendesk"] == ["low", "normal", "high", "urgent"]
    assert {desk: scale.field for desk, scale in SCALES.items()} == {
        "aws": "severityCode",
        "gcp": "priority",
        "azure": "severity",
        "jira": "priority",
        "zendesk": "priority",
        "generic": "severity",
    }


@pytest.mark.parametrize("desk", sorted(SCALES))
def test_a_worse_finding_never_maps_to_a_lower_level(desk):
    scale = SCALES[desk]
    ranks = [scale.rank(desk_severity(desk, s).code) for s in SEVERITIES]
    assert ranks == sorted(ranks, reverse=True)


def test_max_level_caps_and_says_why():
    d = desk_severity("aws", Severity.CRITICAL, max_level="urgent")
    assert (d.code, d.label, d.wanted, d.capped, d.capped_by) == (
        "urgent", "Production system down", "critical", True, "max_level urgent"
    )
    # a cap above the mapped level changes nothing
    d = desk_severity("aws", Severity.MAJOR, max_level="urgent")
    assert (d.code, d.capped, d.capped_by) == ("high", False, None)


@pytest.mark.parametrize(
    ("plan", "code"),
    [("business", "urgent"), ("developer", "urgent"), ("enterprise-on-ramp", "critical"), ("enterprise", "critical")],
)
def test_aws_critical_needs_an_enterprise_plan(plan, code):
    d = desk_severity("aws", Severity.CRITICAL, plan=plan)
    assert d.code == code
    assert d.capped_by == (f"{plan} support plan" if code != "critical" else None)


def test_azure_highest_critical_impact_is_for_premium_only():
    wanted = {"critical": "highestcriticalimpact"}
    assert desk_severity("azure", "critical", overrides=wanted, plan="premium").code == "highestcriticalimpact"
    capped = desk_severity("azure", "critical", overrides=wanted, plan="professional-direct")
    assert (capped.code, capped.wanted) == ("critical", "highestcriticalimpact")
    assert plan_max_level("azure", "standard") == "critical" and plan_max_level("gcp", "standard") == "P0"


def test_the_lower_of_max_level_and_plan_wins():
    assert desk_severity("aws", "critical", max_level="high", plan="business").code == "high"
    assert desk_severity("aws", "critical", max_level="critical", plan="business").code == "urgent"


def test_overrides_replace_single_severities():
    mapping = {"major": "urgent"}
    assert desk_severity("zendesk", Severity.MAJOR, overrides=mapping).code == "urgent"
    assert desk_severity("zendesk", Severity.MINOR, overrides=mapping).code == "normal"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: desk_severity("aws", "major", max_level="sev1"),
         "aws severityCode 'sev1' is not a level; valid: low, normal, high, urgent, critical"),
        (lambda: desk_severity("gcp", "major", overrides={"major": "S1"}),
         "gcp priority 'S1' is not a level; valid: P4, P3, P2, P1, P0"),
        (lambda: desk_severity("aws", "major", overrides={"huge": "low"}),
         "severity mapping: unknown severity 'huge'; valid: critical, major, minor, info"),
        (lambda: desk_severity("aws", "sev2"), "unknown severity 'sev2'; valid: critical, major, minor, info"),
    ],
)
def test_bad_levels_are_one_line_config_errors(call, message):
    with pytest.raises(ConfigError) as info:
        call()
    assert str(info.value) == message


def test_desks_without_a_scale_say_fabricase_severity():
    assert scale_for("email") is SCALES["generic"] and scale_for("outbox") is SCALES["generic"]
    assert desk_severity("email", "minor").code == "minor"


def test_the_ticket_says_the_capped_level():
    d = render_draft(
        provider="aws", symptom=sc.SYMPTOM, severity=Severity.CRITICAL, findings=sc.findings(), hosts=sc.hosts(),
        placements=sc.placements(), bundle_id=None, capture_created_at=sc.CREATED_AT, escalation_id=None,
        support_plan="business", diagnosis=sc.diagnosis(),
    )
    assert ("Severity: urgent (Production system down), from fabricase severity critical: critical suspects on 2 "
            "hosts; capped from critical by the business support plan") in " ".join(d.body.split())
    assert d.severity == Severity.CRITICAL  # the draft keeps fabricase's own


def _one(severity=Severity.CRITICAL, host="gpu003", verdict="bad-link", unit="nic-port"):
    s = next(x for x in sc.suspects() if x.verdict == "bad-link")
    s.severity, s.host, s.verdict, s.unit = severity, host, verdict, unit
    s.verdict_text = VERDICTS[verdict].text
    return s


def test_one_noisy_port_is_never_system_down():
    """The issue's ticket filed one noisy port as AWS critical (Business-critical system down)."""
    t = ticket_severity([_one()], Severity.CRITICAL)
    assert t.severity == Severity.MAJOR and not t.wide
    assert "one part of one host (gpu003 mlx5_5/1 (ens6np0))" in t.reason
    assert desk_severity("aws", t.severity).label == "Production system impaired"
    # a second, major port on another host does not make the first one "down"
    assert ticket_severity([_one(), _one(Severity.MAJOR, "gpu004")], Severity.CRITICAL).severity == Severity.MAJOR


@pytest.mark.parametrize(("suspects", "reason"), [
    (lambda: [_one(), _one(host="gpu004")], "critical suspects on 2 hosts"),
    (lambda: [_one(host=None, verdict="switch-fault", unit="shared")], "critical shared component"),
    (lambda: [_one(verdict="gpu-off-bus", unit="gpu")], "GPU fell off the bus on gpu003"),
])
def test_critical_needs_a_wide_fault(suspects, reason):
    t = ticket_severity(suspects(), Severity.CRITICAL)
    assert t.severity == Severity.CRITICAL and t.wide and t.reason.startswith(reason)


def test_the_stated_impact_caps_and_no_suspect_is_at_most_major():
    assert ticket_severity([_one(), _one(host="gpu004")], Severity.MINOR).severity == Severity.MINOR
    assert ticket_severity([_one(), _one(host="gpu004")], Severity.MINOR).reason.endswith("stated impact is minor")
    assert ticket_severity([], Severity.CRITICAL).severity == Severity.MAJOR
    assert ticket_severity([], Severity.MINOR).severity == Severity.MINOR
    assert ticket_severity([_one(Severity.MINOR)], Severity.CRITICAL).severity == Severity.MINOR


def test_docs_ceiling_table_matches_the_code():
    """docs/tickets.md's table from the worst suspect to the ticket's severity is CEILING, row for row."""
    rows = re.findall(r"^\| (critical|major|minor|info|none) \| (wide|narrow|any) \| `(\w+)` \|", DOC.read_text(), re.M)
    covered = set()
    for worst_name, breadth, ceiling in rows:
        worst = None if worst_name == "none" else Severity(worst_name)
        for wide in (False, True) if breadth == "any" else (breadth == "wide",):
            if (worst, wide) in CEILING:
                assert CEILING[(worst, wide)] == Severity(ceiling), (worst, wide)
                covered.add((worst, wide))
    assert covered == set(CEILING)


def test_docs_table_matches_the_registry():
    """docs/tickets.md's severity table is the registry, row for row."""
    text = DOC.read_text()
    rows = re.findall(r"^\| `(critical|major|minor|info)` \|(.+)\|$", text, re.M)
    assert [r[0] for r in rows] == ["critical", "major", "minor", "info"]
    desks = ["aws", "gcp", "azure", "jira", "zendesk"]
    for severity, cells in rows:
        shown = [re.sub(r"[`*]", "", c).split("(")[0].strip() for c in cells.split("|")]
        assert shown == [desk_severity(d, severity).code for d in desks], severity
