"""Error-translating, memoized text access to one host's captured items, shared by every analysis domain."""

from __future__ import annotations

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
        self._by_key: dict[tuple[str, int], CaptureItem] = {}
        for it in hc.items:
            if it.kind != "stderr":
                self._by_key.setdefault((it.source, it.snapshot), it)
        hc.cache["host_items"] = self
        return self

    def sources(self, prefix: str) -> list[str]:
        """Sources under a path prefix, in any snapshot, sorted."""
        return sorted({source for source, _ in self._by_key if source.startswith(prefix)})

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
        try:
            return self.hc.read(it).decode("utf-8", errors="replace")
        except (OSError, ValueError) as exc:
            raise CaptureError(f"cannot read captured item {source}: {exc}", where=f"{self.hc.host}:{it.path}") from exc
