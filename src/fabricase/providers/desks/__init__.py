"""The desks the static provider files its cases with: an explicit registry, chosen by configuration.

    [providers.static]
    desk = "jira"            # "outbox" (default), "jira", "zendesk" or "email"
    [providers.static.jira]  # the desk's own settings; credentials come from the environment only
    ...

Each desk module is imported when chosen. docs/providers/static.md lists every key.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from fabricase.config import Paths
from fabricase.errors import ConfigError
from fabricase.providers.desks.base import Desk, DeskContext

__all__ = ["DEFAULT_DESK", "DESKS", "Desk", "DeskContext", "desk_class", "make_desk"]

DESKS: dict[str, str] = {
    "outbox": "fabricase.providers.desks.outbox:OutboxDesk",
    "jira": "fabricase.providers.desks.jira:JiraDesk",
    "zendesk": "fabricase.providers.desks.zendesk:ZendeskDesk",
    "email": "fabricase.providers.desks.smtp:EmailDesk",
}
DEFAULT_DESK = "outbox"


def desk_class(name: str) -> type[Desk]:
    """The desk registered as `name`; an unknown one is a ConfigError listing the valid ones."""
    if not isinstance(name, str) or name.strip().lower() not in DESKS:
        raise ConfigError(f"[providers.static] desk {name!r} is not a desk; valid: {', '.join(DESKS)}")
    module_name, _, class_name = DESKS[name.strip().lower()].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_desk(paths: Paths, profile: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
              now: Callable[[], datetime] | None = None, sleep: Callable[[float], None] = time.sleep) -> Desk:
    """The desk `[providers.static] desk` names (the outbox when none), with its `[providers.static.<desk>]`
    settings."""
    cls = desk_class(profile.get("desk", DEFAULT_DESK))
    settings = profile.get(cls.name, {})
    if not isinstance(settings, Mapping):
        raise ConfigError(f"[providers.static.{cls.name}] must be a table")
    return cls(DeskContext(paths, profile, settings, env=env, now=now, sleep=sleep))
