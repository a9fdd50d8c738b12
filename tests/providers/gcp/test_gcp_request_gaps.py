"""Issue 15, build item 5 (GCP): the default classification query uses wildcards, and the fake refuses what the
real Cloud Support v2 refuses (a query it cannot parse, a quoted value that is not the whole field, a case without
its required fields or with an unknown classification), checked against google-cloud-support's own types."""

from __future__ import annotations

import pytest
from gcp_fake import (
    CASE_REQUIRED,
    CLASSIFICATION_GPU,
    CLASSIFICATIONS,
    case_problem,
    classification_filter,
    write_profile,
)
from google.auth.credentials import AnonymousCredentials

from fabricase.config import Paths
from fabricase.errors import ProviderError
from fabricase.models import Severity, TicketDraft
from fabricase.providers import gcp_support
from fabricase.providers.gcp import GcpProvider

GPU_NAME = "Technical Issue > Compute > Compute Engine > GPU"


def _provider(tmp_path, google, **profile) -> GcpProvider:
    paths = Paths(data=tmp_path / "data", config=tmp_path / "config")
    write_profile(paths.config, google.base, **profile)
    return GcpProvider(paths, credentials=AnonymousCredentials(), sleep=lambda s: None)


def _draft() -> TicketDraft:
    return TicketDraft(provider="gcp", title="[fabricase] symbol errors on mlx5_3 port 1", body="## Summary\n",
                       severity=Severity.MAJOR, hosts=["a3u-node-0"], components=["rdma:mlx5_3/1"])


def _names(query: str) -> list[str]:
    matches = classification_filter(query)
    return [c["displayName"] for c in CLASSIFICATIONS if matches(c)]


def test_the_default_query_has_wildcards_and_files_under_the_gpu_classification(tmp_path, google):
    assert gcp_support.DEFAULT_CLASSIFICATION_QUERY == 'display_name:"*Compute Engine*"'
    result = _provider(tmp_path, google).file_case(escalation_id="FC-1", draft=_draft(), bundle_path=None)
    assert google.classification_queries == ['display_name:"*Compute Engine*"']
    assert google.cases[result.case_id]["classification"]["id"] == CLASSIFICATION_GPU


def test_a_query_without_wildcards_matches_only_a_whole_name(tmp_path, google):
    assert _names('display_name:"Compute Engine"') == []
    assert _names(f'display_name:"{GPU_NAME}"') == [GPU_NAME]
    assert _names('display_name:"*compute engine*"')[-1] == GPU_NAME  # case does not matter
    assert _names(f'id:"{CLASSIFICATION_GPU}"') == [GPU_NAME] and len(_names("")) == len(CLASSIFICATIONS)
    provider = _provider(tmp_path, google, classification_query='display_name:"Compute Engine"')
    with pytest.raises(ProviderError, match="no case classification matches"):
        provider.file_case(escalation_id="FC-1", draft=_draft(), bundle_path=None)
    assert google.cases == {}


def test_the_fake_refuses_queries_the_api_cannot_parse(tmp_path, google):
    for bad in ("Compute Engine", 'display_name="*GPU*"', 'title:"GPU"'):
        with pytest.raises(ValueError, match="invalid query"):
            classification_filter(bad)
    provider = _provider(tmp_path, google, classification_query="Compute Engine")
    with pytest.raises(ProviderError, match="400 invalid query"):
        provider.file_case(escalation_id="FC-1", draft=_draft(), bundle_path=None)


def test_the_fakes_required_case_fields_are_fields_of_the_sdks_case():
    from google.cloud import support_v2

    json_names = {f.json_name for f in support_v2.Case.pb().DESCRIPTOR.fields}
    assert set(CASE_REQUIRED) <= json_names
    good = {"displayName": "x", "description": "y", "classification": {"id": CLASSIFICATION_GPU}, "priority": "P2"}
    assert case_problem(good) is None
    assert "description" in case_problem({**good, "description": ""})
    assert "unknown classification" in case_problem({**good, "classification": {"id": "CLS-1"}})
    assert "assigned by the server" in case_problem({**good, "name": "projects/p/cases/1"})
    assert "invalid priority" in case_problem({**good, "priority": "P9"})


def test_what_the_provider_creates_passes_the_fakes_checks(tmp_path, google):
    _provider(tmp_path, google).file_case(escalation_id="FC-1", draft=_draft(), bundle_path=None)
    (create,) = google.seen("POST", r"/cases$")
    assert case_problem(create.json()) is None
    from google.cloud import support_v2

    json_names = {f.json_name for f in support_v2.Case.pb().DESCRIPTOR.fields}
    assert set(create.json()) <= json_names
