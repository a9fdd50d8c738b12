"""Providers: where hosts sit in a cloud's topology, and the desk that takes the support case.

The registry is explicit and lazy: a provider's module (and its cloud SDK) is imported only when asked for.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fabricase.config import Paths
from fabricase.errors import ProviderError
from fabricase.providers.base import Feature, FilingResult, Provider

__all__ = ["PROVIDERS", "Feature", "FilingResult", "Provider", "get_provider", "provider_class"]

PROVIDERS: dict[str, str] = {
    "static": "fabricase.providers.static:StaticProvider",
    "aws": "fabricase.providers.aws:AwsProvider",
    "gcp": "fabricase.providers.gcp:GcpProvider",
    "azure": "fabricase.providers.azure:AzureProvider",
}

# The pyproject extra that brings each provider's SDK.
_EXTRAS = {"aws": "aws", "gcp": "gcp", "azure": "azure"}


def _install_hint(extra: str) -> str:
    return f"pip install 'fabricase[{extra}]'"


def _require_sdk(module: str, extra: str) -> ModuleType:
    """Import a cloud SDK module, or raise ProviderError with the install hint for its extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProviderError(f"{module} is not installed: {_install_hint(extra)}", where=extra) from exc


def provider_class(name: str) -> type[Provider]:
    """The class registered as `name`, imported now."""
    key = name.strip().lower()
    if key not in PROVIDERS:
        valid = ", ".join(sorted(PROVIDERS))
        raise ProviderError(f"unknown provider {name!r} (valid: {valid})", where=name)
    module_name, _, class_name = PROVIDERS[key].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name == module_name or (exc.name and module_name.startswith(exc.name + ".")):
            # Registered ahead of its module: the name is reserved, the code ships in a later version.
            raise ProviderError(f"provider '{key}' is not available yet in this version", where=key) from exc
        missing = exc.name or "a module it needs"
        hint = f": {_install_hint(_EXTRAS[key])}" if key in _EXTRAS else ""
        raise ProviderError(f"provider '{key}' needs {missing}{hint}", where=key) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise ProviderError(f"registry entry {PROVIDERS[key]} is not a Provider class", where=key)
    return cls


def get_provider(name: str, paths: Paths) -> Provider:
    """The provider registered as `name` ("static", "aws", "gcp", "azure"), ready to use."""
    return provider_class(name)(paths)
