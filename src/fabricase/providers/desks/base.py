"""What every desk of the static provider offers, and the helpers they share.

A desk takes the cases of a provider that has no support API of its own (on-premises, GPU clouds that run a
Jira Service Management or Zendesk desk, or take mail). It is configured under `[providers.static.<desk>]`;
credentials come from environment variables only, never from the configuration file.
"""

from __future__ import annotations

import abc
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricase.config import Paths
from fabricase.errors import BundleError, ConfigError, ProviderError
from fabricase.models import TicketDraft
from fabricase.providers.base import (
    CaseStatus,
    CheckResult,
    Feature,
    FilingResult,
    PlannedRequest,
    attachment_ref,
    case_marker,
)
from fabricase.redact.gate import gated_methods

if TYPE_CHECKING:
    from fabricase.bundler.limits import DeskLimits
    from fabricase.templates.severity import Scale

__all__ = ["Desk", "DeskContext", "subject_for"]

SUBJECT_MAX = 255  # Jira's summary and Zendesk's subject; also a sane mail subject
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def subject_for(escalation_id: str, title: str, limit: int = SUBJECT_MAX) -> str:
    """The case's subject: case_marker first (so a search finds it), then the ticket title, cut to `limit`."""
    marker = case_marker(escalation_id)
    subject = title if marker in title else f"{marker} {title}"
    return subject if len(subject) <= limit else subject[: limit - 3] + "..."


class DeskContext:
    """What a desk is built with: the data directories, the provider profile (`[providers.static]`, for the
    severity mapping), the desk's own settings (`[providers.static.<desk>]`), the environment (credentials),
    and the clock and sleep (injectable for tests)."""

    def __init__(self, paths: Paths, profile: Mapping[str, Any], settings: Mapping[str, Any], *,
                 env: Mapping[str, str] | None = None, now: Callable[[], datetime] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.paths = paths
        self.profile = profile
        self.settings = settings
        self.env = os.environ if env is None else env
        self.now = now or (lambda: datetime.now(UTC))
        self.sleep = sleep


class Desk(abc.ABC):
    """A desk: file, resolve and check are required; the rest are declared in `unsupported` when missing.

    A desk is one file: it declares, as a provider does (providers.base.Provider), its `limits`, its severity
    `scale` (None: fabricase's own), the `sdk_modules` it imports, the `extra` that installs them and its
    ticket `template` (None: `ticket_<name>.md.j2` when there is one, else the generic ticket).
    """

    name: ClassVar[str] = ""
    unsupported: ClassVar[dict[Feature, str]] = {}
    credentials_env: ClassVar[tuple[str, ...]] = ()  # environment variables holding the credentials
    limits: ClassVar[DeskLimits | None] = None
    scale: ClassVar[Scale | None] = None
    sdk_modules: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str | None] = None
    template: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        gated_methods(cls)  # every text and file a desk sends passes the redaction gate (redact/gate.py)

    def __init__(self, ctx: DeskContext) -> None:
        self.ctx = ctx

    @property
    def where(self) -> str:
        return f"static/{self.name}"

    # --- configuration ------------------------------------------------------------------------------------

    def setting(self, key: str, default: Any = None, *, required: bool = False, kind: type | tuple = str) -> Any:
        """A value of `[providers.static.<desk>]`, checked for type; a missing required one is a one-line
        ConfigError naming the key."""
        value = self.ctx.settings.get(key, default)
        if value is None:
            if required:
                raise ConfigError(f"[providers.static.{self.name}] {key} is required for the {self.name} desk")
            return None
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            raise ConfigError(f"[providers.static.{self.name}] {key} has the wrong type ({type(value).__name__})")
        return value

    def credentials(self) -> tuple[str, ...]:
        """The values of `credentials_env`, or a one-line ProviderError naming the variables to set."""
        values = tuple(self.ctx.env.get(name, "").strip() for name in self.credentials_env)
        if not all(values):
            missing = [n for n, v in zip(self.credentials_env, values, strict=True) if not v]
            raise ProviderError(f"missing credentials: set {' and '.join(missing)} in the environment",
                                where=self.where)
        return values

    def desk_code(self, draft: TicketDraft) -> str:
        """The draft's severity in the desk's own scale (`[providers.static] severity` and `max_level`)."""
        from fabricase.templates.severity import desk_severity

        overrides = self.ctx.profile.get("severity")
        if overrides is not None and not isinstance(overrides, Mapping):
            raise ConfigError('[providers.static] severity must be a table like {major = "Highest"}')
        return desk_severity(self.name, draft.severity, max_level=self.ctx.profile.get("max_level"),
                             overrides=overrides).code

    def fitted_body(self, draft: TicketDraft) -> str:
        """The body cut to this desk's length limit (bundler.limits), most important sections first."""
        from fabricase.bundler.body import fit_ticket

        return fit_ticket(draft, self.name).body

    def case_folder(self, escalation_id: str) -> Path:
        """DATA/outbox/<escalation id>: where a desk keeps its local record of a case."""
        if not _SAFE_NAME.fullmatch(escalation_id):
            raise ProviderError(f"not a usable escalation id for an outbox folder: {escalation_id!r}",
                                where=self.where)
        return self.ctx.paths.outbox / escalation_id

    # --- attachments -------------------------------------------------------------------------------------

    @contextmanager
    def deliverable(self, files: list[Path], limit: int | None) -> Iterator[list[Path]]:
        """The files as the desk can take them: each one larger than `limit` bytes split into parts
        (bundler.parts.split_bundle, each part verifiable on its own), never dropped. Parts live in a temporary
        folder for the duration of the `with`."""
        from fabricase.bundler.parts import split_bundle

        for f in files:
            if not Path(f).is_file():
                raise ProviderError("attachment not found", where=str(f))
        with tempfile.TemporaryDirectory(prefix="fabricase-parts-") as tmp:
            out: list[Path] = []
            for f in map(Path, files):
                if limit is None or f.stat().st_size <= limit:
                    out.append(f)
                    continue
                try:
                    out.extend(split_bundle(f, limit, out_dir=Path(tmp)))
                except BundleError as exc:
                    raise ProviderError(f"{f.name} is {f.stat().st_size} bytes, over the desk's {limit}-byte "
                                        f"limit, and cannot be split: {exc.message}", where=self.where) from exc
            yield out

    # --- the desk's operations -----------------------------------------------------------------------------

    @abc.abstractmethod
    def file(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Open the case, or find the one this escalation already opened and complete it."""

    @abc.abstractmethod
    def resolve(self, case_id: str, note: str | None) -> None: ...

    @abc.abstractmethod
    def check(self) -> list[CheckResult]: ...

    def plan(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        return [PlannedRequest(self.name, "file", {
            "subject": subject_for(escalation_id, draft.title), "body_chars": len(draft.body),
            "attachments": [attachment_ref(Path(bundle_path))] if bundle_path is not None else [],
        })]

    def find(self, escalation_id: str) -> FilingResult | None:
        raise NotImplementedError

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        raise NotImplementedError

    def comment(self, case_id: str, text: str) -> None:
        raise NotImplementedError

    def status(self, case_id: str) -> CaseStatus:
        raise NotImplementedError

    def reopen(self, case_id: str, note: str) -> None:
        raise NotImplementedError


gated_methods(Desk)
