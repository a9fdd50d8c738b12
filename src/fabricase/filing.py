"""Filing and following a case: pure orchestration over a Tracker and a Provider.

Filing is idempotent. The intent (a "filing" event holding `case_marker(esc_id)`) is recorded BEFORE the
desk is called, and the case id after it answers. A filing interrupted in between (a crash, a timeout) left
the intent without a "filed" event: the next attempt first searches the desk's recent cases for the marker
(provider.find_case) and records the case it finds instead of filing it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricase.errors import FabricaseError, ProviderError, TrackerError, UnsupportedError
from fabricase.models import Escalation, EscalationState, TicketDraft
from fabricase.providers.base import Feature, FilingResult, Provider, attachment_ref, case_marker
from fabricase.redact import gate
from fabricase.tracker import Tracker

__all__ = [
    "ActionResult", "SyncResult", "attach", "comment", "explain_duplicates", "file_escalation", "find_duplicates",
    "reopen", "resolve", "sync",
]  # fmt: skip


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


def _reconcile(provider: Provider, esc_id: str) -> tuple[FilingResult | None, dict[str, Any]]:
    """The case an interrupted filing already opened, searched by its marker; (None, why) if none was found
    or the desk cannot be searched (its file_case then finds the case again itself, as the interface asks)."""
    try:
        found = provider.find_case(esc_id)
    except (UnsupportedError, NotImplementedError) as exc:
        return None, {"searched": False, "reason": str(exc) or f"{provider.name} cannot search its cases"}
    return found, {"searched": True, "found": found.case_id if found else None}


def file_escalation(
    tracker: Tracker, provider: Provider, esc_id: str, draft: TicketDraft, bundle_path: Path | None
) -> Escalation:
    """File the escalation's case once, whatever happened to earlier attempts; the escalation as recorded.

    Already filed: nothing is sent. Intent recorded but no case recorded (an interrupted attempt): the desk is
    searched for the marker first. A failure of the desk is recorded as a "filing-failed" event and raised.
    """
    esc = tracker.get(esc_id)
    if esc.provider_case_id is not None:
        return esc
    marker = case_marker(esc.id)
    attempts = sum(1 for e in esc.events if e.kind == "filing")
    result = None
    if attempts:
        result, data = _reconcile(provider, esc.id)
        detail = f"found {result.case_id} at the desk" if result else "no case at the desk: filing again"
        tracker.add_event(esc.id, "reconcile", detail, {"marker": marker, **data})
    if result is None:
        tracker.add_event(esc.id, "filing", f"filing with {provider.name} (attempt {attempts + 1})",
                          {"marker": marker, "provider": provider.name, "attempt": attempts + 1})
        try:
            result = provider.file_case(escalation_id=esc.id, draft=draft, bundle_path=bundle_path)
        except Exception as exc:
            why = str(exc) if isinstance(exc, FabricaseError) else f"{type(exc).__name__}: {exc}"
            tracker.add_event(esc.id, "filing-failed", why, {"marker": marker, "provider": provider.name})
            raise
    return tracker.mark_filed(
        esc.id, provider_case_id=result.case_id, raw_status=result.raw_status, state=result.state,
        ticket_path=_ticket_path(result.location), bundle_id=draft.bundle_id,
        bundle_path=bundle_path if bundle_path is not None else esc.bundle_path,
    )  # fmt: skip


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
        return f"{esc.id} was never filed with {esc.provider}"
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
