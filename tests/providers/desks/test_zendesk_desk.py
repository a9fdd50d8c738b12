"""The Zendesk desk against a local Zendesk stand-in over real sockets (desks/fakes.py)."""

from __future__ import annotations

import pytest

from fabricase.errors import ProviderError
from fabricase.models import EscalationState
from fabricase.providers.desks.zendesk import zendesk_state


def test_file_status_comment_attach_resolve_reopen(desks, zendesk, zendesk_settings, draft, bundle, tmp_path):
    desk = desks("zendesk", zendesk_settings)
    filed = desk.file("FC-7", draft, bundle)
    assert (filed.case_id, filed.raw_status, filed.state) == ("101", "new", EscalationState.FILED)
    assert filed.location == f"{zendesk.base_url}/agent/tickets/101"
    ticket = zendesk.tickets[101]
    assert ticket["subject"] == "[fabricase FC-7] " + draft.title and ticket["external_id"] == "FC-7"
    assert ticket["priority"] == "high" and ticket["tags"] == ["fabricase", "gpu-fabric"]
    assert "switch:leaf-3, rack:r1" in ticket["comments"][0]["body"]
    assert ticket["files"] == [(bundle.name, bundle.read_bytes())]
    assert zendesk.idempotency == {"FC-7": 101}

    zendesk.tickets[101]["status"] = "pending"
    zendesk.agent_comment(101, "Please run ibdiagnet.", "2026-12-01T10:30:00Z")
    desk.comment("101", "ibdiagnet output attached next.")
    log = tmp_path / "ibdiagnet.log"
    log.write_text("-E- link down\n")
    desk.attach("101", [log], "ibdiagnet output")
    status = desk.status("101")
    assert (status.raw_status, status.state) == ("pending", EscalationState.WAITING_US)
    assert [(c.body, c.from_provider) for c in status.comments] == [
        (ticket["comments"][0]["body"], False), ("ibdiagnet output attached next.", False),
        ("ibdiagnet output", False), ("Please run ibdiagnet.", True)]
    assert [n for n, _ in ticket["files"]] == [bundle.name, "ibdiagnet.log"]

    desk.resolve("101", "optic replaced")
    assert desk.status("101").state is EscalationState.RESOLVED
    desk.reopen("101", "errors are back")
    assert desk.status("101").state is EscalationState.WAITING_PROVIDER


def test_a_lost_create_is_found_by_external_id_before_any_retry(desks, zendesk, zendesk_settings, draft, bundle):
    zendesk.fail("POST", r"^/api/v2/tickets$", 503, process=True)  # created, but the answer is lost
    filed = desks("zendesk", zendesk_settings).file("FC-1", draft, bundle)
    assert filed.case_id == "101" and list(zendesk.tickets) == [101]
    # the create carried its Idempotency-Key, and was not sent again: the search found the ticket first
    assert list(zendesk.idempotency) == ["FC-1"] and zendesk.idempotency_lookups == ["miss"]
    assert zendesk.calls.count(("POST", "/api/v2/tickets")) == 1


def test_filing_again_finds_the_ticket_by_external_id(desks, zendesk, zendesk_settings, draft, bundle):
    desk = desks("zendesk", zendesk_settings)
    first = desk.file("FC-1", draft, bundle)
    assert desk.file("FC-1", draft, bundle) == first == desk.find("FC-1")
    assert list(zendesk.tickets) == [101] and zendesk.calls.count(("POST", "/api/v2/uploads")) == 1
    assert desk.find("FC-2") is None


def test_a_bundle_over_the_limit_is_split_under_one_upload_token(monkeypatch, desks, zendesk, zendesk_settings,
                                                                 draft, big_bundle):
    from fabricase.providers.desks import zendesk as module

    monkeypatch.setattr(module.ZendeskDesk, "_limit", lambda self: 100_000)
    desks("zendesk", zendesk_settings).file("FC-3", draft, big_bundle)
    files = zendesk.tickets[101]["files"]
    assert len(files) >= 4 and all(len(data) <= 100_000 for _, data in files)
    assert files[0][0] == f"{big_bundle.name}.part001-of-{len(files):03d}"


def test_throttled_then_through(desks, zendesk, zendesk_settings, draft):
    zendesk.fail("POST", r"^/api/v2/tickets$", 429, headers={"Retry-After": "2"})
    assert desks("zendesk", zendesk_settings).file("FC-4", draft, None).case_id == "101"
    assert 2.0 in desks.slept and list(zendesk.tickets) == [101]


@pytest.mark.parametrize(("method", "path", "status", "expected"), [
    ("GET", r"^/api/v2/tickets$", 403, "find ticket: permission denied (HTTP 403): injected 403"),
    ("POST", r"/uploads$", 413, "upload FC-1.tar.gz: attachment too large for the desk (HTTP 413): injected 413"),
    ("POST", r"^/api/v2/tickets$", 502, "create ticket: server error (HTTP 502): injected 502 (after 5 attempts)"),
    ("POST", r"^/api/v2/tickets$", 422, "create ticket: HTTP 422: injected 422"),
])
def test_errors_are_one_line_and_nothing_is_filed(desks, zendesk, zendesk_settings, draft, bundle, method, path,
                                                   status, expected):
    zendesk.fail(method, path, status, times=9)
    with pytest.raises(ProviderError) as info:
        desks("zendesk", zendesk_settings).file("FC-5", draft, bundle)
    assert str(info.value) == f"static/zendesk: {expected}"
    assert zendesk.tickets == {}


def test_wrong_or_missing_credentials(desks, zendesk_settings, draft):
    wrong = {"FABRICASE_ZENDESK_EMAIL": "oncall@example.com", "FABRICASE_ZENDESK_TOKEN": "wrong-fake-token"}
    with pytest.raises(ProviderError, match=r"authentication failed \(HTTP 401\): check FABRICASE_ZENDESK_EMAIL"):
        desks("zendesk", zendesk_settings, env=wrong).file("FC-1", draft, None)
    with pytest.raises(ProviderError, match="missing credentials: set FABRICASE_ZENDESK_TOKEN in the environment"):
        only_email = {"FABRICASE_ZENDESK_EMAIL": "oncall@example.com"}
        desks("zendesk", zendesk_settings, env=only_email).file("FC-1", draft, None)


def test_check(desks, zendesk, zendesk_settings):
    results = desks("zendesk", zendesk_settings).check()
    assert [(r.check, r.ok) for r in results] == [("credentials", True), ("attachments", True)]
    assert results[0].detail == "authenticated as oncall@example.com (agent)"
    assert desks("zendesk", zendesk_settings, env={}).check()[0].ok is False
    assert not any(method != "GET" for method, _ in zendesk.calls)


@pytest.mark.parametrize(("status", "state"), [
    ("new", EscalationState.FILED), ("open", EscalationState.WAITING_PROVIDER),
    ("pending", EscalationState.WAITING_US), ("hold", EscalationState.WAITING_PROVIDER),
    ("solved", EscalationState.RESOLVED), ("closed", EscalationState.CLOSED),
])
def test_state_mapping(status, state):
    assert zendesk_state(status) is state
