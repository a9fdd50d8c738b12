"""User templates in <config dir>/templates/ take precedence over the shipped ones."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest
import ticket_cases as tc

from fabricase.errors import ConfigError
from fabricase.models import Severity
from fabricase.templates import render_draft, ticket_template, user_template_dir


def draft(desk="aws", **overrides):
    kwargs = dict(
        provider=desk,
        symptom=tc.SYMPTOM,
        severity=Severity.MAJOR,
        findings=tc.findings(tc.shared_component(desk)),
        hosts=tc.hosts(),
        placements=tc.placements(desk),
        bundle_id=tc.BUNDLE_ID,
        capture_created_at=tc.CREATED_AT,
        escalation_id=tc.ESCALATION,
    )
    return render_draft(**(kwargs | overrides))


@pytest.fixture
def user_dir(_own_config_dir) -> Path:
    d = _own_config_dir / "templates"
    d.mkdir(parents=True)
    return d


def test_the_override_directory_follows_the_config_directory(_own_config_dir, monkeypatch):
    assert user_template_dir() == _own_config_dir / "templates"
    monkeypatch.delenv("FABRICASE_HOME")
    monkeypatch.setenv("XDG_CONFIG_HOME", "/srv/xdg")
    assert user_template_dir() == Path("/srv/xdg/fabricase/templates")


def test_a_user_template_replaces_the_shipped_one(user_dir):
    shipped = draft()
    (user_dir / "ticket_aws.md.j2").write_text("{{ title }} [ours]\n\nCase for {{ affected | length }} instances\n")
    d = draft()
    assert d.title == shipped.title + " [ours]"
    assert d.body == "Case for 2 instances\n"
    assert d.summary == shipped.summary  # summary.md.j2 was not overridden
    assert draft("gcp").body != "Case for 2 instances\n"


def test_an_override_extends_the_shipped_template_of_the_same_name(user_dir):
    (user_dir / "ticket_aws.md.j2").write_text(
        '{% extends "fabricase/ticket_aws.md.j2" %}\n'
        "{% block action %}\n{{ heading('Requested action') }}\n\nDrain {{ affected | map(attribute='instance_id')"
        " | join(', ') }} and replace the cable.\n{% endblock %}\n"
    )
    body = draft().body
    assert "## Requested action\n\nDrain i-0a1b2c3d4e5f60001, i-0a1b2c3d4e5f60002 and replace the cable.\n" in body
    assert "## Affected instances" in body and "network node nn-7a8b9c0d1e2f3a4b5 is shared by" in body


def test_an_override_of_the_generic_ticket_reaches_every_desk_that_extends_it(user_dir):
    (user_dir / "ticket_generic.md.j2").write_text(
        '{% extends "fabricase/ticket_generic.md.j2" %}\n{% block references %}\nInternal runbook: RB-42\n'
        "{% endblock %}\n"
    )
    for desk in ("aws", "gcp", "azure", "jira", "zendesk", "email", "generic"):
        body = draft(desk).body
        assert body.endswith("Internal runbook: RB-42\n") and "## References" not in body, desk


def test_a_new_desk_template_is_found(user_dir):
    assert ticket_template("coreweave") == "ticket_generic.md.j2"
    (user_dir / "ticket_coreweave.md.j2").write_text(
        '{% extends "ticket_generic.md.j2" %}\n{% block severity %}\nCW priority: P{{ 5 - 1 }}\n{% endblock %}\n'
    )
    assert ticket_template("coreweave") == "ticket_coreweave.md.j2"
    assert "CW priority: P4" in draft("coreweave").body


def test_the_summary_can_be_overridden(user_dir):
    (user_dir / "summary.md.j2").write_text("{{ findings | length }} findings\n")
    assert draft().summary == "4 findings\n"


def test_an_explicit_template_dir_wins_over_the_config_directory(user_dir, tmp_path):
    (user_dir / "ticket_aws.md.j2").write_text("config\n\nfrom config\n")
    other = tmp_path / "team-templates"
    other.mkdir()
    (other / "ticket_aws.md.j2").write_text("team\n\nfrom the team's directory\n")
    assert draft(template_dir=other).body == "from the team's directory\n"
    assert draft().body == "from config\n"


def test_an_edited_override_is_picked_up(user_dir):
    path = user_dir / "ticket_aws.md.j2"
    path.write_text("t\n\nfirst\n")
    assert draft().body == "first\n"
    path.write_text("t\n\nsecond\n")
    later = path.stat().st_mtime + 5  # a coarse file-system clock must not hide the edit
    os.utime(path, (later, later))
    assert draft().body == "second\n"


def test_an_override_without_a_subject_line_is_all_body(user_dir):
    (user_dir / "ticket_aws.md.j2").write_text("Line one\nLine two\n\nmore\n")
    d = draft()
    assert d.body == "Line one\nLine two\n\nmore\n" and d.title.startswith("[fabricase] ")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "{{ title }}\n\n{% if %}\n",
            3,
            "template ticket_aws.md.j2: Expected an expression, got 'end of statement block'",
        ),
        ("{{ title }}\n\nok\n{{ no_such_fact }}\n", 4, "template ticket_aws.md.j2: 'no_such_fact' is undefined"),
        ('{% extends "fabricase/ticket_aws.md.j2" %}\n{% block action %}{{ heading("x") | nope }}{% endblock %}\n', 2,
         "template ticket_aws.md.j2: No filter named 'nope'."),
    ],
)
def test_a_broken_override_is_a_one_line_config_error_naming_the_file(user_dir, text, line, message):
    (user_dir / "ticket_aws.md.j2").write_text(text)
    with pytest.raises(ConfigError) as info:
        draft()
    assert info.value.where == f"{user_dir / 'ticket_aws.md.j2'}:{line}"
    assert info.value.message == message
    assert "\n" not in str(info.value)


def test_an_unknown_markup_in_an_override_names_the_valid_ones(user_dir):
    (user_dir / "ticket_aws.md.j2").write_text(
        '{% extends "fabricase/ticket_aws.md.j2" %}\n{% set markup = "html" %}\n'
    )
    with pytest.raises(ConfigError, match="unknown markup 'html'; valid: markdown, text, jira"):
        draft()


def test_a_bug_in_a_shipped_template_is_not_blamed_on_the_user(user_dir):
    """Without the variables render_draft provides, the shipped template fails as itself, not as a ConfigError."""
    from fabricase.templates import render

    with pytest.raises(jinja2.UndefinedError):
        render("ticket_aws.md.j2", template_dir=user_dir, title="t")
