from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricase.errors import NotFoundError, TrackerError
from fabricase.models import EscalationState, Severity
from fabricase.tracker import Tracker, component_label, format_escalation_id, parse_escalation_id


def _create(tracker: Tracker, provider: str = "aws", title: str = "gpu001 mlx5_3 symbol errors", **kw):
    args = {
        "provider": provider,
        "title": title,
        "symptom": "allreduce busbw fell from 360 to 210 GB/s",
        "severity": Severity.MAJOR,
        "hosts": ["gpu002", "gpu001"],
        "components": [("gpu001", "rdma:mlx5_3/1"), (None, "switch:leaf-3")],
    }
    args.update(kw)
    return tracker.create(**args)


def test_create_returns_a_draft_with_the_first_id_and_a_created_event(tracker):
    esc = _create(tracker)
    assert esc.id == "FC-1"
    assert esc.state is EscalationState.DRAFT
    assert esc.severity is Severity.MAJOR
    assert esc.provider == "aws"
    assert esc.hosts == ["gpu001", "gpu002"]
    assert esc.components == ["switch:leaf-3", "gpu001/rdma:mlx5_3/1"]
    assert esc.created_at == esc.updated_at == "2024-05-01T12:00:00Z"
    assert [(e.kind, e.detail) for e in esc.events] == [("created", "allreduce busbw fell from 360 to 210 GB/s")]
    assert esc.events[0].data == {"provider": "aws", "severity": "major"}
    assert esc.provider_case_id is None and esc.bundle_id is None


def test_ids_follow_the_highest_number(tracker):
    assert [_create(tracker).id for _ in range(3)] == ["FC-1", "FC-2", "FC-3"]


def test_create_drops_repeated_hosts_and_components(tracker):
    esc = _create(
        tracker,
        hosts=["gpu001", "gpu001"],
        components=[("gpu001", "netdev:eth2"), ("gpu001", "netdev:eth2"), (None, "rack:r1"), (None, "rack:r1")],
    )
    assert esc.hosts == ["gpu001"]
    assert esc.components == ["rack:r1", "gpu001/netdev:eth2"]


def test_severity_given_as_text(tracker):
    assert _create(tracker, severity="critical").severity is Severity.CRITICAL


@pytest.mark.parametrize("text", ["FC-1", "fc-1", "1", " FC-1 ", "Fc-1"])
def test_get_accepts_every_spelling_of_an_id(tracker, text):
    _create(tracker)
    assert tracker.get(text).id == "FC-1"


@pytest.mark.parametrize("text", ["FC-9", "9"])
def test_get_unknown_names_the_id(tracker, text):
    _create(tracker)
    with pytest.raises(NotFoundError) as info:
        tracker.get(text)
    assert info.value.where == "FC-9"
    assert "FC-9" in str(info.value)


@pytest.mark.parametrize("text", ["abc", "FC-", "FC-0", "FC-1x", "", "XY-3"])
def test_get_malformed_id_is_not_found(tracker, text):
    with pytest.raises(NotFoundError) as info:
        tracker.get(text)
    assert info.value.where == text


@given(st.integers(min_value=1, max_value=10**12))
def test_id_spellings_parse_to_the_number(n):
    for text in (format_escalation_id(n), f"fc-{n}", str(n), f"  {n}\n"):
        assert parse_escalation_id(text) == n


def test_component_label():
    assert component_label("gpu001", "rdma:mlx5_3/1") == "gpu001/rdma:mlx5_3/1"
    assert component_label(None, "network-node:nn-4") == "network-node:nn-4"


def test_mark_filed_records_the_case(tracker):
    _create(tracker)
    esc = tracker.mark_filed(
        "fc-1",
        provider_case_id="171234",
        raw_status="opened",
        state="waiting-provider",
        ticket_path="/data/outbox/FC-1/ticket.md",
        bundle_id="ab" * 32,
        bundle_path=None,
    )
    assert esc.state is EscalationState.WAITING_PROVIDER
    assert (esc.provider_case_id, esc.raw_status) == ("171234", "opened")
    assert esc.ticket_path == "/data/outbox/FC-1/ticket.md"
    assert esc.bundle_id == "ab" * 32 and esc.bundle_path is None
    assert esc.updated_at == "2024-05-01T12:01:00Z" and esc.created_at == "2024-05-01T12:00:00Z"
    filed = esc.events[-1]
    assert (filed.kind, filed.detail) == ("filed", "filed as 171234")
    assert filed.data["case_id"] == "171234" and filed.data["state"] == "waiting-provider"


def test_add_event_appends_history_and_touches_the_escalation(tracker):
    _create(tracker)
    event = tracker.add_event("FC-1", "comment", "provider asked for the switch logs", {"by": "desk", "n": 2})
    assert event.kind == "comment" and event.data == {"by": "desk", "n": 2}
    esc = tracker.get("FC-1")
    assert [e.kind for e in esc.events] == ["created", "comment"]
    assert esc.events[-1].data == {"by": "desk", "n": 2}
    assert esc.updated_at == event.at


def test_resolve_closes_with_a_state_event_and_is_idempotent(tracker):
    _create(tracker)
    esc = tracker.resolve("FC-1", "provider replaced the transceiver")
    assert esc.state is EscalationState.RESOLVED
    last = esc.events[-1]
    assert last.kind == "state"
    assert last.detail == "draft -> resolved: provider replaced the transceiver"
    assert last.data["from"] == "draft" and last.data["to"] == "resolved"
    again = tracker.resolve("FC-1", None)
    assert len(again.events) == len(esc.events)


def test_set_state_records_a_new_raw_status(tracker):
    _create(tracker)
    tracker.set_state("FC-1", "waiting-us", raw_status="pending-customer-action")
    esc = tracker.set_state("FC-1", "waiting-us", raw_status="pending-customer-action")
    assert esc.raw_status == "pending-customer-action"
    assert [e.kind for e in esc.events] == ["created", "state"]


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.resolve("FC-7", None),
        lambda t: t.add_event("FC-7", "comment", "x"),
        lambda t: t.set_state("7", "filed"),
        lambda t: t.mark_filed(
            "FC-7", provider_case_id="c", raw_status=None, state="filed",
            ticket_path=None, bundle_id=None, bundle_path=None,
        ),
    ],
)  # fmt: skip
def test_updates_to_an_unknown_escalation_are_not_found(tracker, call):
    with pytest.raises(NotFoundError) as info:
        call(tracker)
    assert info.value.where == "FC-7"


def _ids(escalations):
    return [e.id for e in escalations]


def test_list_filters(tracker):
    _create(tracker, provider="aws")  # FC-1 draft
    _create(tracker, provider="gcp")  # FC-2 -> waiting-provider
    _create(tracker, provider="aws")  # FC-3 -> waiting-us
    _create(tracker, provider="azure")  # FC-4 -> resolved
    _create(tracker, provider="aws")  # FC-5 -> closed
    tracker.set_state("FC-2", EscalationState.WAITING_PROVIDER)
    tracker.set_state("FC-3", EscalationState.WAITING_US)
    tracker.resolve("FC-4", None)
    tracker.set_state("FC-5", "closed")

    assert _ids(tracker.list()) == ["FC-1", "FC-2", "FC-3"]
    assert _ids(tracker.list(state="all")) == ["FC-1", "FC-2", "FC-3", "FC-4", "FC-5"]
    assert _ids(tracker.list(state="waiting")) == ["FC-2", "FC-3"]
    assert _ids(tracker.list(state="resolved")) == ["FC-4"]
    assert _ids(tracker.list(state=EscalationState.CLOSED)) == ["FC-5"]
    assert _ids(tracker.list(state="draft")) == ["FC-1"]
    assert _ids(tracker.list(provider="aws")) == ["FC-1", "FC-3"]
    assert _ids(tracker.list(provider="aws", state="all")) == ["FC-1", "FC-3", "FC-5"]
    assert tracker.list(provider="static") == []


def test_list_carries_hosts_and_components_but_not_history(tracker):
    _create(tracker, hosts=["gpu009"], components=[("gpu009", "nvlink:3/11")])
    _create(tracker, hosts=["gpu010"], components=[])
    first, second = tracker.list()
    assert first.hosts == ["gpu009"] and first.components == ["gpu009/nvlink:3/11"]
    assert second.hosts == ["gpu010"] and second.components == []
    assert first.events == [] and second.events == []


def test_list_rejects_an_unknown_state_filter(tracker):
    with pytest.raises(TrackerError, match="unknown state filter 'pending'"):
        tracker.list(state="pending")


def test_to_dict_is_plain_json_data(tracker):
    d = _create(tracker).to_dict()
    assert d["state"] == "draft" and d["severity"] == "major" and d["id"] == "FC-1"
