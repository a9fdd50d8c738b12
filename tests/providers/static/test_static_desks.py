"""StaticProvider delegates to the desk config.toml names, and declares what that desk lacks."""

from __future__ import annotations

import pytest

from fabricase.config import Paths
from fabricase.errors import ConfigError, UnsupportedError
from fabricase.models import Severity, TicketDraft
from fabricase.providers import get_provider
from fabricase.providers.base import Feature
from fabricase.providers.desks.jira import JiraDesk
from fabricase.providers.desks.outbox import OutboxDesk


@pytest.fixture
def paths(tmp_path):
    p = Paths(data=tmp_path / "data", config=tmp_path / "config")
    p.config.mkdir(parents=True)
    return p


def _config(paths, text):
    (paths.config / "config.toml").write_text(text)


def _draft():
    return TicketDraft(provider="static", title="[fabricase] symbol errors", body="body\n", severity=Severity.MAJOR,
                       hosts=["gpu001"], components=[])


def test_the_outbox_is_the_default_and_does_everything_but_sync(paths, tmp_path):
    provider = get_provider("static", paths)
    assert isinstance(provider.desk, OutboxDesk)
    assert set(provider.unsupported) == {Feature.FAULTY_HOST_REPORT, Feature.SYNC}
    result = provider.file_case(escalation_id="FC-1", draft=_draft(), bundle_path=None)
    assert provider.find_case("FC-1") == result and provider.find_case("FC-2") is None
    log = tmp_path / "nccl.log"
    log.write_text("NCCL WARN\n")
    provider.attach(result.case_id, [log], "the NCCL log")
    provider.comment(result.case_id, "asked the DC to reseat")
    provider.resolve_case(result.case_id, "fixed")
    provider.reopen_case(result.case_id, "back again")
    folder = paths.outbox / "FC-1"
    assert (folder / "nccl.log").read_text() == "NCCL WARN\n" and not (folder / "resolved").exists()
    notes = (folder / "comments.md").read_text()
    assert "the NCCL log" in notes and "asked the DC to reseat" in notes and "back again" in notes
    with pytest.raises(UnsupportedError, match="outbox cases are updated by hand"):
        provider.case_status(result.case_id)
    assert [(c.check, c.ok) for c in provider.check()] == [("inventory", True), ("desk", True), ("outbox", True)]


def test_a_configured_desk_declares_its_own_capabilities(paths):
    _config(paths, '[providers.static]\ndesk = "jira"\n[providers.static.jira]\nbase_url = "http://127.0.0.1:9"\n')
    provider = get_provider("static", paths)
    assert isinstance(provider.desk, JiraDesk)
    assert provider.supports(Feature.SYNC) and provider.supports(Feature.ATTACH)
    assert set(provider.unsupported) == {Feature.FAULTY_HOST_REPORT}
    _config(paths, '[providers.static]\ndesk = "email"\n')
    assert not get_provider("static", paths).supports(Feature.SYNC)


@pytest.mark.parametrize(("text", "message"), [
    ('[providers.static]\ndesk = "servicenow"\n',
     "desk 'servicenow' is not a desk; valid: outbox, jira, zendesk, email"),
    ('[providers.static]\ndesk = "jira"\njira = "x"\n', r"\[providers.static.jira\] must be a table"),
])
def test_a_bad_desk_configuration_is_one_line(paths, text, message):
    _config(paths, text)
    with pytest.raises(ConfigError, match=message):
        get_provider("static", paths)


def test_a_failed_check_is_reported_not_raised(paths, monkeypatch):
    monkeypatch.delenv("FABRICASE_ZENDESK_TOKEN", raising=False)
    (paths.config / "inventory.json").write_text("{not json")
    _config(paths, '[providers.static]\ndesk = "zendesk"\n')
    results = {c.check: c for c in get_provider("static", paths).check()}
    assert not results["inventory"].ok and "not valid JSON" in results["inventory"].detail
    assert not results["credentials"].ok

