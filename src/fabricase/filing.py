"""Filing and following a case: pure orchestration over a Tracker and a Provider.

Filing is idempotent and always finishes. The intent (a "filing" event holding the filing key, the case marker,
the ticket and the bundle) is recorded BEFORE the desk is called, and the case id after it answers. A filing
interrupted in between (a crash, a timeout, a desk error) left the intent without a "filed" event: the next
attempt (`fabricase retry FC-n`, or `open` on the same hosts) first searches the desk's recent cases for the
marker (provider.find_case) and records the case it finds instead of filing it again.

The key is the escalation id and the tracker's own id ("FC-1.ab12cd34", providers.base.filing_key): every
tracker numbers from FC-1, and a desk case is adopted only when its marker is this tracker's.

Only one attempt files an escalation at a time. Each attempt has an owner (host, pid, a token), recorded on the
"created" and "filing" events; another attempt is refused while that owner is alive (`holder`). A crashed
attempt's owner is dead (its pid is gone, or, in this process, its token was released), so a retry may go on.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fabricase.errors import FabricaseError, ProviderError, TrackerError, UnsupportedError
from fabricase.models import Escalation, EscalationState, Severity, TicketDraft
from fabricase.providers.base import Feature, FilingResult, Provider, attachment_ref, case_marker, filing_key
from fabricase.redact import gate
from fabricase.tracker import Tracker

__all__ = [
    "LEASE", "ActionResult", "SyncResult", "attach", "attempt", "comment", "explain_duplicates", "file_escalation",
    "filing_key_of", "find_duplicates", "holder", "recorded_draft", "reopen", "resolve", "retry", "sync",
]  # fmt: skip


# -- who is filing ------------------------------------------------------------------------------------------

# An owner on another host is taken for alive this long after its last event (its pid cannot be checked).
LEASE = timedelta(minutes=30)
_ACTIVE: set[str] = set()  # the tokens of the attempts running in this process
_HELD_BY = ("created", "filing", "resumed")  # events whose owner holds the escalation until it is filed or fails
_RELEASED_BY = ("filed", "filing-failed")


@contextmanager
def attempt(owner: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """This process's claim to file (or create and then file) an escalation: an owner record (host, pid, a
    token) that `holder` sees as alive for as long as the `with` runs. owner: one already made (nested use)."""
    if owner is not None and owner.get("token") in _ACTIVE:
        yield dict(owner)
        return
    me = {"host": socket.gethostname(), "pid": os.getpid(), "token": secrets.token_hex(8)}
    _ACTIVE.add(me["token"])
    try:
        yield me
    finally:
        _ACTIVE.discard(me["token"])


def _alive(owner: Mapping[str, Any], at: str, now: datetime) -> bool:
    if owner.get("host") != socket.gethostname():
        try:
            return now - datetime.fromisoformat(at) < LEASE
        except (TypeError, ValueError):
            return False
    pid = owner.get("pid")
    if pid == os.getpid():
        return owner.get("token") in _ACTIVE
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def holder(esc: Escalation, *, exempt: str | None = None, now: datetime | None = None) -> str | None:
    """Why another attempt may not file `esc` now (an attempt that is alive holds it), or None. exempt: the
    token of the asking attempt itself (the one that created it goes on to file it)."""
    if esc.provider_case_id is not None:
        return None
    last = next((e for e in reversed(esc.events) if e.kind in (*_HELD_BY, *_RELEASED_BY)), None)
    if last is None or last.kind in _RELEASED_BY:
        return None
    owner = last.data.get("owner") if isinstance(last.data, Mapping) else None
    if not isinstance(owner, Mapping) or not owner or (exempt is not None and owner.get("token") == exempt):
        return None
    if not _alive(owner, last.at, now or datetime.now(UTC)):
        return None
    return (f"{esc.id} is being filed right now by pid {owner.get('pid')} on {owner.get('host')} (since "
            f"{last.at}); wait for it, or run `fabricase retry {esc.id}` once it has stopped")


# -- no duplicates ------------------------------------------------------------------------------------------


def _shared(components: Iterable[tuple[str | None, str] | str]) -> list[str]:
    """The shared components (no host: switch, network node, block, rack) among (host, component) pairs."""
    shared = []
    for item in components:
        host, name = (None, item) if isinstance(item, str) else item
        if not host:
            shared.append(name)
    return shared


def explain_duplicates(
    tracker: Tracker,
    *,
    provider: str | None,
    hosts: Iterable[str] = (),
    instances: Iterable[str] | Mapping[str, str] = (),
    components: Iterable[tuple[str | None, str] | str] = (),
) -> list[tuple[Escalation, tuple[str, ...]]]:
    """Each open escalation that already covers one of these, oldest first, with what it covers in words
    ("host gpu001", "instance i-0abc", "switch:leaf-3"). instances: ids, or a host -> instance id mapping."""
    ids = instances.values() if isinstance(instances, Mapping) else instances
    found = tracker.covering(provider=provider, hosts=hosts, instances=ids, components=_shared(components))
    return [(tracker.get(c.escalation_id), c.matched) for c in found]


def find_duplicates(
    tracker: Tracker,
    *,
    provider: str | None,
    hosts: Iterable[str] = (),
    instances: Iterable[str] | Mapping[str, str] = (),
    components: Iterable[tuple[str | None, str] | str] = (),
) -> list[Escalation]:
    """Open escalations (with `provider`; None: any provider) that already cover the same instance, host or
    shared component: `open` proposes `attach` to them instead, and files anyway only with --force. Pass the
    faulty hosts, not every captured one, or any two escalations of one job would collide."""
    return [e for e, _ in explain_duplicates(tracker, provider=provider, hosts=hosts, instances=instances,
                                             components=components)]  # fmt: skip


# -- idempotent filing --------------------------------------------------------------------------------------


def _ticket_path(location: str) -> Path | str:
    """Where the filed ticket text lives: the outbox's ticket.md, else the case's location itself. A URL (the
    desk's case page) is kept whole: as a Path, `https://host/x` would lose a slash."""
    if "://" in location:
        return location
    folder = Path(location)
    return folder / "ticket.md" if (folder / "ticket.md").is_file() else folder


def _reconcile(provider: Provider, key: str) -> tuple[FilingResult | None, dict[str, Any]]:
    """The case an interrupted filing already opened, searched by its marker; (None, why) if none was found
    or the desk cannot be searched (its file_case then finds the case again itself, as the interface asks)."""
    try:
        found = provider.find_case(key)
    except (UnsupportedError, NotImplementedError) as exc:
        return None, {"searched": False, "reason": str(exc) or f"{provider.name} cannot search its cases"}
    return found, {"searched": True, "found": found.case_id if found else None}


def filing_key_of(tracker: Tracker, esc: Escalation) -> str:
    """The key this escalation files under: the one its first intent recorded (an intent from before keys were
    per tracker files under the bare id), else a new one from this tracker's id."""
    for event in esc.events:
        if event.kind == "filing" and isinstance(event.data, Mapping):
            return str(event.data.get("key") or esc.id)
    return filing_key(esc.id, tracker.tracker_id)


def _draft_record(draft: TicketDraft) -> dict[str, Any]:
    return {"provider": draft.provider, "title": draft.title, "body": draft.body, "severity": str(draft.severity),
            "hosts": list(draft.hosts), "components": list(draft.components), "bundle_id": draft.bundle_id,
            "summary": draft.summary}  # fmt: skip


def recorded_draft(esc: Escalation) -> tuple[TicketDraft, Path | None] | None:
    """The ticket and bundle the last intent was going to file (what `retry` files again), or None when no
    intent recorded them or the bundle is gone."""
    for event in reversed(esc.events):
        data = event.data if isinstance(event.data, Mapping) else {}
        if event.kind != "filing" or not isinstance(data.get("draft"), Mapping):
            continue
        d = data["draft"]
        bundle = Path(data["bundle_path"]) if data.get("bundle_path") else None
        if bundle is not None and not bundle.is_file():
            return None
        try:
            draft = TicketDraft(provider=str(d["provider"]), title=str(d["title"]), body=str(d["body"]),
                                severity=Severity(d["severity"]), hosts=list(d.get("hosts") or []),
                                components=list(d.get("components") or []), bundle_id=d.get("bundle_id"),
                                summary=d.get("summary"))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            return None
        return draft, bundle
    return None


def file_escalation(
    tracker: Tracker, provider: Provider, esc_id: str, draft: TicketDraft, bundle_path: Path | None, *,
    owner: Mapping[str, Any] | None = None,
) -> Escalation:
    """File the escalation's case once, whatever happened to earlier attempts; the escalation as recorded.

    Already filed: nothing is sent. Another live attempt holds it: BusyError. Intent recorded but no case
    recorded (an interrupted attempt): the desk is searched for the marker first. A failure of the desk is
    recorded as a "filing-failed" event and raised. owner: the attempt that created the escalation (open).
    """
    esc = tracker.get(esc_id)
    if esc.provider_case_id is not None:
        return esc
    key = filing_key_of(tracker, esc)
    marker = case_marker(key)
    with attempt(owner) as me:
        attempts = sum(1 for e in esc.events if e.kind == "filing")
        desk = getattr(getattr(provider, "desk", None), "name", None)  # static: the desk it really went to
        data = {"marker": marker, "key": key, "provider": provider.name, "desk": desk, "attempt": attempts + 1,
                "owner": me,
                "draft": _draft_record(draft), "bundle_path": str(bundle_path) if bundle_path is not None else None}
        esc = tracker.claim(esc.id, "filing", f"filing with {provider.name} (attempt {attempts + 1})", data,
                            lambda e: holder(e, exempt=me["token"]))
        if esc.provider_case_id is not None:  # filed by another attempt meanwhile
            return esc
        result = None
        if attempts:
            result, found = _reconcile(provider, key)
            detail = f"found {result.case_id} at the desk" if result else "no case at the desk: filing again"
            tracker.add_event(esc.id, "reconcile", detail, {"marker": marker, **found})
        if result is None:
            try:
                result = provider.file_case(escalation_id=key, draft=draft, bundle_path=bundle_path)
            except Exception as exc:
                why = str(exc) if isinstance(exc, FabricaseError) else f"{type(exc).__name__}: {exc}"
                tracker.add_event(esc.id, "filing-failed", why, {"marker": marker, "provider": provider.name})
                raise
        return tracker.mark_filed(
            esc.id, provider_case_id=result.case_id, raw_status=result.raw_status, state=result.state,
            ticket_path=_ticket_path(result.location), bundle_id=draft.bundle_id,
            bundle_path=bundle_path if bundle_path is not None else esc.bundle_path,
        )  # fmt: skip


def retry(tracker: Tracker, provider: Provider, esc_id: str, *,
          rebuild: Callable[[Escalation], tuple[TicketDraft, Path | None]]) -> Escalation:
    """Finish an escalation whose filing did not (`fabricase retry FC-n`): reconcile by its marker, then file
    the ticket and bundle its last intent recorded, or, when there is none, the ones `rebuild` makes again from
    the capture. Filed already: returned as it is, nothing sent."""
    from fabricase.tracker.store import BusyError

    esc = tracker.get(esc_id)
    if esc.provider_case_id is not None:
        return esc
    if not esc.state.is_open:
        raise TrackerError(f"{esc.id} is {esc.state} without a case: reopen it first", where=esc.id)
    busy = holder(esc)
    if busy is not None:
        raise BusyError(busy, where=esc.id)
    found = recorded_draft(esc)
    draft, bundle = found if found is not None else rebuild(esc)
    return file_escalation(tracker, provider, esc.id, draft, bundle)


# -- following the case -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActionResult:
    """What a comment, attach, reopen or resolve did: the escalation now, and whether the desk was told
    (`sent`), or why not (`reason`: the provider lacks the feature, or the case was never filed)."""

    escalation: Escalation
    sent: bool
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The escalation's fields (as `list --json` gives them) with `sent` and `reason` added."""
        esc = {k: v for k, v in self.escalation.to_dict().items() if k != "events"}
        return {**esc, "sent": self.sent, "reason": self.reason}


def _why_not(provider: Provider | None, esc: Escalation, feature: Feature, *, local: bool = False) -> str | None:
    """Why the desk will not be told (--local, or no provider given; the case was never filed; the provider
    lacks the feature), or None when it will."""
    if esc.provider_case_id is None:
        return f"{esc.id} was never filed with {esc.provider}: finish it with `fabricase retry {esc.id}`"
    if local or provider is None:
        return "recorded in the tracker only (--local)"
    if not provider.supports(feature):
        return f"{provider.name}: {feature.value} is not supported: {provider.unsupported[feature]}"
    return None


def _call_desk(tracker: Tracker, provider: Provider, esc: Escalation, feature: Feature,
               call: Callable[[str], None]) -> None:
    """Call the desk; a failure is recorded ("<feature>-failed") and raised as one line."""
    try:
        call(esc.provider_case_id or "")
    except NotImplementedError as exc:
        error: FabricaseError = UnsupportedError(f"{feature.value} is not implemented", where=provider.name)
        tracker.add_event(esc.id, f"{feature.value}-failed", str(error), {"case_id": esc.provider_case_id})
        raise error from exc
    except Exception as exc:
        why = str(exc) if isinstance(exc, FabricaseError) else f"{type(exc).__name__}: {exc}"
        tracker.add_event(esc.id, f"{feature.value}-failed", why, {"case_id": esc.provider_case_id})
        raise


def _desk_data(esc: Escalation, reason: str | None) -> dict[str, Any]:
    return {"case_id": esc.provider_case_id, "sent": reason is None, **({"reason": reason} if reason else {})}


def comment(tracker: Tracker, provider: Provider | None, esc_id: str, text: str, *,
            local: bool = False) -> ActionResult:
    """Record a comment from us, then post it on the case. Recorded first: a sync running meanwhile then
    matches the desk's copy to this event instead of recording it a second time."""
    if not text.strip():
        raise ProviderError("an empty comment", where=esc_id)
    text = gate.text(text)  # recorded as sent: the tracker and the desk hold the same, redacted, text
    esc = tracker.get(esc_id)
    reason = _why_not(provider, esc, Feature.COMMENT, local=local)
    tracker.add_event(esc.id, "comment", text.strip(), {"author": "us", "from_provider": False,
                                                        **_desk_data(esc, reason)})  # fmt: skip
    if reason is None:
        _call_desk(tracker, provider, esc, Feature.COMMENT, lambda case: provider.comment(case, text))
    return ActionResult(tracker.get(esc.id), reason is None, reason)


def attach(tracker: Tracker, provider: Provider, esc_id: str, files: list[Path], note: str) -> ActionResult:
    """Upload files to the case with a note; an "attach" event lists each file's name, size and sha256."""
    files, note = [Path(f) for f in files], gate.text(note)
    missing = [str(f) for f in files if not f.is_file()]
    if not files or missing:
        raise ProviderError("no file to attach" if not files else "not a file", where=", ".join(missing) or esc_id)
    esc = tracker.get(esc_id)
    reason = _why_not(provider, esc, Feature.ATTACH)
    if reason is not None:  # before any upload: attaching only in the tracker would mean nothing
        raise UnsupportedError(f"cannot attach: {reason}", where=esc.id)
    with gate.files(files) as sent:  # what the desk gets, and so what the event lists: redacted copies
        refs = [attachment_ref(f) for f in sent]
        _call_desk(tracker, provider, esc, Feature.ATTACH, lambda case: provider.attach(case, sent, note))
    detail = f"{len(files)} file(s) attached" + (f": {note}" if note else "")
    tracker.add_event(esc.id, "attach", detail, {"files": refs, "note": note, **_desk_data(esc, None)})
    return ActionResult(tracker.get(esc.id), True, None)


def resolve(tracker: Tracker, provider: Provider | None, esc_id: str, note: str | None = None, *,
            local: bool = False) -> ActionResult:
    """Tell the desk the case is resolved, then record it (nothing is sent for one resolved already)."""
    esc, note = tracker.get(esc_id), gate.text(note) if note else note
    if not esc.state.is_open:
        return ActionResult(esc, False, f"{esc.id} is {esc.state} already")
    reason = _why_not(provider, esc, Feature.RESOLVE, local=local)
    if reason is None:
        _call_desk(tracker, provider, esc, Feature.RESOLVE, lambda case: provider.resolve_case(case, note))
    tracker.add_event(esc.id, "resolve", note or "resolved", _desk_data(esc, reason))
    return ActionResult(tracker.resolve(esc.id, note), reason is None, reason)


def reopen(tracker: Tracker, provider: Provider | None, esc_id: str, note: str, *,
           local: bool = False) -> ActionResult:
    """Reopen a resolved or closed case at the desk; it then waits on the provider again."""
    esc, note = tracker.get(esc_id), gate.text(note) if note else note
    if esc.state.is_open:
        raise TrackerError(f"{esc.id} is open ({esc.state}): nothing to reopen", where=esc.id)
    reason = _why_not(provider, esc, Feature.REOPEN, local=local)
    if reason is None:
        _call_desk(tracker, provider, esc, Feature.REOPEN, lambda case: provider.reopen_case(case, note))
    tracker.add_event(esc.id, "reopen", note or "reopened", _desk_data(esc, reason))
    state = EscalationState.WAITING_PROVIDER if esc.provider_case_id else EscalationState.DRAFT
    return ActionResult(tracker.set_state(esc.id, state, note or "reopened"), reason is None, reason)


# -- sync ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncResult:
    """One escalation's sync. outcome: "updated", "unchanged", "skipped" (the provider cannot be read back;
    reason says why) or "error" (reason: the one-line error; the other escalations were still synced)."""

    escalation_id: str
    provider: str
    case_id: str | None
    outcome: str
    state_from: str | None = None
    state_to: str | None = None
    raw_status: str | None = None
    new_comments: int = 0
    last_reply_at: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _sync_one(tracker: Tracker, provider: Provider, esc: Escalation) -> SyncResult:
    base = dict(escalation_id=esc.id, provider=esc.provider, case_id=esc.provider_case_id)
    if not provider.supports(Feature.SYNC):
        return SyncResult(**base, outcome="skipped", reason=f"{provider.name}: {provider.unsupported[Feature.SYNC]}")
    status = provider.case_status(esc.provider_case_id or "")
    change = tracker.record_sync(esc.id, raw_status=status.raw_status, state=status.state, comments=status.comments)
    return SyncResult(**base, outcome="updated" if change.changed else "unchanged",
                      state_from=change.state_from.value, state_to=change.state_to.value,
                      raw_status=change.raw_status, new_comments=change.new_comments,
                      last_reply_at=change.last_reply_at)  # fmt: skip


def sync(tracker: Tracker, get_provider: Callable[[str], Provider], *, provider: str | None = None,
         escalations: Iterable[str] | None = None) -> list[SyncResult]:
    """Read back every open escalation that has a case at a desk (or just `escalations`): state, raw status,
    new comments, the provider's last reply. One escalation's error is kept in its result, never raised."""
    wanted = None if escalations is None else {tracker.get(e).id for e in escalations}
    providers: dict[str, Provider | FabricaseError] = {}
    results = []
    for esc in tracker.list(provider=provider, state="open"):
        if esc.provider_case_id is None or (wanted is not None and esc.id not in wanted):
            continue
        try:
            if esc.provider not in providers:
                try:
                    providers[esc.provider] = get_provider(esc.provider)
                except FabricaseError as exc:
                    providers[esc.provider] = exc
            loaded = providers[esc.provider]
            if isinstance(loaded, FabricaseError):
                raise loaded
            results.append(_sync_one(tracker, loaded, esc))
        except Exception as exc:  # noqa: BLE001 (kept per escalation: one bad case never stops the others)
            why = str(exc) if isinstance(exc, FabricaseError) else f"{type(exc).__name__}: {exc}"
            results.append(SyncResult(esc.id, esc.provider, esc.provider_case_id, "error", reason=why))
    return results
