"""Crash injection at every step of filing, on SQLite and PostgreSQL: after a crash, filing again leaves
exactly one case at the desk, and every case at the desk recorded."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from fabricase import filing
from fabricase.errors import ProviderError
from fabricase.providers.static import StaticProvider
from fabricase.tracker import Tracker
from tracker import workers
from tracker.deskprovider import Desk, DeskProvider, draft_for, paths_at

# Each step, and the history a crash there then a second run leave: the first attempt's events up to the
# crash, then what the second run adds.
HISTORY = {
    "before-intent": ["created", "filing", "filed"],
    "after-intent": ["created", "filing", "filing", "reconcile", "filed"],
    "desk-created": ["created", "filing", "filing", "reconcile", "filed"],
    "after-provider": ["created", "filing", "filing", "reconcile", "filed"],
    "after-mark-filed": ["created", "filing", "filed"],
}
CASE_BEFORE_RERUN = {"before-intent": 0, "after-intent": 0, "desk-created": 1, "after-provider": 1,
                     "after-mark-filed": 1}  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "FC-1-capture.tar.gz"
    path.write_bytes(b"bundle bytes\n" * 100)
    return path


@pytest.fixture(autouse=True)
def _no_hook():
    yield
    DeskProvider.hook = None


def _create(url: str, provider: str) -> str:
    with Tracker(url) as tracker:
        return tracker.create(provider=provider, title="gpu001 mlx5_3 symbol errors", symptom="busbw fell",
                              severity="major", hosts=["gpu001"], components=[("gpu001", "rdma:mlx5_3/1")]).id


def _crash_in_child(url: str, home: Path, provider: str, esc_id: str, step: str, bundle: Path) -> None:
    child = multiprocessing.get_context("spawn").Process(
        target=workers.file_and_crash, args=(url, str(home), provider, esc_id, step, str(bundle))
    )
    child.start()
    child.join()
    assert child.exitcode == workers.CRASHED, f"the filing did not reach {step}"


def _recorded_cases(url: str) -> set[str]:
    with Tracker(url) as tracker:
        return {e.provider_case_id for e in tracker.list(state="all") if e.provider_case_id}


@pytest.mark.parametrize("step", list(HISTORY))
def test_a_filing_crashed_at_any_step_files_once_when_run_again(any_db_url, home, bundle, step):
    esc_id = _create(any_db_url, "desk")
    desk = Desk(home / "desk")
    _crash_in_child(any_db_url, home, "desk", esc_id, step, bundle)
    assert len(desk.cases_for(esc_id)) == CASE_BEFORE_RERUN[step]

    with Tracker(any_db_url) as tracker:
        esc = filing.file_escalation(tracker, DeskProvider(paths_at(home)), esc_id, draft_for(), bundle)
        again = filing.file_escalation(tracker, DeskProvider(paths_at(home)), esc_id, draft_for(), bundle)

    cases = desk.cases_for(esc_id)
    assert len(cases) == 1, "filed twice"
    assert esc.provider_case_id == again.provider_case_id == cases[0]["case_id"]
    assert {c["case_id"] for c in desk.cases()} == _recorded_cases(any_db_url), "a case filed but not recorded"
    assert [e.kind for e in again.events] == HISTORY[step]
    assert esc.state == "filed" and esc.raw_status == "opened" and esc.bundle_path == str(bundle)
    assert desk.attachments(cases[0]["case_id"]) == [bundle.name]
    filing_events = [e for e in again.events if e.kind == "filing"]
    with Tracker(any_db_url) as tracker:
        key = f"{esc_id}.{tracker.tracker_id}"
    assert all(e.data["marker"] == f"[fabricase {key}]" and e.data["key"] == key for e in filing_events)


@pytest.mark.parametrize("step", ["before-intent", "after-intent", "after-provider", "after-mark-filed"])
def test_the_outbox_desk_after_a_crash_holds_one_case(any_db_url, home, bundle, step):
    esc_id = _create(any_db_url, "static")
    _crash_in_child(any_db_url, home, "static", esc_id, step, bundle)
    with Tracker(any_db_url) as tracker:
        esc = filing.file_escalation(tracker, StaticProvider(paths_at(home)), esc_id, draft_for("static"), bundle)
        key = f"{esc_id}.{tracker.tracker_id}"
    assert sorted(p.name for p in (home / "outbox").iterdir()) == [key]
    assert esc.provider_case_id == f"outbox-{key}"
    assert [e.kind for e in esc.events].count("filed") == 1
    assert _recorded_cases(any_db_url) == {esc.provider_case_id}


def test_a_timeout_after_the_desk_took_the_case_is_reconciled(any_db_url, home, bundle):
    esc_id = _create(any_db_url, "desk")

    def time_out(step: str) -> None:
        raise ProviderError("desk: CreateCase timed out after 30 s", where="desk")

    DeskProvider.hook = time_out
    with Tracker(any_db_url) as tracker:
        with pytest.raises(ProviderError, match="timed out"):
            filing.file_escalation(tracker, DeskProvider(paths_at(home)), esc_id, draft_for(), bundle)
        assert tracker.get(esc_id).provider_case_id is None
        DeskProvider.hook = None
        esc = filing.file_escalation(tracker, DeskProvider(paths_at(home)), esc_id, draft_for(), bundle)
    assert [e.kind for e in esc.events] == ["created", "filing", "filing-failed", "filing", "reconcile", "filed"]
    assert esc.events[2].detail == "desk: desk: CreateCase timed out after 30 s"
    assert esc.events[4].data["found"] == esc.provider_case_id
    assert len(Desk(home / "desk").cases()) == 1


def test_a_desk_that_refused_is_filed_on_the_next_attempt(any_db_url, home, bundle, monkeypatch):
    esc_id = _create(any_db_url, "desk")
    provider = DeskProvider(paths_at(home))

    def refuse(**_kw):
        raise ProviderError("no support plan (SubscriptionRequiredException)", where="desk")

    with Tracker(any_db_url) as tracker:
        with monkeypatch.context() as m:
            m.setattr(provider, "file_case", refuse)
            with pytest.raises(ProviderError):
                filing.file_escalation(tracker, provider, esc_id, draft_for(), bundle)
        assert Desk(home / "desk").cases() == []
        esc = filing.file_escalation(tracker, provider, esc_id, draft_for(), bundle)
    assert [e.kind for e in esc.events] == ["created", "filing", "filing-failed", "filing", "reconcile", "filed"]
    assert esc.events[4].data == {"marker": esc.events[1].data["marker"], "searched": True, "found": None}
    assert len(Desk(home / "desk").cases()) == 1
