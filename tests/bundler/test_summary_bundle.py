"""The summary form of a bundle (issue 18, "bundles that fit at any scale"): a capture whose full bundle passes a
desk's limits yields a summary bundle that fits, carries the suspects and sampled peers, a fleet summary of every
host, verifies, re-analyzes offline without calling the left-out hosts unreachable, and is byte-reproducible."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from summary_helpers import HOSTS, Fleet, make_fleet

from fabricase.bundler.limits import desk_limits
from fabricase.bundler.summary_form import capture_summary, fit_problem, summary_line
from fabricase.bundler.verify import verify_bundle
from fabricase.escalate import build_bundle_for, make_redactor
from fabricase.pipeline import diagnose_capture, load_input


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet") / "capture")


def _build(fleet: Fleet, out: Path, **kw):
    return build_bundle_for(fleet.capture, fleet.analysis.findings, fleet.draft, out, samples=fleet.analysis.samples,
                            diagnosis=fleet.analysis.diagnosis, **kw)


def _small_desk(full_size: int):
    # a desk that takes 3 attachments of a quarter of the full bundle each: the full bundle cannot reach it
    return desk_limits("aws", attachment_max_bytes=full_size // 4, large_upload_max_bytes=None, max_attachments=3)


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isreg()}


@pytest.fixture(scope="module")
def built(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("bundles")
    full = _build(fleet, out / "full.tar.gz", form="full")
    limits = _small_desk(full.size)
    summary = _build(fleet, out / ".FC-9-1.partial", limits=limits)
    return full, summary, limits


def test_a_full_bundle_that_fits_stays_full(fleet: Fleet, tmp_path: Path) -> None:
    b = _build(fleet, tmp_path / "b.tar.gz")  # aws's real limits: this small capture fits
    assert b.form == "full" and b.record is None and verify_bundle(b.path).summary is None


def test_past_the_desk_limit_the_summary_form_fits(built) -> None:
    full, summary, limits = built
    assert fit_problem(full.size, limits) is not None
    assert summary.form == "summary"
    assert fit_problem(summary.size, limits) is None
    assert summary.full_path.is_file() and verify_bundle(summary.full_path).ok  # kept local, whole
    assert summary.full["size"] == summary.full_path.stat().st_size and "local" in summary.note


def test_summary_holds_the_suspects_peers_and_marks_the_rest(fleet: Fleet, built) -> None:
    _full, summary, _ = built
    suspects = {s.host for s in fleet.analysis.diagnosis.suspects if s.host}
    assert suspects
    members = _members(summary.path)
    cap = json.loads(members["capture/capture.json"])
    included = set(cap["hosts"])
    assert suspects <= included
    assert len(included) == len(suspects) + 8  # one class here: 8 healthy peers
    record = cap["summary_bundle"]
    left = record["left_out"]["hosts"]
    assert left and not set(left) & included and len(left) + len(included) == HOSTS
    assert record["left_out"]["count"] == len(left)
    assert record["full_bundle"]["sha256"] == summary.full["sha256"]
    hosts_in = {n.split("/")[2] for n in members if n.startswith("capture/hosts/")}
    assert hosts_in == included
    assert record["hosts"] == [hc.host for hc in fleet.capture.hosts]  # nothing pretends the rest were not targeted
    manifest = json.loads(members["MANIFEST.json"])
    assert manifest["summary"] == record
    assert "summary bundle" in members["ticket.md"].decode()


def test_fleet_summary_covers_every_host_and_every_counter(fleet: Fleet, built) -> None:
    doc = json.loads(_members(built[1].path)["fleet-summary.json"])
    assert doc["hosts"] == HOSTS
    used = {s.metric for rows in fleet.analysis.samples.values() for s in rows
            if s.delta is not None or s.value is not None}
    assert set(doc["counters"]) == used
    stats = next(iter(next(iter(doc["counters"].values()))["classes"].values()))
    quantity = next(iter(stats.values()))
    assert quantity["min"] <= quantity["p50"] <= quantity["p90"] <= quantity["p99"] <= quantity["max"]
    assert quantity["hosts"] == HOSTS


def test_verify_says_it_is_a_summary(built) -> None:
    report = verify_bundle(built[1].path)
    assert report.ok, report.problems
    line = summary_line(report.summary)
    included = report.summary["hosts_included"]
    assert included == HOSTS - report.summary["left_out"]["count"]
    assert line.startswith(f"summary bundle: {included} of {HOSTS} hosts; the rest left out")


def test_offline_analysis_of_the_summary_calls_no_left_out_host_unreachable(fleet: Fleet, built) -> None:
    capture = load_input(built[1].path)
    assert summary_line(capture_summary(capture.root)).startswith("summary bundle: 9 of 40 hosts")
    assert capture_summary(fleet.capture.root) is None
    analysis = diagnose_capture(capture)
    assert not [f for f in analysis.findings if f.kind == "host-unreachable"]
    assert {s.host for s in analysis.diagnosis.suspects} == {s.host for s in fleet.analysis.diagnosis.suspects}


def test_summary_bundle_is_reproducible(fleet: Fleet, built, tmp_path: Path) -> None:
    again = _build(fleet, tmp_path / ".FC-9-1.partial", limits=built[2])
    assert again.path.read_bytes() == built[1].path.read_bytes()
    assert again.full_path.read_bytes() == built[1].full_path.read_bytes()


def test_on_request_summary_without_a_full_bundle(fleet: Fleet, tmp_path: Path) -> None:
    b = _build(fleet, tmp_path / "s.tar.gz", form="summary")
    assert b.form == "summary" and b.full is None and b.full_path is None
    assert "stayed local" in summary_line(verify_bundle(b.path).summary)


def test_pseudonymized_summary_names_no_host(fleet: Fleet, tmp_path: Path) -> None:
    redactor = make_redactor(fleet.capture, pseudonymize=True, key=b"k" * 32)
    b = _build(fleet, tmp_path / "p.tar.gz", form="summary", redactor=redactor)
    assert verify_bundle(b.path).ok
    for name, data in _members(b.path).items():
        text = data.decode("utf-8", "replace")
        assert "gpu00" not in name and "gpu00" not in text, name
