"""A desk or a provider in one file, registered by an installed package (`fabricase.desks`, `fabricase.providers`
entry points), is picked up by every table that used to repeat it: the CLI's choices, the limits, the severity
scale, the ticket template and `providers list`. The package is a fake distribution on sys.path: a module and
a `*.dist-info` folder with its METADATA and entry_points.txt."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase import providers as registry
from fabricase.cli import cli
from fabricase.config import Paths

ACME_DESK = '''
"""A desk in one file: what it is, what it takes, how bad is bad, and how its ticket looks."""

from fabricase.bundler.limits import DeskLimits
from fabricase.models import EscalationState, Severity
from fabricase.providers.base import CheckResult, FilingResult
from fabricase.providers.desks.base import Desk
from fabricase.providers.static import StaticProvider
from fabricase.templates.severity import Level, Scale


class AcmeDesk(Desk):
    name = "acme"
    unsupported = {}
    sdk_modules = ("json",)
    extra = "acme"
    template = "ticket_jira.md.j2"  # Acme runs a Jira-like desk: the Jira layout fits
    limits = DeskLimits("acme", body_max_chars=4321, attachment_max_bytes=1234567, max_attachments=2)
    scale = Scale("acme", "urgency", (Level("U3", "later"), Level("U2", "soon"), Level("U1", "now")),
                  {Severity.CRITICAL: "U1", Severity.MAJOR: "U1", Severity.MINOR: "U2", Severity.INFO: "U3"})

    def file(self, escalation_id, draft, bundle_path):
        return FilingResult("acme-1", "new", EscalationState.FILED, "acme://1")

    def resolve(self, case_id, note):
        pass

    def check(self):
        return [CheckResult("acme", True, "reachable")]


class AcmeCloud(StaticProvider):
    """A provider from a plug-in (a static-like cloud whose desk is configured)."""

    name = "acmecloud"
    sdk_modules = ("fc_acme_sdk_not_installed",)
    extra = "cloud"
'''

ENTRY_POINTS = """\
[fabricase.desks]
acme = fc_acme_plugin:AcmeDesk
jira = fc_acme_plugin:AcmeDesk

[fabricase.providers]
acmecloud = fc_acme_plugin:AcmeCloud
aws = fc_acme_plugin:AcmeCloud
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "fc_acme_plugin.py").write_text(textwrap.dedent(ACME_DESK))
    dist = site / "fc_acme_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fc-acme-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    registry.refresh_plugins()
    yield sys.modules.get("fc_acme_plugin")
    registry.refresh_plugins()
    sys.modules.pop("fc_acme_plugin", None)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("FABRICASE_HOME", str(h))
    monkeypatch.delenv("FABRICASE_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    return h


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def test_a_plugin_desk_is_picked_up_everywhere(plugin, home):
    from fabricase.bundler.limits import DESK_LIMITS, desk_limits
    from fabricase.escalate import desk_of, template_of
    from fabricase.providers.desks import desk_class, desk_names
    from fabricase.templates.severity import SCALES, desk_severity

    cls = desk_class("acme")
    assert cls.__name__ == "AcmeDesk" and desk_names()[-1] == "acme"
    assert DESK_LIMITS["acme"] is cls.limits and "acme" in list(DESK_LIMITS)
    assert desk_limits("acme", attachment_max_bytes=99).attachment_max_bytes == 99
    assert SCALES["acme"] is cls.scale
    sev = desk_severity("acme", "minor", max_level="U2")
    assert (sev.field, sev.code, sev.label) == ("urgency", "U2", "soon")
    assert registry.ticket_template_name("acme") == "ticket_jira.md.j2"

    (home / "config.toml").write_text('[providers.static]\ndesk = "acme"\n')
    paths = Paths(data=home, config=home)
    assert desk_of("static", paths) == "acme" and template_of("static", "acme") == "acme"
    provider = registry.get_provider("static", paths)
    assert type(provider.desk) is cls


def test_a_plugin_cannot_take_a_builtin_name(plugin):
    from fabricase.providers.desks import desk_class

    assert desk_class("jira").__name__ == "JiraDesk"
    assert registry.provider_class("aws").__name__ == "AwsProvider"
    assert registry.registration("acme", "desk").distribution == "fc-acme-plugin"


def test_a_plugin_provider_is_a_cli_choice(plugin, home):
    assert "[static|aws|gcp|azure|acmecloud]" in " ".join(_run("draft", "--help").split())
    result = CliRunner().invoke(cli, ["draft", "nowhere", "--provider", "oracle"])
    assert result.exit_code == 2 and "'acmecloud'" in result.output


def test_providers_list_shows_plugins_and_their_install_hint(plugin, home):
    text = _run("providers", "list")
    assert "acmecloud: sdk missing, install it with: pip install 'fc-acme-plugin[cloud]'" in text
    assert "acme " in text and "urgency" in text
    listed = {p["name"]: p for p in json.loads(_run("providers", "list", "--json"))}
    assert listed["acmecloud"]["available"] is False
    assert listed["acmecloud"]["sdk"] == {"fc_acme_sdk_not_installed": False}
    desks = {d["name"]: d for d in listed["static"]["desks"]}
    assert desks["acme"] == {"name": "acme", "sdk": {"json": True}, "available": True, "error": None,
                             "install": None, "severity": "urgency", "template": "ticket_jira.md.j2"}


def test_providers_list_says_azure_sdk_missing_at_80_columns(home, monkeypatch):
    """The issue: Azure was listed as fully available with all three of its SDKs missing, and the hint lost its
    `[azure]` (or was folded across lines, which no one can paste)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n.startswith("azure.") else real(n, *a))
    text = _run("providers", "list")
    assert "pip install 'fabricase[azure]'" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    azure = next(p for p in json.loads(_run("providers", "list", "--json")) if p["name"] == "azure")
    assert azure["available"] is False and azure["features"] == [] and azure["install"] == (
        "pip install 'fabricase[azure]'")
    assert azure["sdk"] == {"azure.identity": False, "azure.mgmt.compute": False, "azure.mgmt.support": False}


def test_an_unimportable_cloud_prints_its_hint_whole(home, tmp_path, monkeypatch):
    """A module whose top-level import fails (boto3 missing): the hint comes from the entry's `[aws]`."""
    (tmp_path / "fc_sdkless_aws.py").write_text("import fc_no_such_boto_for_tests\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.PROVIDERS, "aws", "fc_sdkless_aws:AwsProvider [aws]")
    text = _run("providers", "list")
    assert "aws: sdk missing, install it with: pip install 'fabricase[aws]'" in text
    aws = next(p for p in json.loads(_run("providers", "list", "--json")) if p["name"] == "aws")
    assert aws["sdk"] == {"fc_no_such_boto_for_tests": False} and aws["install"] == "pip install 'fabricase[aws]'"
    result = CliRunner().invoke(cli, ["providers", "check", "aws"], env={"COLUMNS": "80"})
    assert result.exit_code == 1
    assert "pip install 'fabricase[aws]'" in " ".join(result.output.split())
