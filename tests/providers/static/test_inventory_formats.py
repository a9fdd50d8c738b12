"""The static inventory in JSON, TOML or YAML: spine, leaf (or switch) and rack become the host's topology,
outermost first; the provider account and anything else go to the placement's extra."""

from __future__ import annotations

import pytest

from fabricase.config import Paths
from fabricase.errors import ConfigError
from fabricase.providers.static import StaticProvider, load_inventory

TOML = """
[hosts.gpu001]
spine = "sp-1"
leaf = "leaf-3"
rack = "r12"
account = "acme-prod"

[hosts.gpu002]
switch = "leaf-4"
"""

YAML = """
hosts:
  gpu001: {spine: sp-1, leaf: leaf-3, rack: r12, account: acme-prod}
  gpu002: {switch: leaf-4}
"""


@pytest.mark.parametrize(("name", "text"), [("inventory.toml", TOML), ("inventory.yaml", YAML)])
def test_toml_and_yaml_inventories_place_hosts(tmp_path, name, text):
    paths = Paths(data=tmp_path / "d", config=tmp_path / "c")
    paths.config.mkdir()
    (paths.config / name).write_text(text)
    provider = StaticProvider(paths)
    assert provider.inventory_path.name == name
    first, second, third = provider.locate([{"host": "gpu001.cluster.example"}, {"host": "gpu002"}, {"host": "x"}])
    assert first.topology == ["spine:sp-1", "leaf:leaf-3", "rack:r12"]
    assert first.extra == {"account": "acme-prod"}
    assert second.topology == ["switch:leaf-4"] and third.topology == []


@pytest.mark.parametrize(("name", "text", "message"), [
    ("inventory.toml", "[hosts.gpu001\nrack = 1", "not valid TOML"),
    ("inventory.yaml", "hosts: [unclosed", "not valid YAML"),
    ("inventory.yaml", "hosts:\n  gpu001: [1, 2]\n", "expected an object"),
])
def test_a_malformed_inventory_is_one_line_naming_the_file(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_inventory(path)
    assert info.value.where == str(path)
