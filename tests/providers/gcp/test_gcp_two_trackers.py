"""Two engineers, two trackers (two FABRICASE_HOME), one GCP project: each tracker's FC-1 is its own case, with
its own bundle. Before case markers carried the tracker's id, the second FC-1 found the first one's case by the
marker `[fabricase FC-1]` and uploaded its bundle into it."""

from __future__ import annotations

from pathlib import Path

from gcp_fake import write_profile
from google.auth.credentials import AnonymousCredentials

from fabricase import filing
from fabricase.config import Paths
from fabricase.models import Severity, TicketDraft
from fabricase.providers.gcp import GcpProvider
from fabricase.tracker import Tracker


def _engineer(root: Path, google, who: str) -> tuple[Tracker, GcpProvider, TicketDraft, Path]:
    paths = Paths(data=root / who / "data", config=root / who / "config")
    write_profile(paths.config, google.base, support_plan="standard")
    tracker = Tracker(f"sqlite:///{root / who / 'tracker.db'}")
    bundle = root / who / "FC-1-1.tar.gz"
    bundle.write_bytes(f"{who}'s evidence\n".encode() * 64)
    draft = TicketDraft(provider="gcp", title=f"[fabricase] {who}: symbol errors on mlx5_3 port 1", body="## Summary\n",
                        severity=Severity.MAJOR, hosts=[f"{who}-node-0"], components=["rdma:mlx5_3/1"])
    return tracker, GcpProvider(paths, credentials=AnonymousCredentials(), sleep=lambda s: None), draft, bundle


def test_two_trackers_file_their_fc_1_as_two_cases_each_with_its_own_bundle(tmp_path, google):
    cases = []
    for who in ("alice", "bob"):
        tracker, provider, draft, bundle = _engineer(tmp_path, google, who)
        with tracker:
            esc = tracker.create(provider="gcp", title=draft.title, symptom="busbw fell", severity="major",
                                 hosts=draft.hosts, components=[(draft.hosts[0], "rdma:mlx5_3/1")])
            assert esc.id == "FC-1"  # every tracker numbers from FC-1
            cases.append((filing.file_escalation(tracker, provider, esc.id, draft, bundle), bundle))
    (alice, alice_bundle), (bob, bob_bundle) = cases
    assert alice.provider_case_id != bob.provider_case_id
    assert len(google.cases) == 2
    assert google.uploads[(alice.provider_case_id, alice_bundle.name)] == alice_bundle.read_bytes()
    assert google.uploads[(bob.provider_case_id, bob_bundle.name)] == bob_bundle.read_bytes()
    names = {google.cases[c.provider_case_id]["displayName"] for c in (alice, bob)}
    assert len({n.split("]")[0] for n in names}) == 2  # two markers, each "[fabricase FC-1.<tracker id>"
