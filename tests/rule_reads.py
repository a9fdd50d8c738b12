"""Holding a rule set to the metrics it declares: the ethernet and netdev rules group only the samples named in
their module's _RULE_READS, so a rule that reads a metric left out of it would silently see nothing.
`recorded_reads` runs the rules over per-port dicts that note every metric looked up (and any walk over all of
them), and over an unfiltered grouping, so a test can hold the reads to the set and the findings to the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

__all__ = ["EVERY_METRIC", "WALKED", "Recording", "recorded_reads"]

WALKED = "<every metric walked>"  # what a walk over a whole per-port dict records: it sees only the filtered ones


class Recording(dict):
    """A per-port {metric: sample} that notes each key looked up in `seen`."""

    def __init__(self, metrics: dict, seen: set[str]) -> None:
        super().__init__(metrics)
        self.seen = seen

    def get(self, key: Any, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self.seen.add(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator:
        self.seen.add(WALKED)
        return super().__iter__()

    def keys(self):  # noqa: ANN201 - dict's own
        self.seen.add(WALKED)
        return super().keys()

    def values(self):  # noqa: ANN201
        self.seen.add(WALKED)
        return super().values()

    def items(self):  # noqa: ANN201
        self.seen.add(WALKED)
        return super().items()


class _Everything(frozenset):
    def __contains__(self, item: object) -> bool:
        return True


EVERY_METRIC = _Everything()


def recorded_reads(monkeypatch: pytest.MonkeyPatch, module: Any, group: str,
                   run: Callable[[], list]) -> tuple[set[str], list, list]:
    """(metrics the rules looked up, their findings, the findings with nothing filtered out). `group`: the name
    of the module's grouping function ({component: {metric: sample}}); `run` analyzes a fresh host each call."""
    seen: set[str] = set()
    original = getattr(module, group)

    def recording(*args: Any) -> dict:
        return {name: Recording(metrics, seen) for name, metrics in original(*args).items()}

    with monkeypatch.context() as m:
        m.setattr(module, group, recording)
        findings = run()
    with monkeypatch.context() as m:
        m.setattr(module, "_RULE_READS", EVERY_METRIC)
        unfiltered = run()
    return seen, findings, unfiltered
