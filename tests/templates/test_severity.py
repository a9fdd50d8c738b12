"""Severity in each desk's scale: the mapping, caps by max_level and support plan, errors, and the docs table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import ticket_cases as tc

from fabricase.errors import ConfigError
from fabricase.models import Severity
from fabricase.templates import render_draft
from fabricase.templates.severity import SCALES, desk_severity, plan_max_level, scale_for

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
        provider="aws", symptom=tc.SYMPTOM, severity=Severity.CRITICAL, findings=tc.findings(), hosts=tc.hosts(),
        placements=tc.placements("aws"), bundle_id=None, capture_created_at=tc.CREATED_AT, escalation_id=None,
        support_plan="business",
    )
    assert ("Severity: urgent (Production system down), from fabricase severity critical; capped from critical by "
            "the business support plan") in " ".join(d.body.split())
    assert d.severity == Severity.CRITICAL  # the draft keeps fabricase's own


def test_docs_table_matches_the_registry():
    """docs/tickets.md's severity table is the registry, row for row."""
    text = DOC.read_text()
    rows = re.findall(r"^\| `(critical|major|minor|info)` \|(.+)\|$", text, re.M)
    assert [r[0] for r in rows] == ["critical", "major", "minor", "info"]
    desks = ["aws", "gcp", "azure", "jira", "zendesk"]
    for severity, cells in rows:
        shown = [re.sub(r"[`*]", "", c).split("(")[0].strip() for c in cells.split("|")]
        assert shown == [desk_severity(d, severity).code for d in desks], severity
