"""Error-translating, memoized text access to one host's captured items, shared by every analysis domain."""

from __future__ import annotations

import bisect
import itertools
import operator
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

from fabricase.errors import CaptureError
from fabricase.models import CaptureItem, HostCapture


class HostItems:
    """The items of one host by (source, snapshot), read as text the way HostCapture.text does."""

    def __new__(cls, hc: HostCapture) -> HostItems:
        # One index per host while it is analyzed: every domain asks for one (HostCapture.release drops it).
        cached = hc.cache.get("host_items")
        if isinstance(cached, cls) and cached._count == len(hc.items):
            return cached
        self = super().__new__(cls)
        self.hc = hc
        self._count = len(hc.items)
        self._texts: dict[tuple[str, int], str | None] = {}
        # Reversed, so that the first item of each (source, snapshot) is the one kept; one comprehension, not a
        # method call per item (a GPU host has thousands).
        self._by_key: dict[tuple[str, int], CaptureItem] = {
            (it.source, it.snapshot): it for it in reversed(hc.items) if it.kind != "stderr"
        }
        self._sorted: list[str] | None = None
        self._memo: dict[str, Any] = {}
        hc.cache["host_items"] = self
        return self

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()` once per host for `key`: a parse of the host's items that several domains read. The result is
        shared: callers must not change it."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def sources(self, prefix: str) -> list[str]:
        """Sources under a path prefix, in any snapshot, sorted."""
        if self._sorted is None:  # sorted once; each call is then a binary search, not a scan of every item
            self._sorted = sorted({source for source, _ in self._by_key})
        start = bisect.bisect_left(self._sorted, prefix)
        if prefix and prefix[-1] < _LAST_CHAR:  # the sources below the prefix's successor are those it starts
            return self._sorted[start:bisect.bisect_left(self._sorted, _successor(prefix), start)]
        end = start
        while end < len(self._sorted) and self._sorted[end].startswith(prefix):
            end += 1
        return self._sorted[start:end]

    def text(self, source: str, snapshot: int = 0) -> str | None:
        """The item's text, or None when it was not captured (or a command failed with no output)."""
        key = (source, snapshot)
        if key not in self._texts:
            self._texts[key] = self._read_text(source, snapshot)
        return self._texts[key]

    def _read_text(self, source: str, snapshot: int) -> str | None:
        it = self._by_key.get((source, snapshot))
        if it is None or (it.kind == "command" and it.rc not in (0, None) and it.bytes == 0):
            return None
        # Named in the host's failure reason if what follows raises (analysis._failure): the item read last.
        self.hc.cache["last_item"] = it
        try:
            return self.hc.read(it).decode("utf-8", errors="replace")
        except (OSError, ValueError) as exc:
            raise CaptureError(f"cannot read captured item {source}: {exc}", where=f"{self.hc.host}:{it.path}") from exc


_LAST_CHAR = chr(0x10FFFF)


def _successor(prefix: str) -> str:
    """The least string above every string that starts with prefix (its last character, not the largest, + 1)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


T = TypeVar("T")


def per_samples(hc: HostCapture, key: str, samples: list[Any], build: Callable[[], T]) -> T:
    """`build()` memoized on the host for this very samples list: the rules of a domain all group the same
    samples the same way (by port, by GPU), and a fleet has thousands of hosts. The result is shared: callers
    must not change it."""
    cached = hc.cache.get(key)
    if cached is not None and cached[0] is samples:
        return cached[1]
    value = build()
    hc.cache[key] = (samples, value)
    return value


def by_family(hc: HostCapture, samples: list[Any]) -> dict[str, list[Any]]:
    """The samples by their component's family with its colon ("netdev:", "rdma:"; a component without a colon is
    its own key), each list in the samples' order; built once per host for this samples list. Every domain's rules
    group the samples of its family, and a host has hundreds of samples: one pass here, not one per domain. The
    result is shared: callers must not change it."""
    return per_samples(hc, "sample_families", samples, lambda: _families(samples))


def _families(samples: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = defaultdict(list)
    # A domain's samples come component by component: one step per run of a component, not per sample.
    for component, run in itertools.groupby(samples, key=_COMPONENT):
        head, colon, _ = component.partition(":")
        out[head + colon].extend(run)
    return dict(out)


_COMPONENT = operator.attrgetter("component")
