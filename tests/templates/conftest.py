"""Every template test runs with its own, empty config directory: a developer's own overrides in
~/.config/fabricase/templates must never change what the golden tests see."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_config_dir(tmp_path, monkeypatch):
    home = tmp_path / "fabricase-home"
    monkeypatch.setenv("FABRICASE_HOME", str(home))
    return home
