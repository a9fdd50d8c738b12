"""A read-only view of what every registered desk declares (its limits, its severity scale), for the pure
packages (bundler/, templates/): read from the provider registry at each look-up, so that a desk added by a
plug-in or a test is seen, and importing only the module of the desk asked for (no SDK comes with the view)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["DeclaredTable"]

T = TypeVar("T")


class DeclaredTable(Mapping[str, T], Generic[T]):
    """desk key -> the value its class declares as `attribute` (an instance of `kind`), plus `generic` under its
    own `.desk` key. A key whose class declares nothing of that kind (the static provider has no limits of its own;
    a desk whose SDK is missing here) is not in the table."""

    def __init__(self, attribute: str, kind: type[T], generic: T) -> None:
        self.attribute, self.kind, self.generic = attribute, kind, generic
        self.generic_key: str = generic.desk  # type: ignore[attr-defined]

    def __getitem__(self, desk: Any) -> T:
        if desk == self.generic_key:
            return self.generic
        from fabricase.providers import declared

        value = declared(desk, self.attribute) if isinstance(desk, str) else None
        if not isinstance(value, self.kind):
            raise KeyError(desk)
        return value

    def __iter__(self) -> Iterator[str]:
        from fabricase.providers import desk_keys

        return iter([*(k for k in desk_keys() if k in self), self.generic_key])

    def __len__(self) -> int:
        return sum(1 for _ in self)
