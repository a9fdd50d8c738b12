from __future__ import annotations

import textwrap

import pytest

from fabricase.config import Paths
from fabricase.errors import ProviderError, UnsupportedError
from fabricase.providers import PROVIDERS, Feature, Provider, _require_sdk, get_provider, provider_class
from fabricase.providers.static import StaticProvider


@pytest.fixture
def paths(tmp_path):
    return Paths(data=tmp_path / "data", config=tmp_path / "config")


def test_the_registry_names_every_provider():
    assert PROVIDERS == {
        "static": "fabricase.providers.static:StaticProvider",
        "aws": "fabricase.providers.aws:AwsProvider",
        "gcp": "fabricase.providers.gcp:GcpProvider",
        "azure": "fabricase.providers.azure:AzureProvider",
    }


@pytest.mark.parametrize("name", ["static", "Static", " STATIC "])
def test_get_provider_builds_the_registered_class(paths, name):
    provider = get_provider(name, paths)
    assert isinstance(provider, StaticProvider)
    assert provider.name == "static" and provider.paths == paths


def test_an_unknown_provider_lists_the_valid_ones(paths):
    with pytest.raises(ProviderError) as info:
        get_provider("oracle", paths)
    assert "unknown provider 'oracle'" in str(info.value)
    assert "valid: aws, azure, gcp, static" in str(info.value)


def test_a_registered_provider_not_written_yet(paths, monkeypatch):
    monkeypatch.setitem(PROVIDERS, "aws", "fabricase.providers.not_written_yet:AwsProvider")
    with pytest.raises(ProviderError) as info:
        get_provider("aws", paths)
    assert info.value.message == "provider 'aws' is not available yet in this version"
    assert info.value.where == "aws"


def test_a_missing_sdk_gives_the_install_hint(paths, monkeypatch, tmp_path):
    (tmp_path / "fc_fake_cloud.py").write_text(
        textwrap.dedent(
            """
            import fc_no_such_sdk_for_tests

            class FakeProvider:
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(PROVIDERS, "gcp", "fc_fake_cloud:FakeProvider")
    with pytest.raises(ProviderError) as info:
        get_provider("gcp", paths)
    assert "fc_no_such_sdk_for_tests" in str(info.value)
    assert "pip install 'fabricase[gcp]'" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)


def test_require_sdk():
    assert _require_sdk("json", "aws").__name__ == "json"
    with pytest.raises(ProviderError) as info:
        _require_sdk("fc_no_such_sdk_for_tests", "azure")
    assert str(info.value) == "azure: fc_no_such_sdk_for_tests is not installed: pip install 'fabricase[azure]'"


def test_a_registry_entry_that_is_not_a_provider(monkeypatch):
    monkeypatch.setitem(PROVIDERS, "static", "fabricase.providers.static:load_inventory")
    with pytest.raises(ProviderError, match="is not a Provider class"):
        provider_class("static")


def test_declared_capabilities(paths):
    provider = get_provider("static", paths)
    assert provider.supports(Feature.LOCATE) and provider.supports(Feature.FILE_CASE)
    assert provider.supports(Feature.RESOLVE)
    assert not provider.supports(Feature.SYNC)
    assert not provider.supports(Feature.FAULTY_HOST_REPORT)
    provider.require(Feature.FILE_CASE)
    with pytest.raises(UnsupportedError) as info:
        provider.require(Feature.FAULTY_HOST_REPORT)
    assert str(info.value) == (
        "static: faulty-host-report is not supported: no provider API: the static provider has no faulty-host channel"
    )
    with pytest.raises(UnsupportedError, match="outbox cases are updated by hand"):
        provider.require("sync")


def test_an_undeclared_reason_is_refused_at_class_creation():
    with pytest.raises(TypeError, match="needs a Feature and a reason"):

        class _Vague(Provider):  # noqa: F841 - defining it is the test
            unsupported = {Feature.SYNC: ""}


def test_a_provider_must_implement_the_abstract_methods(paths):
    class _Partial(Provider):
        name = "partial"

        def locate(self, hosts):
            return []

    with pytest.raises(TypeError):
        _Partial(paths)
