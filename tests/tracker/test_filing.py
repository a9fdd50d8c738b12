"""filing.py over a real tracker and the test desk: duplicates, sync through the normalized states,
comments, attachments, resolve and reopen."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from fabricase import filing
from fabricase.errors import NotFoundError, ProviderError, TrackerError, UnsupportedError
from fabricase.providers.base import Feature
from fabricase.providers.static import StaticProvider
from tracker.deskprovider import Desk, DeskProvider, draft_for, paths_at


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def desk(home: Path) -> Desk:
    return Desk(home / "desk")


@pytest.fixture
def provider(home: Path) -> DeskProvider:
    return DeskProvider(paths_at(home))


def _open(tracker, provider, *, hosts=("gpu001",), components=(("gpu001", "rdma:mlx5_3/1"),), instances=None,
          name="desk", file=True):
    esc = tracker.create(provider=name, title="symbol errors", symptom="busbw fell", severity="major",
                         hosts=list(hosts), components=list(components), instances=instances)
    return filing.file_escalation(tracker, provider, esc.id, draft_for(), None) if file else esc


# -- duplicates ---------------------------------------------------------------------------------------------


def test_duplicates_by_host_instance_and_shared_component(tracker, provider):
    by_host = _open(tracker, provider, hosts=["gpu001"])
    by_instance = _open(tracker, provider, hosts=["gpu010"], instances={"gpu010": "i-0abc"})
    by_switch = _open(tracker, provider, hosts=["gpu020"], components=[(None, "switch:leaf-3")])
    _open(tracker, provider, hosts=["gpu030"], components=[("gpu030", "switch:leaf-3")])  # host-bound: no match

    found = filing.explain_duplicates(tracker, provider="desk", hosts=["gpu001", "gpu099"],
                                      instances={"gpu077": "i-0abc"}, components=[(None, "switch:leaf-3")])
    assert [(e.id, why) for e, why in found] == [
        (by_host.id, ("host gpu001",)), (by_instance.id, ("instance i-0abc",)), (by_switch.id, ("switch:leaf-3",)),
    ]
    assert filing.find_duplicates(tracker, provider="desk", hosts=["gpu099"], instances=["i-0zzz"],
                                  components=[(None, "switch:leaf-4"), ("gpu030", "switch:leaf-3")]) == []


def test_duplicates_are_open_ones_of_the_same_provider(tracker, provider):
    first = _open(tracker, provider)
    other = _open(tracker, provider, name="aws", file=False)
    assert [e.id for e in filing.find_duplicates(tracker, provider="desk", hosts=["gpu001"])] == [first.id]
    assert [e.id for e in filing.find_duplicates(tracker, provider=None, hosts=["gpu001"])] == [first.id, other.id]
    filing.resolve(tracker, provider, first.id, "cable replaced")
    assert filing.find_duplicates(tracker, provider="desk", hosts=["gpu001"]) == []
    # --force semantics: find_duplicates only reports; filing anyway makes a second escalation and case.
    forced = _open(tracker, provider, name="aws", file=False)
    assert [e.id for e in filing.find_duplicates(tracker, provider="aws", hosts=["gpu001"])] == [other.id, forced.id]


def test_a_draft_whose_filing_crashed_still_counts_as_a_duplicate(tracker, provider):
    draft = _open(tracker, provider, file=False)
    assert [e.id for e in filing.find_duplicates(tracker, provider="desk", hosts=["gpu001"])] == [draft.id]


# -- sync ---------------------------------------------------------------------------------------------------


def test_sync_moves_a_case_through_the_normalized_states(tracker, provider, desk):
    esc = _open(tracker, provider)
    case = esc.provider_case_id
    get = {"desk": provider}.__getitem__
    steps = [
        ("work-in-progress", None, "waiting-provider", "provider"),
        ("pending-customer-action", "please send ibdiagnet output", "waiting-us", "us"),
        ("work-in-progress", None, "waiting-provider", "provider"),
        ("resolved", "replaced the optic on leaf-3 port 17", "resolved", None),
    ]
    seen = []
    for raw, desk_says, state, waiting in steps:
        desk.set_status(case, raw)
        if desk_says:
            desk.add_comment(case, desk_says, at="2024-05-02T09:00:00.5Z" if state == "waiting-us" else None)
        (result,) = filing.sync(tracker, get)
        assert (result.outcome, result.state_to, result.raw_status) == ("updated", state, raw)
        view = tracker.tracked(esc.id)
        assert (view.escalation.state, view.escalation.raw_status, view.waiting_on) == (state, raw, waiting)
        seen.append(state)
        if raw == "pending-customer-action":
            assert view.last_reply_at == "2024-05-02T09:00:00Z"
            filing.comment(tracker, provider, esc.id, "ibdiagnet output attached")
    assert filing.sync(tracker, get) == []  # resolved: no longer synced
    final = tracker.get(esc.id)
    assert [(e.data["from"], e.data["to"]) for e in final.events if e.kind == "state"] == [
        ("filed", "waiting-provider"), ("waiting-provider", "waiting-us"), ("waiting-us", "waiting-provider"),
        ("waiting-provider", "resolved"),
    ]
    comments = [(e.detail, e.data["from_provider"]) for e in final.events if e.kind == "comment"]
    assert comments == [("please send ibdiagnet output", True), ("ibdiagnet output attached", False),
                        ("replaced the optic on leaf-3 port 17", True)]  # ours matched to its desk copy, once


def test_sync_twice_records_nothing_new(tracker, provider, desk):
    esc = _open(tracker, provider)
    desk.add_comment(esc.provider_case_id, "looking")
    first = filing.sync(tracker, {"desk": provider}.__getitem__)
    events = len(tracker.get(esc.id).events)
    second = filing.sync(tracker, {"desk": provider}.__getitem__)
    assert [r.outcome for r in first] == ["updated"] and first[0].new_comments == 1
    assert [(r.outcome, r.new_comments) for r in second] == [("unchanged", 0)]
    assert len(tracker.get(esc.id).events) == events
    assert tracker.tracked(esc.id).last_synced_at is not None


def test_sync_skips_a_provider_without_sync_and_keeps_errors_per_escalation(tracker, provider, home, desk):
    static = StaticProvider(paths_at(home))
    outbox = _open(tracker, static, name="static", file=False)
    outbox = filing.file_escalation(tracker, static, outbox.id, draft_for("static"), None)
    broken = _open(tracker, provider)
    healthy = _open(tracker, provider)
    desk.set_status(healthy.provider_case_id, "work-in-progress")
    (desk.root / broken.provider_case_id / "case.json").unlink()  # the desk lost it
    missing_sdk = tracker.create(provider="azure", title="t", symptom="s", severity="minor", hosts=[], components=[])
    tracker.mark_filed(missing_sdk.id, provider_case_id="2405010010000001", raw_status="Open", state="filed",
                       ticket_path=None, bundle_id=None, bundle_path=None)

    def get(name):
        if name == "azure":
            raise ProviderError("provider 'azure' needs azure.mgmt.support: pip install 'fabricase[azure]'",
                                where="azure")
        return {"desk": provider, "static": static}[name]

    results = {r.escalation_id: r for r in filing.sync(tracker, get)}
    static_skips = not static.supports(Feature.SYNC)
    assert results[outbox.id].outcome == ("skipped" if static_skips else results[outbox.id].outcome)
    if static_skips:
        assert results[outbox.id].reason.startswith("static: ")
    assert results[broken.id].outcome == "error" and results[broken.id].reason.endswith("no such case")
    assert (results[healthy.id].outcome, results[healthy.id].state_to) == ("updated", "waiting-provider")
    no_sdk = results[missing_sdk.id]
    assert no_sdk.outcome == "error" and "pip install 'fabricase[azure]'" in no_sdk.reason
    assert tracker.get(healthy.id).state == "waiting-provider"


def test_sync_of_named_escalations_or_one_provider(tracker, provider, desk):
    one, two = _open(tracker, provider), _open(tracker, provider)
    get = {"desk": provider}.__getitem__
    assert [r.escalation_id for r in filing.sync(tracker, get, escalations=["2"])] == [two.id]
    assert [r.escalation_id for r in filing.sync(tracker, get, provider="desk")] == [one.id, two.id]
    assert filing.sync(tracker, get, provider="aws") == []
    with pytest.raises(NotFoundError):
        filing.sync(tracker, get, escalations=["FC-99"])


# -- comment, attach, resolve, reopen -----------------------------------------------------------------------


def test_comment_attach_resolve_reopen_reach_the_desk_and_the_timeline(tracker, provider, desk, tmp_path):
    esc = _open(tracker, provider)
    case = esc.provider_case_id
    log = tmp_path / "ibdiagnet.log"
    log.write_text("port 17: symbol errors 4012\n")

    said = filing.comment(tracker, provider, esc.id, "errors persist after reseat")
    attached = filing.attach(tracker, provider, esc.id, [log], "ibdiagnet from the leaf")
    resolved = filing.resolve(tracker, provider, esc.id, "optic replaced")
    again = filing.resolve(tracker, provider, esc.id, "twice")
    reopened = filing.reopen(tracker, provider, esc.id, "errors are back")

    assert said.sent and attached.sent and resolved.sent and not again.sent
    assert [c["body"] for c in desk.comments(case)] == ["errors persist after reseat", "ibdiagnet from the leaf"]
    assert [n.split("-", 1)[1] for n in desk.attachments(case)] == ["ibdiagnet.log"]
    assert desk.status(case) == "reopened"
    assert resolved.escalation.state == "resolved" and reopened.escalation.state == "waiting-provider"
    events = tracker.get(esc.id).events
    attach = next(e for e in events if e.kind == "attach")
    assert attach.data["files"][0]["name"] == "ibdiagnet.log" and len(attach.data["files"][0]["sha256"]) == 64
    assert [e.kind for e in events][-6:] == ["comment", "attach", "resolve", "state", "reopen", "state"]


def test_a_provider_without_the_feature_records_locally_and_says_why(tracker, provider, monkeypatch, tmp_path):
    esc = _open(tracker, provider)
    monkeypatch.setattr(DeskProvider, "unsupported", {**DeskProvider.unsupported,
                                                      Feature.COMMENT: "comments go by e-mail",
                                                      Feature.ATTACH: "no uploads"})
    result = filing.comment(tracker, provider, esc.id, "hello")
    assert not result.sent and result.reason == "desk: comment is not supported: comments go by e-mail"
    assert tracker.get(esc.id).events[-1].data["sent"] is False
    f = tmp_path / "x.txt"
    f.write_text("x")
    with pytest.raises(UnsupportedError, match="no uploads"):
        filing.attach(tracker, provider, esc.id, [f], "")
    local = filing.resolve(tracker, provider, esc.id, "fixed", local=True)
    assert not local.sent and local.escalation.state == "resolved"


def test_errors_are_one_line(tracker, provider, tmp_path):
    esc = _open(tracker, provider)
    draft = _open(tracker, provider, file=False)
    with pytest.raises(ProviderError, match="not a file"):
        filing.attach(tracker, provider, esc.id, [tmp_path / "missing"], "")
    with pytest.raises(UnsupportedError, match="never filed"):
        filing.attach(tracker, provider, draft.id, [Path(__file__)], "")
    with pytest.raises(TrackerError, match="is open"):
        filing.reopen(tracker, provider, esc.id, "")
    with pytest.raises(ProviderError, match="empty comment"):
        filing.comment(tracker, provider, esc.id, "  ")
    (provider.desk.root / esc.provider_case_id / "case.json").unlink()
    with pytest.raises(ProviderError, match="no such case"):
        filing.comment(tracker, provider, esc.id, "lost")
    assert tracker.get(esc.id).events[-1].kind == "comment-failed"


def test_reopen_waits_on_the_provider_and_clears_stale_only_after_a_reply(tracker, provider, clock, desk):
    esc = _open(tracker, provider)
    filing.resolve(tracker, provider, esc.id, "done")
    filing.reopen(tracker, provider, esc.id, "back")
    clock.moment += timedelta(days=4)
    assert tracker.tracked(esc.id).stale
    desk.add_comment(esc.provider_case_id, "on it", at=clock.moment.isoformat())
    filing.sync(tracker, {"desk": provider}.__getitem__)
    assert not tracker.tracked(esc.id).stale
