from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from bundles import redacted_bundle
from fabricase.config import Paths
from fabricase.errors import ConfigError, ProviderError
from fabricase.models import EscalationState, Placement, Severity, TicketDraft
from fabricase.providers.static import StaticProvider, load_inventory

FILED_AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def paths(tmp_path):
    return Paths(data=tmp_path / "data", config=tmp_path / "config")


@pytest.fixture
def provider(paths):
    return StaticProvider(paths, now=lambda: FILED_AT)


@pytest.fixture
def draft():
    return TicketDraft(
        provider="static",
        title="[FC-1] gpu001 mlx5_3 port 1: symbol errors",
        body="Symptom: allreduce busbw fell from 360 to 210 GB/s\n",
        severity=Severity.MAJOR,
        hosts=["gpu001", "gpu002"],
        components=["gpu001/rdma:mlx5_3/1", "switch:leaf-3"],
        bundle_id="cd" * 32,
        summary="# Summary\n\none link\n",
    )


@pytest.fixture
def bundle(tmp_path):
    return redacted_bundle(tmp_path / "bundles" / "FC-1.tar.gz", payload=bytes(range(256)))


def _write_inventory(paths, document) -> None:
    paths.config.mkdir(parents=True, exist_ok=True)
    text = document if isinstance(document, str) else json.dumps(document)
    (paths.config / "inventory.json").write_text(text)


def _hosts(*names):
    return [{"host": n, "identity": {}} for n in names]


def _tree(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_locate_without_an_inventory_gives_bare_placements(provider):
    assert provider.locate(_hosts("gpu001", "gpu002")) == [
        Placement(host="gpu001", provider="static"),
        Placement(host="gpu002", provider="static"),
    ]


def test_locate_reads_the_inventory(provider, paths):
    _write_inventory(
        paths,
        {
            "hosts": {
                "gpu001": {"rack": "r1", "switch": "leaf-3", "instance_id": "i-0abc", "zone": "z1", "row": 7},
                "gpu002": {"rack": "r2"},
            }
        },
    )
    gpu001, gpu002, fqdn, unknown = provider.locate(_hosts("gpu001", "gpu002", "gpu001.fabric.example", "gpu099"))
    assert gpu001 == Placement(
        host="gpu001",
        provider="static",
        instance_id="i-0abc",
        zone="z1",
        topology=["switch:leaf-3", "rack:r1"],
        extra={"row": "7"},
    )
    assert gpu002.topology == ["rack:r2"] and gpu002.instance_id is None
    assert fqdn.host == "gpu001.fabric.example" and fqdn.topology == ["switch:leaf-3", "rack:r1"]
    assert unknown == Placement(host="gpu099", provider="static")


def test_an_inventory_without_hosts_is_empty(paths):
    _write_inventory(paths, {})
    assert load_inventory(paths.config / "inventory.json") == {}


@pytest.mark.parametrize(
    "document",
    [
        "{not json",
        [],
        {"hosts": ["gpu001"]},
        {"hosts": {"gpu001": "r1"}},
        {"hosts": {"gpu001": {"rack": {"name": "r1"}}}},
    ],
)
def test_a_malformed_inventory_names_the_file(provider, paths, document):
    _write_inventory(paths, document)
    with pytest.raises(ConfigError) as info:
        provider.locate(_hosts("gpu001"))
    assert info.value.where == str(paths.config / "inventory.json")
    assert "\n" not in str(info.value)


def test_file_case_writes_the_outbox(provider, paths, draft, bundle):
    result = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    folder = paths.outbox / "FC-1"
    assert result.case_id == "outbox-FC-1"
    assert result.raw_status == "written-to-outbox"
    assert result.state is EscalationState.FILED
    assert result.location == str(folder)
    assert _tree(folder) == ["FC-1.tar.gz", "case.json", "summary.md", "ticket.md"]
    assert (folder / "ticket.md").read_text() == draft.title + "\n\n" + draft.body
    assert (folder / "summary.md").read_text() == draft.summary
    assert (folder / "FC-1.tar.gz").read_bytes() == bundle.read_bytes()
    case = json.loads((folder / "case.json").read_text())
    assert case == {
        "case_id": "outbox-FC-1",
        "escalation_id": "FC-1",
        "title": draft.title,
        "severity": "major",
        "hosts": ["gpu001", "gpu002"],
        "components": ["gpu001/rdma:mlx5_3/1", "switch:leaf-3"],
        "bundle_id": "cd" * 32,
        "bundle_file": "FC-1.tar.gz",
        "filed_at": "2024-05-01T12:00:00Z",
    }


def test_file_case_without_a_bundle_or_summary(provider, paths, draft):
    draft.summary = None
    draft.body = "no trailing newline"
    provider.file_case(escalation_id="FC-2", draft=draft, bundle_path=None)
    folder = paths.outbox / "FC-2"
    assert _tree(folder) == ["case.json", "summary.md", "ticket.md"]
    assert (folder / "summary.md").read_text() == ""
    assert (folder / "ticket.md").read_text() == f"{draft.title}\n\nno trailing newline\n"
    assert json.loads((folder / "case.json").read_text())["bundle_file"] is None


def test_filing_twice_finds_the_same_case(paths, draft, bundle):
    first = StaticProvider(paths, now=lambda: FILED_AT).file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    folder = paths.outbox / "FC-1"
    before = {name: (folder / name).read_bytes() for name in _tree(folder)}
    later = StaticProvider(paths, now=lambda: datetime(2025, 1, 1, tzinfo=UTC))
    again = later.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle)
    assert again == first
    assert {name: (folder / name).read_bytes() for name in _tree(folder)} == before


def test_an_interrupted_filing_is_completed(provider, paths, draft):
    folder = paths.outbox / "FC-3"
    folder.mkdir(parents=True)
    (folder / "ticket.md").write_text("half")
    provider.file_case(escalation_id="FC-3", draft=draft, bundle_path=None)
    assert (folder / "ticket.md").read_text().startswith(draft.title)
    assert _tree(folder) == ["case.json", "summary.md", "ticket.md"]


def test_a_missing_bundle_file(provider, draft, tmp_path):
    with pytest.raises(ProviderError, match="bundle file not found") as info:
        provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=tmp_path / "gone.tar.gz")
    assert info.value.where == str(tmp_path / "gone.tar.gz")


@pytest.mark.parametrize("escalation_id", ["../FC-1", "FC-1/..", "", ".hidden", "FC 1"])
def test_an_escalation_id_cannot_leave_the_outbox(provider, draft, escalation_id):
    with pytest.raises(ProviderError, match="not a usable escalation id"):
        provider.file_case(escalation_id=escalation_id, draft=draft, bundle_path=None)


def test_an_unwritable_outbox(tmp_path, draft):
    (tmp_path / "afile").write_text("x")
    if os.geteuid() == 0:
        data = tmp_path / "afile"  # root ignores permissions: a file where the outbox folder should be
    else:
        data = tmp_path / "ro"
        (data / "outbox").mkdir(parents=True)
        (data / "outbox").chmod(0o500)
    provider = StaticProvider(Paths(data=data, config=tmp_path))
    with pytest.raises(ProviderError, match="cannot write to the outbox") as info:
        provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=None)
    assert info.value.where == str(data / "outbox" / "FC-1")
    assert isinstance(info.value.__cause__, OSError)


def test_resolve_case_leaves_a_marker(provider, paths, draft):
    result = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=None)
    provider.resolve_case(result.case_id, "optic replaced")
    assert (paths.outbox / "FC-1" / "resolved").read_text() == "optic replaced\n"
    provider.resolve_case(result.case_id, None)
    assert (paths.outbox / "FC-1" / "resolved").read_text() == ""


def test_resolve_case_errors(provider, paths):
    with pytest.raises(ProviderError, match="not an outbox case id"):
        provider.resolve_case("171234", None)
    with pytest.raises(ProviderError, match="no such outbox case") as info:
        provider.resolve_case("outbox-FC-9", None)
    assert info.value.where == str(paths.outbox / "FC-9")
