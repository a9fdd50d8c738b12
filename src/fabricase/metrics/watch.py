"""The watch loop (capture, export, wait, again) and the optional /metrics server beside it.

The loop knows nothing of captures: it runs a round function on a period, and a round that fails with a
fabricase error is reported and skipped, so one unreachable job or full disk does not end the watch."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from fabricase.errors import ConfigError, FabricaseError

__all__ = ["MetricsServer", "parse_listen", "watch_loop"]


def watch_loop(round_fn: Callable[[int], Any], *, interval_s: float, count: int | None,
               on_error: Callable[[int, FabricaseError], None],
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> int:
    """Run round_fn(1), round_fn(2), ... starting one every interval_s seconds (right after the previous one
    when a round takes longer), `count` rounds or until interrupted. Returns how many rounds succeeded.
    KeyboardInterrupt is not caught: the caller ends cleanly."""
    succeeded = 0
    n = 0
    while count is None or n < count:
        n += 1
        started = clock()
        try:
            round_fn(n)
            succeeded += 1
        except FabricaseError as exc:
            on_error(n, exc)
        if count is not None and n >= count:
            break
        sleep(max(interval_s - (clock() - started), 0.0))
    return succeeded


def parse_listen(text: str) -> tuple[str, int]:
    """ADDR:PORT (IPv6 as [ADDR]:PORT) -> (address, port); a bad value is one ConfigError."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"expected ADDR:PORT, e.g. 127.0.0.1:9464, got {text!r}", where="--listen")
    return host, int(port)


class MetricsServer:
    """prometheus_client's /metrics server on one address, stopped (and its port released) on close."""

    def __init__(self, listen: str, registry: CollectorRegistry) -> None:
        addr, port = parse_listen(listen)
        try:
            self._server, self._thread = start_http_server(port, addr=addr, registry=registry)
        except OSError as exc:
            raise ConfigError(f"cannot listen: {exc.strerror or exc}", where=listen) from exc

    @property
    def address(self) -> tuple[str, int]:
        return self._server.server_address[:2]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
