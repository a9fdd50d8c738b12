"""Fixtures of the static provider's acceptance tests: a FABRICASE_HOME with the desks' credentials and the
16-host fleet's inventory."""

from __future__ import annotations

import json

import pytest
from desks.fakes import JIRA_EMAIL, JIRA_TOKEN, ZENDESK_EMAIL, ZENDESK_TOKEN

HOSTS = [f"gpu{i:03d}" for i in range(1, 17)]


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("FABRICASE_HOME", str(h))
    for name in ("FABRICASE_DEBUG", "FABRICASE_DB", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("FABRICASE_JIRA_EMAIL", JIRA_EMAIL), ("FABRICASE_JIRA_TOKEN", JIRA_TOKEN),
                        ("FABRICASE_ZENDESK_EMAIL", ZENDESK_EMAIL), ("FABRICASE_ZENDESK_TOKEN", ZENDESK_TOKEN)):
        monkeypatch.setenv(name, value)
    hosts = {h: {"switch": f"leaf-{i // 8 + 1}", "rack": f"r{i // 8 + 1}"} for i, h in enumerate(HOSTS)}
    (h / "inventory.json").write_text(json.dumps({"hosts": hosts}))
    return h
