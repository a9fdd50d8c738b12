"""The desks the static provider files its cases with: an explicit registry, chosen by configuration.

    [providers.static]
    desk = "jira"            # "outbox" (default), "jira", "zendesk" or "email"
    [providers.static.jira]  # the desk's own settings; credentials come from the environment only
    ...

Each desk module is imported when chosen. docs/providers/static.md lists every key. A desk is one file: its
class declares its limits, severity scale, SDK modules, extra and ticket template (desks.base.Desk), and a
package installed beside fabricase registers its own through the `fabricase.desks` entry-point group
(`servicenow = "acme_desk:ServiceNowDesk"`; providers/__init__.py reads the group, the built-ins below win).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from fabricase.config import Paths
from fabricase.errors import ConfigError
from fabricase.providers.desks.base import Desk, DeskContext

__all__ = ["DEFAULT_DESK", "DESKS", "Desk", "DeskContext", "desk_class", "desk_names", "make_desk"]

DESKS: dict[str, str] = {
    "outbox": "fabricase.providers.desks.outbox:OutboxDesk",
    "jira": "fabricase.providers.desks.jira:JiraDesk",
    "zendesk": "fabricase.providers.desks.zendesk:ZendeskDesk",
    "email": "fabricase.providers.desks.smtp:EmailDesk",
}
DEFAULT_DESK = "outbox"


def desk_names() -> list[str]:
    """The desks' names: the built-ins, then those installed packages register (`fabricase.desks`)."""
    from fabricase.providers import registrations

    return list(registrations("desk"))


def desk_class(name: str) -> type[Desk]:
    """The desk registered as `name`; an unknown one is a ConfigError listing the valid ones."""
    from fabricase.providers import load_class, registrations

    found = registrations("desk")
    if not isinstance(name, str) or name.strip().lower() not in found:
        raise ConfigError(f"[providers.static] desk {name!r} is not a desk; valid: {', '.join(found)}")
    return load_class(found[name.strip().lower()], Desk)


def make_desk(paths: Paths, profile: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
              now: Callable[[], datetime] | None = None, sleep: Callable[[float], None] = time.sleep) -> Desk:
    """The desk `[providers.static] desk` names (the outbox when none), with its `[providers.static.<desk>]`
    settings."""
    cls = desk_class(profile.get("desk", DEFAULT_DESK))
    settings = profile.get(cls.name, {})
    if not isinstance(settings, Mapping):
        raise ConfigError(f"[providers.static.{cls.name}] must be a table")
    return cls(DeskContext(paths, profile, settings, env=env, now=now, sleep=sleep))
