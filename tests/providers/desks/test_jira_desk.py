"""The Jira Service Management desk against a local JSM stand-in over real sockets (desks/fakes.py)."""

from __future__ import annotations

import pytest

from fabricase.errors import ConfigError, ProviderError
from fabricase.models import EscalationState
from fabricase.providers.desks.jira import jira_state


def test_file_attach_status_comment_resolve_reopen(desks, jira, jira_settings, draft, bundle, tmp_path):
    desk = desks("jira", jira_settings)
    filed = desk.file("FC-7", draft, bundle)
    assert filed.case_id == "GPU-1" and filed.raw_status == "Waiting for support"
    assert filed.state is EscalationState.WAITING_PROVIDER and filed.location.endswith("/GPU-1")
    request = jira.requests["GPU-1"]["fields"]
    assert request["summary"] == "[fabricase FC-7] " + draft.title
    assert "switch:leaf-3, rack:r1" in request["description"]
    assert request["priority"] == {"name": "High"}  # major -> High (templates/severity.py)
    assert jira.attachments["GPU-1"] == [(bundle.name, bundle.read_bytes())]

    jira.agent_comment("GPU-1", "Can you reseat the cable?")
    desk.comment("GPU-1", "Reseated; errors continue.")
    status = desk.status("GPU-1")
    assert status.raw_status == "Waiting for support" and status.state is EscalationState.WAITING_PROVIDER
    bodies = [(c.body, c.from_provider) for c in status.comments]
    assert bodies == [("Evidence bundle from fabricase: FC-1.tar.gz", False),
                      ("Can you reseat the cable?", True), ("Reseated; errors continue.", False)]

    extra = tmp_path / "nccl.log"
    extra.write_text("NCCL WARN NET/IB : Got completion with error 12\n")
    desk.attach("GPU-1", [extra], "NCCL log of the failed run")
    assert [n for n, _ in jira.attachments["GPU-1"]] == [bundle.name, "nccl.log"]

    desk.resolve("GPU-1", "optic replaced")
    after = desk.status("GPU-1")
    assert (after.raw_status, after.state) == ("Resolved", EscalationState.RESOLVED)
    assert after.comments[-1].body == "optic replaced"
    desk.reopen("GPU-1", "errors are back")
    assert desk.status("GPU-1").state is EscalationState.WAITING_PROVIDER


def test_filing_again_finds_the_request_and_completes_its_attachments(desks, jira, jira_settings, draft, bundle):
    desk = desks("jira", jira_settings)
    jira.fail("POST", r"/request/GPU-1/attachment$", 503, times=5)  # the request is created, the bundle not linked
    with pytest.raises(ProviderError, match="attach files: server error \\(HTTP 503\\)"):
        desk.file("FC-1", draft, bundle)
    assert list(jira.requests) == ["GPU-1"] and jira.attachments["GPU-1"] == []
    assert desk.find("FC-1").case_id == "GPU-1"
    again = desk.file("FC-1", draft, bundle)
    assert again.case_id == "GPU-1" and list(jira.requests) == ["GPU-1"]
    assert [n for n, _ in jira.attachments["GPU-1"]] == [bundle.name]
    assert desk.file("FC-1", draft, bundle).case_id == "GPU-1"  # complete: nothing uploaded twice
    assert [n for n, _ in jira.attachments["GPU-1"]] == [bundle.name]
    assert desk.find("FC-99") is None


def test_a_create_whose_answer_was_lost_is_found_before_retrying(desks, jira, jira_settings, draft):
    desk = desks("jira", jira_settings)
    jira.fail("POST", r"^/rest/servicedeskapi/request$", 502, process=True)  # created, but the answer is lost
    # JSM has no idempotency key: before retrying the create, the desk is searched for the marker
    assert desk.file("FC-2", draft, None).case_id == "GPU-1"
    assert list(jira.requests) == ["GPU-1"]
    assert jira.calls.count(("POST", "/rest/servicedeskapi/request")) == 1


def test_a_bundle_over_the_sites_upload_limit_is_split_not_dropped(desks, jira, jira_settings, draft, big_bundle):
    jira.upload_limit = 100_000
    desks("jira", jira_settings).file("FC-3", draft, big_bundle)
    names = [n for n, _ in jira.attachments["GPU-1"]]
    assert len(names) >= 4 and names[0] == f"{big_bundle.name}.part001-of-{len(names):03d}"
    assert all(len(data) <= 100_000 for _, data in jira.attachments["GPU-1"])


def test_throttling_honours_retry_after_then_succeeds(desks, jira, jira_settings, draft):
    jira.fail("POST", r"^/rest/servicedeskapi/request$", 429, headers={"Retry-After": "7"}, times=2)
    desk = desks("jira", jira_settings)
    assert desk.file("FC-4", draft, None).case_id == "GPU-1"
    assert desks.slept.count(7.0) == 2 and len(jira.requests) == 1


@pytest.mark.parametrize(("status", "headers", "expected"), [
    (401, {}, "search requests: authentication failed (HTTP 401): check FABRICASE_JIRA_EMAIL and "
              "FABRICASE_JIRA_TOKEN"),
    (403, {}, "read attachment settings: permission denied (HTTP 403): injected 403"),
    (429, {"Retry-After": "3600"}, "read attachment settings: throttled (HTTP 429): injected 429; the service asks "
                                   "to wait 3600 s, try again later"),
    (500, {}, "read attachment settings: server error (HTTP 500): injected 500 (after 5 attempts)"),
])
def test_errors_are_one_line_and_nothing_is_filed(desks, jira, jira_settings, draft, bundle, status, headers,
                                                   expected):
    if status == 401:
        desk = desks("jira", jira_settings, env={"FABRICASE_JIRA_EMAIL": "oncall@example.com",
                                                 "FABRICASE_JIRA_TOKEN": "wrong-fake-token"})
    else:
        jira.fail("GET", r"/attachment/meta$", status, headers=headers, times=9)
        desk = desks("jira", jira_settings)
    with pytest.raises(ProviderError) as info:
        desk.file("FC-5", draft, bundle)
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("static/jira: ")
    assert jira.requests == {}


def test_a_file_the_site_refuses_leaves_no_request(desks, jira, jira_settings, draft, bundle):
    jira.fail("POST", r"/attachTemporaryFile$", 413)
    with pytest.raises(ProviderError, match=r"upload FC-1.tar.gz: attachment too large for the desk \(HTTP 413\)"):
        desks("jira", jira_settings).file("FC-6", draft, bundle)
    assert jira.requests == {}


def test_missing_credentials_and_settings(desks, jira_settings, draft):
    with pytest.raises(ProviderError, match="missing credentials: set FABRICASE_JIRA_EMAIL and FABRICASE_JIRA_TOKEN"):
        desks("jira", jira_settings, env={}).file("FC-1", draft, None)
    with pytest.raises(ConfigError, match=r"\[providers.static.jira\] service_desk_id is required"):
        desks("jira", {"base_url": "http://127.0.0.1:9"}).file("FC-1", draft, None)
    with pytest.raises(ProviderError, match=r"search requests: cannot reach http://127.0.0.1:9"):
        desks("jira", {**jira_settings, "base_url": "http://127.0.0.1:9"}).file("FC-1", draft, None)


def test_no_resolve_transition_names_the_ones_available(desks, jira, jira_settings, draft):
    desk = desks("jira", {**jira_settings, "resolve_transition": "Close as fixed"})
    desk.file("FC-8", draft, None)
    with pytest.raises(ProviderError, match=r"no transition 'Close as fixed' \(available: Pending, Resolve this "
                                            r"issue\); set \[providers.static.jira\] resolve_transition"):
        desk.resolve("GPU-1", None)


def test_check_reports_each_step(desks, jira, jira_settings):
    assert [(r.check, r.ok) for r in desks("jira", jira_settings).check()] == [
        ("credentials", True), ("service desk", True), ("request type", True), ("attachments", True)]
    results = desks("jira", jira_settings).check()
    assert results[0].detail == "authenticated as Fabric Oncall"
    assert results[3].detail == f"upload limit {jira.upload_limit} bytes"
    jira.fail("GET", r"/servicedesk/10$", 403)
    assert [r.ok for r in desks("jira", jira_settings).check()] == [True, False, True, True]
    assert desks("jira", jira_settings, env={}).check()[0].ok is False
    assert not any(method == "POST" for method, _ in jira.calls)  # a check files nothing


@pytest.mark.parametrize(("status", "category", "state"), [
    ("Waiting for customer", "INDETERMINATE", EscalationState.WAITING_US),
    ("Waiting for support", "INDETERMINATE", EscalationState.WAITING_PROVIDER),
    ("Open", "NEW", EscalationState.FILED),
    ("Resolved", "DONE", EscalationState.RESOLVED),
    ("Closed", "DONE", EscalationState.CLOSED),
    ("Vendor investigating", "INDETERMINATE", EscalationState.WAITING_PROVIDER),
    ("Fixed in field", "DONE", EscalationState.RESOLVED),
    ("Triage", "NEW", EscalationState.FILED),
])
def test_state_mapping(status, category, state):
    assert jira_state(status, category) is state
