"""Two engineers, two trackers (two FABRICASE_HOME), one AWS account (moto): each tracker's FC-1 is its own case,
with its own bundle. Before case markers carried the tracker's id, the second FC-1 found the first one's case
by the marker `[fabricase FC-1]`, filed nothing and was recorded as the first engineer's case."""

from __future__ import annotations

import boto3
from awsfakes import REGION, capture_params, stub_codes, write_config

from fabricase import filing
from fabricase.config import Paths
from fabricase.models import Severity, TicketDraft
from fabricase.providers.aws import AwsProvider
from fabricase.tracker import Tracker


def test_two_trackers_file_their_fc_1_as_two_cases_each_with_its_own_bundle(tmp_path, moto, clients):
    created = capture_params(clients.clients["support"], "CreateCase")
    filed = {}
    for who in ("alice", "bob"):
        paths = Paths(data=tmp_path / who / "data", config=tmp_path / who / "config")
        write_config(paths.config, moto)
        bundle = tmp_path / who / "FC-1-1.tar.gz"
        bundle.write_bytes(f"{who}'s evidence\n".encode() * 64)
        stub_codes(clients)
        clients.stub("support").add_response("add_attachments_to_set", {"attachmentSetId": f"as-{who}"},
                                             {"attachments": [{"fileName": bundle.name, "data": bundle.read_bytes()}]})
        draft = TicketDraft(provider="aws", title=f"[fabricase] {who}: mlx5_0/1 symbol errors", body="Affected\n",
                            severity=Severity.MAJOR, hosts=["gpu001"], components=["rdma:mlx5_0/1"])
        with Tracker(f"sqlite:///{tmp_path / who / 'tracker.db'}") as tracker:
            esc = tracker.create(provider="aws", title=draft.title, symptom="busbw fell", severity="major",
                                 hosts=["gpu001"], components=[("gpu001", "rdma:mlx5_0/1")])
            assert esc.id == "FC-1"
            filed[who] = filing.file_escalation(tracker, AwsProvider(paths, sleep=lambda s: None), esc.id, draft,
                                                bundle).provider_case_id
    support = boto3.client("support", region_name=REGION, endpoint_url=moto)
    cases = support.describe_cases(includeResolvedCases=True)["cases"]
    assert filed["alice"] != filed["bob"] and len(cases) == 2
    assert [c["attachmentSetId"] for c in created] == ["as-alice", "as-bob"]  # each case carries its own bundle
    assert len({c["subject"].split("]")[0] for c in cases}) == 2
