from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from aiosmtpd.controller import Controller

from bundles import redacted_bundle
from desks.fakes import JIRA_EMAIL, JIRA_TOKEN, ZENDESK_EMAIL, ZENDESK_TOKEN, FakeJira, FakeZendesk
from fabricase.config import Paths
from fabricase.models import Severity, TicketDraft
from fabricase.providers.desks import make_desk
from loopback import free_port

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
CREDENTIALS = {"FABRICASE_JIRA_EMAIL": JIRA_EMAIL, "FABRICASE_JIRA_TOKEN": JIRA_TOKEN,
               "FABRICASE_ZENDESK_EMAIL": ZENDESK_EMAIL, "FABRICASE_ZENDESK_TOKEN": ZENDESK_TOKEN}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def paths(tmp_path):
    return Paths(data=tmp_path / "data", config=tmp_path / "config")


@pytest.fixture
def draft():
    return TicketDraft(provider="static", title="[fabricase] gpu001 mlx5_3 port 1: symbol errors on 1 host",
                       body="Symptom: allreduce busbw fell from 360 to 210 GB/s\n\n| host | topology |\n"
                            "|---|---|\n| gpu001 | switch:leaf-3, rack:r1 |\n",
                       severity=Severity.MAJOR, hosts=["gpu001"], components=["rdma:mlx5_3/1"],
                       bundle_id="cd" * 32, summary="# Summary\n")


def make_bundle(root, size: int, name: str = "FC-1.tar.gz"):
    return redacted_bundle(root / name, payload=os.urandom(size), mtime=1_790_000_000)


@pytest.fixture
def bundle(tmp_path):
    return make_bundle(tmp_path / "bundles", 4096)


@pytest.fixture
def big_bundle(tmp_path):
    return make_bundle(tmp_path / "big", 300_000, "FC-big.tar.gz")


@pytest.fixture
def jira():
    fake = FakeJira()
    fake.base_url = fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def zendesk():
    fake = FakeZendesk()
    fake.base_url = fake.start()
    yield fake
    fake.stop()


class Mailbox:
    def __init__(self) -> None:
        self.messages: list = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(envelope)
        return "250 OK"


@pytest.fixture
def smtp_server(request):
    limit = getattr(request, "param", 25 * 1024 * 1024)
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port(), data_size_limit=limit)
    controller.start()
    box.port = controller.port
    yield box
    controller.stop()


class Desks:
    """Builds a desk as StaticProvider would, from a profile, with fake credentials and a recording sleep."""

    def __init__(self, paths) -> None:
        self.paths = paths
        self.slept: list[float] = []

    def __call__(self, desk: str, settings: dict, env: dict | None = None, **profile):
        return make_desk(self.paths, {"desk": desk, desk: settings, **profile},
                         env=CREDENTIALS if env is None else env, now=lambda: NOW, sleep=self.slept.append)


@pytest.fixture
def desks(paths):
    return Desks(paths)


@pytest.fixture
def jira_settings(jira):
    return {"base_url": jira.base_url, "service_desk_id": "10", "request_type_id": 42}


@pytest.fixture
def zendesk_settings(zendesk):
    return {"base_url": zendesk.base_url, "tags": ["gpu-fabric"]}
