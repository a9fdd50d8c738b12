"""Issue 14, at the bytes level: no secret reaches Google through any of the GCP provider's outbound methods.

Fresh random secrets (desks/fakes.py `plant`) go into the draft's title, body and summary, the bundle file, a
comment, an attach note and file, a resolve note and the findings of a faulty-host report (Cloud Support has no
reopen). The real google-cloud SDKs then talk REST to the local fake (gcp_fake), which keeps every request as it
arrived (`FakeGoogle.wire`: target and body, media uploads included). No secret may be in any of them, each place's
canary and `[REDACTED:` must be. With the gate bypassed (`gate.text` made the identity) every place must leak."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from gcp_fake import ZONE, instance, write_profile
from google.auth.credentials import AnonymousCredentials

from fabricase.config import Paths
from fabricase.models import Finding, Severity, TicketDraft
from fabricase.providers.gcp import GcpProvider
from fabricase.redact import gate

sys.path.insert(0, str(Path(__file__).parents[1]))
from desks.fakes import assert_wire, plant_all  # noqa: E402
from faulty_fleet import host_report  # noqa: E402

SEED = 14
PLACES = ("title", "body", "summary", "bundle", "comment", "attach-note", "attach-file", "resolve-note", "findings")
GCE = {"product_name": "Google Compute Engine", "sys_vendor": "Google"}


@pytest.mark.parametrize("gated", [True, False], ids=["gated", "gate-bypassed"])
def test_no_secret_reaches_google_in_any_request(google, tmp_path, monkeypatch, gated):
    if not gated:
        monkeypatch.setattr(gate, "text", lambda value: value)
    planted = plant_all(SEED, PLACES)
    paths = Paths(data=tmp_path / "data", config=tmp_path / "config")
    write_profile(paths.config, google.base, zone=ZONE)
    provider = GcpProvider(paths, credentials=AnonymousCredentials(), sleep=lambda s: None)
    google.add(instance("a3u-node-0"))
    bundle = tmp_path / "FC-1-evidence.txt"
    bundle.write_text(planted["bundle"].text)
    log = tmp_path / "nccl.log"
    log.write_text(planted["attach-file"].text)
    draft = TicketDraft(provider="gcp", title=planted["title"].line, body=planted["body"].text,
                        severity=Severity.MAJOR, hosts=["a3u-node-0"], components=["gpu:3"],
                        summary=planted["summary"].text)
    findings = [Finding(kind="nvidia-xid", severity=Severity.CRITICAL, host="a3u-node-0", component="gpu:3",
                        summary=summary) for summary in planted["findings"].summaries()]

    case_id = provider.file_case(escalation_id="FC-1", draft=draft, bundle_path=bundle).case_id
    provider.comment(case_id, planted["comment"].text)
    provider.attach(case_id, [log], planted["attach-note"].text)
    provider.resolve_case(case_id, planted["resolve-note"].text)
    (placement,) = provider.locate([{"host": "a3u-node-0", "identity": GCE}])
    provider.report_faulty_host(placement, host_report(placement, findings))  # the findings' text as suspects'

    assert len(google.seen("POST", r"/upload/")) == 3  # the bundle, the summary, the attached file
    assert_wire(google.wire, planted, gated=gated)
