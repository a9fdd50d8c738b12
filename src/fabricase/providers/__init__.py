"""Providers: where hosts sit in a cloud's topology, and the desk that takes the support case.

The registry is explicit and lazy: a provider's module (and its cloud SDK) is imported only when asked for.
`PROVIDERS` names the built-in classes; a package installed beside fabricase adds its own through the
`fabricase.providers` entry-point group (and desks through `fabricase.desks`, providers/desks). The built-ins
stay in the dict rather than in pyproject's entry points: a source checkout finds them without installed
metadata, and a plug-in cannot replace one (a plug-in whose name is taken is ignored).

Everything else about a provider or desk is declared on its class (`limits`, `scale`, `sdk_modules`, `extra`,
`template`, see Provider); the tables that repeat it are read from here: bundler.limits.DESK_LIMITS,
templates.severity.SCALES, the CLI's `--provider` choices, `providers list` and the install hints. A registry
value is an entry point's: `module:Class`, with `[extra]` naming the extra that brings what the module imports
at its top, for the hint when it cannot be imported (then its class cannot be read).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from fabricase.config import Paths
from fabricase.errors import ProviderError
from fabricase.providers.base import Feature, FilingResult, Provider

if TYPE_CHECKING:
    from fabricase.providers.desks.base import Desk

__all__ = [
    "ENTRY_POINT_GROUPS",
    "PROVIDERS",
    "Feature",
    "FilingResult",
    "Provider",
    "Registration",
    "declared",
    "declaring_class",
    "desk_keys",
    "get_provider",
    "install_hint",
    "load_class",
    "missing_sdk",
    "provider_class",
    "provider_names",
    "refresh_plugins",
    "registration",
    "registrations",
    "sdk_hint",
    "ticket_template_name",
]  # fmt: skip

Kind = Literal["provider", "desk"]

PROVIDERS: dict[str, str] = {
    "static": "fabricase.providers.static:StaticProvider",
    "aws": "fabricase.providers.aws:AwsProvider [aws]",
    "gcp": "fabricase.providers.gcp:GcpProvider [gcp]",
    "azure": "fabricase.providers.azure:AzureProvider [azure]",
}

ENTRY_POINT_GROUPS: dict[Kind, str] = {"provider": "fabricase.providers", "desk": "fabricase.desks"}
DISTRIBUTION = "fabricase"


def install_hint(extra: str | None, distribution: str = DISTRIBUTION) -> str:
    """The command that installs what a provider or desk needs, exactly as the user types it."""
    return f"pip install '{distribution}[{extra}]'" if extra else f"pip install '{distribution}'"


@dataclass(frozen=True)
class Registration:
    """One registered provider or desk: where its class is, and who brings what its module needs (the
    distribution that registered it and the extra named in the entry), for the hint when it cannot be imported."""

    name: str
    kind: Kind
    target: str  # "module:Class"
    extra: str | None = None
    distribution: str = DISTRIBUTION

    @property
    def install_hint(self) -> str:
        return install_hint(self.extra, self.distribution)


def _parse(name: str, kind: Kind, value: str, distribution: str = DISTRIBUTION) -> Registration:
    """A registry value, `module:Class` or `module:Class [extra]` (entry-point syntax), as a Registration."""
    target, _, rest = value.partition("[")
    extras = [e.strip() for e in rest.rstrip().removesuffix("]").split(",") if e.strip()]
    return Registration(name, kind, target.strip(), extras[0] if extras else None, distribution)


def _builtins(kind: Kind) -> Mapping[str, str]:
    if kind == "provider":
        return PROVIDERS
    from fabricase.providers.desks import DESKS

    return DESKS


@functools.lru_cache(maxsize=1)
def _all_plugins() -> dict[Kind, tuple[Registration, ...]]:
    """Both groups' entry points, from one scan of the installed distributions (tens of milliseconds), made
    once per process and only when a look-up needs it (refresh_plugins scans again)."""
    every = importlib.metadata.entry_points()
    found: dict[Kind, tuple[Registration, ...]] = {}
    for kind, group in ENTRY_POINT_GROUPS.items():
        found[kind] = tuple(
            _parse(ep.name.strip().lower(), kind, ep.value, ep.dist.name if ep.dist is not None else DISTRIBUTION)
            for ep in every.select(group=group)
        )
    return found


def _plugins(kind: Kind) -> tuple[Registration, ...]:
    return _all_plugins()[kind]


def refresh_plugins() -> None:
    """Read the entry-point groups again (after a package was installed, or in a test)."""
    _all_plugins.cache_clear()


def registrations(kind: Kind) -> dict[str, Registration]:
    """Every registered provider (or desk): the built-ins, then the plug-ins whose name no built-in provider
    or desk takes (both kinds share the names a ticket is fitted to, so a plug-in desk cannot be called "aws")."""
    found = {name: _parse(name, kind, value) for name, value in _builtins(kind).items()}
    taken = set(found) | set(_builtins("desk" if kind == "provider" else "provider"))
    for reg in _plugins(kind):
        if reg.name not in taken:
            found[reg.name] = reg
            taken.add(reg.name)
    return found


def registration(name: str, kind: Kind = "provider") -> Registration:
    """The registration of `name`; an unknown one is a ProviderError listing the valid ones."""
    key = name.strip().lower() if isinstance(name, str) else ""
    found = registrations(kind)
    if key not in found:
        raise ProviderError(f"unknown {kind} {name!r} (valid: {', '.join(sorted(found))})", where=str(name))
    return found[key]


def provider_names() -> list[str]:
    """The providers' names, built-ins first (the CLI's --provider choices)."""
    return list(registrations("provider"))


def load_class(reg: Registration, base: type) -> type:
    """The class `reg` names, imported now. A module that is not there at all is a name reserved for a later
    version; one whose import fails for a missing module is a ProviderError with the install hint."""
    module_name, _, class_name = reg.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name == module_name or (exc.name and module_name.startswith(exc.name + ".")):
            raise ProviderError(f"{reg.kind} '{reg.name}' is not available yet in this version",
                                where=reg.name) from exc
        missing = exc.name or "a module it needs"
        raise ProviderError(f"{reg.kind} '{reg.name}' needs {missing}: {reg.install_hint}", where=reg.name) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ProviderError(f"registry entry {reg.target} is not a {base.__name__} class", where=reg.name)
    limits = getattr(cls, "limits", None)
    if limits is not None and getattr(limits, "desk", reg.name) != reg.name:
        raise ProviderError(f"{reg.target} declares the limits of {limits.desk!r}, not {reg.name!r}", where=reg.name)
    return cls


def _require_sdk(module: str, extra: str) -> ModuleType:
    """Import a cloud SDK module, or raise ProviderError with the install hint for its extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProviderError(f"{module} is not installed: {install_hint(extra)}", where=extra) from exc


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken one
        return False


def missing_sdk(cls: type) -> list[str]:
    """The SDK modules `cls` declares (`sdk_modules`) that cannot be found here, without importing them."""
    return [m for m in getattr(cls, "sdk_modules", ()) if not _installed(m)]


def sdk_hint(cls: type, reg: Registration) -> str:
    """`pip install '<distribution>[<extra>]'` for a class: its declared extra, else its registration's."""
    return install_hint(getattr(cls, "extra", None) or reg.extra, reg.distribution)


def provider_class(name: str) -> type[Provider]:
    """The class registered as `name`, imported now."""
    return load_class(registration(name, "provider"), Provider)


def get_provider(name: str, paths: Paths) -> Provider:
    """The provider registered as `name` ("static", "aws", "gcp", "azure"), ready to use. One whose declared
    SDK modules are missing is refused here, with the install hint, before any work starts."""
    reg = registration(name, "provider")
    cls = load_class(reg, Provider)
    missing = missing_sdk(cls)
    if missing:
        raise ProviderError(f"provider '{reg.name}' needs {', '.join(missing)}: {sdk_hint(cls, reg)}", where=reg.name)
    return cls(paths)


# --- what the classes declare, by the name a ticket is fitted to -------------------------------------------


def desk_keys() -> list[str]:
    """Every name a ticket can be fitted and rendered for: the providers (a cloud is its own desk), then the
    static provider's desks. Nothing is imported."""
    return [*registrations("provider"), *registrations("desk")]


def declaring_class(key: str) -> type[Provider] | type[Desk] | None:
    """The class whose declarations the desk key `key` reads: the desk of that name, else the provider; None
    when neither is registered, or its module cannot be imported here (its SDK is missing: the generic limits,
    scale and ticket stand in, which fit every desk)."""
    from fabricase.providers.desks.base import Desk

    for kind, base in (("desk", Desk), ("provider", Provider)):
        reg = registrations(kind).get(key)  # type: ignore[arg-type]
        if reg is not None:
            try:
                return load_class(reg, base)
            except ProviderError as exc:
                if isinstance(exc.__cause__, ImportError):
                    return None
                raise
    return None


def declared(key: str, attribute: str) -> Any:
    """What the class of desk key `key` declares as `attribute` (None when it declares nothing, or has no class
    here)."""
    cls = declaring_class(key)
    return getattr(cls, attribute, None) if cls is not None else None


def ticket_template_name(key: str) -> str:
    """The ticket template a desk key renders: the one its class declares, else `ticket_<key>.md.j2` (a shipped
    one, or the user's override); templates.ticket_template falls back to the generic ticket when neither exists."""
    return declared(key, "template") or f"ticket_{key}.md.j2"
