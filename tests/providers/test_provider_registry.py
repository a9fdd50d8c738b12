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
    """Entry-point syntax: `[extra]` names what brings the module's top-level imports, for the hint."""
    assert PROVIDERS == {
        "static": "fabricase.providers.static:StaticProvider",
        "aws": "fabricase.providers.aws:AwsProvider [aws]",
        "gcp": "fabricase.providers.gcp:GcpProvider [gcp]",
        "azure": "fabricase.providers.azure:AzureProvider [azure]",
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
    monkeypatch.setitem(PROVIDERS, "gcp", "fc_fake_cloud:FakeProvider [gcp]")
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


# -- what each class declares (issue 15: a desk, a cloud or an SDK is one file) ------------------------------

BUILTIN_DESK_KEYS = ["aws", "gcp", "azure", "outbox", "jira", "zendesk", "email"]


def test_the_tables_are_read_from_the_classes():
    from fabricase.bundler.limits import DESK_LIMITS, GENERIC
    from fabricase.providers import declaring_class
    from fabricase.templates.severity import SCALES

    for key in BUILTIN_DESK_KEYS:
        cls = declaring_class(key)
        assert DESK_LIMITS[key] is cls.limits and cls.limits.desk == key
        assert SCALES.get(key) is cls.scale
    assert list(DESK_LIMITS) == [*BUILTIN_DESK_KEYS, "generic"] and DESK_LIMITS["generic"] is GENERIC
    assert "static" not in DESK_LIMITS and "static" not in SCALES  # its configured desk's


def test_each_registered_extra_is_the_one_its_class_declares():
    """The `[extra]` of a registry entry is only read when the module cannot be imported: it must not drift."""
    from fabricase.providers import registrations

    for kind in ("provider", "desk"):
        for reg in registrations(kind).values():
            from fabricase.providers import load_class
            from fabricase.providers.desks.base import Desk

            cls = load_class(reg, Provider if kind == "provider" else Desk)
            assert reg.extra == cls.extra, reg.name


def test_each_declared_template_ships():
    from fabricase.providers import declared, desk_keys
    from fabricase.templates import environment

    shipped = set(environment(None).list_templates())
    declared_names = {k: declared(k, "template") for k in desk_keys()}
    assert {k: t for k, t in declared_names.items() if t} == {
        "aws": "ticket_aws.md.j2", "gcp": "ticket_gcp.md.j2", "azure": "ticket_azure.md.j2",
        "jira": "ticket_jira.md.j2", "zendesk": "ticket_zendesk.md.j2", "email": "ticket_email.md.j2",
    }
    assert all(t in shipped for t in declared_names.values() if t)


def test_looking_up_a_desk_imports_no_sdk():
    """bundler/ and templates/ stay pure: the jira desk's limits and scale come without boto3 or Google's."""
    import subprocess
    import sys

    code = ("import sys; from fabricase.bundler.limits import DESK_LIMITS; from fabricase.templates.severity "
            "import scale_for; DESK_LIMITS['jira']; scale_for('zendesk'); DESK_LIMITS.get('outbox'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'google', 'azure')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _unimportable(tmp_path, monkeypatch, name="gcp"):
    (tmp_path / "fc_sdkless_cloud.py").write_text("import fc_no_such_sdk_for_tests\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(PROVIDERS, name, f"fc_sdkless_cloud:GcpProvider [{name}]")


def test_a_cloud_whose_sdk_is_missing_is_fitted_and_rendered_generic(tmp_path, monkeypatch):
    """`fabricase draft --provider gcp` without Google's SDK: the strictest limits and fabricase's own scale."""
    from fabricase.bundler.limits import DESK_LIMITS
    from fabricase.escalate import desk_of
    from fabricase.templates.severity import desk_severity

    _unimportable(tmp_path, monkeypatch)
    assert "gcp" not in DESK_LIMITS and desk_of("gcp") == "generic"
    assert desk_severity("gcp", "major").code == "major"


def test_a_declared_sdk_missing_is_refused_with_the_hint(paths, monkeypatch):
    """Azure imports its SDK lazily: its module loads without it, and used to fail only half way through."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n.startswith("azure.") else real(n, *a))
    with pytest.raises(ProviderError) as info:
        get_provider("azure", paths)
    assert info.value.message == ("provider 'azure' needs azure.identity, azure.mgmt.compute, azure.mgmt.support: "
                                  "pip install 'fabricase[azure]'")


def test_limits_that_name_another_desk_are_refused(tmp_path, monkeypatch):
    (tmp_path / "fc_misdeclared.py").write_text(textwrap.dedent("""
        from fabricase.bundler.limits import DeskLimits
        from fabricase.providers.static import StaticProvider

        class Misdeclared(StaticProvider):
            limits = DeskLimits("aws", body_max_chars=1, attachment_max_bytes=1)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(PROVIDERS, "oops", "fc_misdeclared:Misdeclared")
    with pytest.raises(ProviderError, match="declares the limits of 'aws', not 'oops'"):
        provider_class("oops")
