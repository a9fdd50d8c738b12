"""Bounded retries for provider calls, and provider profiles from config.toml."""

from __future__ import annotations

import random

import pytest

from fabricase.config import Paths, load_config, provider_profile
from fabricase.errors import ConfigError, ProviderError
from fabricase.providers.retry import call_with_retries


class Throttled(Exception):
    pass


def test_throttling_is_retried_with_growing_bounded_delays_then_succeeds():
    calls, delays = [], []

    def fn():
        calls.append(1)
        if len(calls) < 4:
            raise Throttled("Rate exceeded")
        return "case-1"

    got = call_with_retries(fn, provider="aws", operation="CreateCase", transient=lambda e: isinstance(e, Throttled),
                            sleep=delays.append, rng=random.Random(1))
    assert got == "case-1" and len(calls) == 4 and len(delays) == 3
    assert all(0 <= d <= bound for d, bound in zip(delays, (0.5, 1.0, 2.0), strict=True))


def test_gives_up_after_the_bound_with_one_line_naming_provider_and_operation():
    delays = []

    def fn():
        raise Throttled("Rate exceeded")

    with pytest.raises(ProviderError) as info:
        call_with_retries(fn, provider="aws", operation="CreateCase", transient=lambda e: True, attempts=3,
                          sleep=delays.append)
    assert info.value.where == "aws" and "CreateCase: Rate exceeded (after 3 attempts)" in info.value.message
    assert len(delays) == 2


def test_a_permanent_error_is_not_retried():
    def fn():
        raise PermissionError("AccessDenied")

    with pytest.raises(ProviderError, match="DescribeCases: AccessDenied$"):
        call_with_retries(fn, provider="aws", operation="DescribeCases", transient=lambda e: False,
                          sleep=lambda s: pytest.fail("slept"))


def test_profiles_come_from_config_toml(tmp_path):
    paths = Paths(data=tmp_path / "d", config=tmp_path / "c")
    assert load_config(paths) == {} and provider_profile(paths, "aws") == {}
    paths.config.mkdir()
    (paths.config / "config.toml").write_text('[providers.aws]\nregion = "us-east-2"\nsupport_plan = "business"\n')
    assert provider_profile(paths, "aws") == {"region": "us-east-2", "support_plan": "business"}
    assert provider_profile(paths, "gcp") == {}
    (paths.config / "config.toml").write_text("[providers.aws\nregion = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        provider_profile(paths, "aws")
    assert info.value.where.endswith("config.toml")
