"""Bounded retries with exponential backoff and jitter for provider API calls that were throttled or hit a
transient server error. Anything else fails at once, as a one-line ProviderError naming provider and operation."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from fabricase.errors import ProviderError

__all__ = ["ATTEMPTS", "call_with_retries"]

T = TypeVar("T")
ATTEMPTS = 5
BASE_DELAY_S = 0.5
MAX_DELAY_S = 8.0


def call_with_retries(fn: Callable[[], T], *, provider: str, operation: str,
                      transient: Callable[[BaseException], bool], describe: Callable[[BaseException], str] = str,
                      attempts: int = ATTEMPTS, sleep: Callable[[float], None] = time.sleep,
                      rng: random.Random | None = None) -> T:
    """fn(), retried up to `attempts` times in all while `transient(exc)` says the error may pass (throttling,
    5xx); the delay doubles from BASE_DELAY_S up to MAX_DELAY_S, with full jitter. The last error, or the first
    one that is not transient, becomes ProviderError(f"{operation}: {describe(exc)}", where=provider)."""
    rng = rng or random.Random()
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK has its own error tree; `transient` sorts them
            if attempt == attempts or not transient(exc):
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise ProviderError(f"{operation}: {describe(exc)}{tries}", where=provider) from exc
            sleep(rng.uniform(0, min(MAX_DELAY_S, BASE_DELAY_S * 2 ** (attempt - 1))))
    raise AssertionError("unreachable")
