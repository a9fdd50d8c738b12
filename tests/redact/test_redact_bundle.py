"""Redacted bundles of the seeded corpus: no planted secret survives in any member, redaction.json counts
every one by kind, the redacted capture still verifies and analyzes the same, bundles are reproducible, and
pseudonyms are consistent while instance and topology ids stay as they are."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from redact_support import KEY, MTIME, OTHER_KEY, findings_of, make_redactor

from fabricase.bundler import build_bundle, extract_bundle, read_manifest, verify_bundle
from fabricase.capturedir import load_capture
from fabricase.redact import REDACTION_NAME, SECRET_KINDS, redaction_json


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def originals(corpus, extra: dict[str, bytes]) -> dict[str, bytes]:
    files = {p.relative_to(corpus.root).as_posix(): p.read_bytes() for p in corpus.root.rglob("*") if p.is_file()}
    return files | extra


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_corpus_plants_at_least_200_secrets_of_15_kinds(corpus):
    kinds = Counter(p.kind for p in corpus.secrets)
    assert len(corpus.secrets) >= 200
    assert len(kinds) >= 15
    assert set(kinds) <= set(SECRET_KINDS)  # every kind is exercised in test_secret_formats.py
    assert len({p.value for p in corpus.secrets}) == len(corpus.secrets)
    # ... and they really are in the capture: in kernel logs, command lines, config files, stderr, inputs.
    planted = originals(corpus, {})
    assert all(any(p.value.encode() in data for data in planted.values()) for p in corpus.secrets)


def test_no_planted_secret_survives_in_any_member(built, corpus):
    content = members(built.bundle.path)
    secrets = corpus.secrets + corpus.extra_secrets
    assert {"findings.json", "ticket.md", REDACTION_NAME} <= set(content)
    for name, data in content.items():
        survivors = [p.kind for p in secrets if p.value.encode() in data]
        assert not survivors, f"{name} still holds {survivors}"
    # Nor anywhere in the archive: member names, PAX headers, padding.
    raw = gzip.decompress(built.bundle.path.read_bytes())
    assert not [p.kind for p in secrets if p.value.encode() in raw]


def test_redaction_json_counts_each_planted_secret_by_kind(built, corpus):
    content = members(built.bundle.path)
    expected = corpus.expected_counts(originals(corpus, built.extra))
    assert sum(expected.values()) >= 200
    report = json.loads(content[REDACTION_NAME])
    assert {k: v for k, v in report["totals"].items() if k in SECRET_KINDS} == dict(expected)
    assert content[REDACTION_NAME] == redaction_json(built.redactor.report())
    assert list(report) == sorted(report)
    assert report["format"] == "fabricase-redaction" and report["pseudonymized"] is built.redactor.pseudonymize
    # Counts per member add up to the totals, and name members of this bundle.
    summed: Counter[str] = Counter()
    for name, counts in report["members"].items():
        assert name in content
        summed.update(counts)
    assert dict(summed) == report["totals"]
    assert report["members"]["ticket.md"] == {"bearer-token": 1, "password": 1} | (
        {"host": 1} if built.redactor.pseudonymize else {})


def test_the_redacted_capture_verifies_loads_and_gives_the_same_findings(built, corpus, tmp_path):
    assert verify_bundle(built.bundle.path).ok
    unpacked = extract_bundle(built.bundle.path, tmp_path / "x")
    capture = load_capture(unpacked, verify=True)  # every item's offset, size and sha256 re-framed
    assert len(capture.hosts) == len(corpus.hosts)
    findings = findings_of(unpacked / "capture")
    assert json.loads(built.findings_json)  # the corpus has findings to compare (the Xid 79 among them)
    if built.redactor.pseudonymize:
        # The same findings, about the same pseudonymized hosts (in another order where ranks tie: ties are
        # broken by host name, and pseudonyms sort differently).
        mapped = make_redactor(corpus, True).redact_text("findings.json", built.findings_json)
        assert findings != built.findings_json
        assert sorted(json.loads(findings), key=json.dumps) == sorted(json.loads(mapped), key=json.dumps)
    else:
        assert findings == built.findings_json


def test_counter_items_and_digests_are_not_touched(built, corpus, tmp_path):
    unpacked = extract_bundle(built.bundle.path, tmp_path / "x")
    before = {hc.host: hc for hc in load_capture(corpus.root).hosts}
    after = load_capture(unpacked).hosts
    numeric = 0
    for hc in after:
        original = before[corpus.hosts[[built.redactor.host_pseudonym(h) for h in corpus.hosts].index(hc.host)]]
        for old, new in zip(original.items, hc.items, strict=True):
            data = original.read(old)
            if re.fullmatch(rb"[0-9]+\n?", data):
                numeric += 1
                assert hc.read(new) == data and (new.bytes, new.sha256) == (old.bytes, old.sha256)
    assert numeric > 5000
    # The manifest is all sha256 hex and member names: redacting it again changes nothing.
    manifest = members(built.bundle.path)["MANIFEST.json"]
    assert make_redactor(corpus, built.redactor.pseudonymize).redact("MANIFEST.json", manifest) == manifest
    assert all(re.fullmatch(r"[0-9a-f]{64}", m["sha256"]) for m in json.loads(manifest)["members"])


@pytest.mark.parametrize("pseudonymize", [False, True], ids=["secrets", "pseudonymized"])
def test_same_capture_and_options_give_identical_bytes(corpus, original_findings, tmp_path, pseudonymize):
    extra = corpus.extra(original_findings)
    one = build_bundle(corpus.root, tmp_path / "one.tgz", extra=extra, mtime=MTIME,
                       redactor=make_redactor(corpus, pseudonymize))
    two = build_bundle(corpus.root, tmp_path / "two.tgz", extra=extra, mtime=MTIME,
                       redactor=make_redactor(corpus, pseudonymize))
    assert one.path.read_bytes() == two.path.read_bytes()
    assert one.bundle_id == two.bundle_id
    # One redactor reused for a second bundle reports that bundle alone.
    reused = make_redactor(corpus, pseudonymize)
    for name in ("three.tgz", "four.tgz"):
        again = build_bundle(corpus.root, tmp_path / name, extra=extra, mtime=MTIME, redactor=reused)
        assert again.path.read_bytes() == one.path.read_bytes()
    if pseudonymize:
        other = build_bundle(corpus.root, tmp_path / "other.tgz", extra=extra, mtime=MTIME,
                             redactor=make_redactor(corpus, True, OTHER_KEY))
        assert other.bundle_id != one.bundle_id
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["one.tgz", "two.tgz", "three.tgz", "four.tgz"] + (["other.tgz"] if pseudonymize else []))


def test_the_capture_directory_is_only_read(corpus, original_findings, tmp_path):
    before = tree(corpus.root)
    build_bundle(corpus.root, tmp_path / "b.tgz", extra=corpus.extra(original_findings), mtime=MTIME,
                 redactor=make_redactor(corpus, True))
    assert tree(corpus.root) == before


pseudonymized_only = pytest.mark.parametrize("built", [True], indirect=True, ids=["pseudonymized"])


@pseudonymized_only
def test_no_identifying_value_survives_pseudonymization(built, corpus):
    content = members(built.bundle.path)
    raw = gzip.decompress(built.bundle.path.read_bytes()).lower()
    assert set(corpus.identifying) == {"host", "user", "ip4", "ip6", "mac", "guid", "gid"}
    for kind, values in corpus.identifying.items():
        # As a whole word: "10.1.2.3" inside "110.1.2.34" would be another value.
        found = (v.lower().encode() for v in values)
        left = sorted(v for v in found if v in raw and re.search(rb"(?<![\w.:])" + re.escape(v) + rb"(?![\w:])", raw))
        assert not left, f"{kind}: {left[:3]}"
    totals = json.loads(content[REDACTION_NAME])["totals"]
    assert all(totals[kind] >= len(corpus.hosts) for kind in ("host", "user", "ip4", "ip6", "mac", "guid", "gid"))


@pseudonymized_only
def test_pseudonyms_are_the_same_in_every_member_and_every_bundle(built, corpus):
    content = members(built.bundle.path)
    redactor = built.redactor
    victim, second = json.loads(built.findings_json)[0]["host"], corpus.hosts[1]
    token = redactor.host_pseudonym(victim)
    assert re.fullmatch(r"host-[0-9a-f]{10}", token)
    capture_json = json.loads(content["capture/capture.json"])
    assert capture_json["hosts"] == [redactor.host_pseudonym(h) for h in corpus.hosts]
    assert capture_json["targets"].get("harness")  # other fields kept
    assert json.loads(content[f"capture/hosts/{token}/host.json"])["host"] == token
    placements = {p["host"]: p for p in json.loads(content["capture/placements.json"])["placements"]}
    assert set(placements) == set(capture_json["hosts"])
    assert any(f["host"] == token for f in json.loads(content["findings.json"]))
    stream = content[f"capture/hosts/{token}/stream.fc1"].decode()
    assert f"launched job on {token}\n" in stream  # the FQDN, in the kernel log
    assert redactor.host_pseudonym(corpus.hosts[0]) in content["ticket.md"].decode()
    nccl = next(v for k, v in content.items() if k.startswith("capture/inputs/nccl-log/")).decode()
    assert nccl.startswith(redactor.host_pseudonym(second) + ":4242:4242")
    # One host's addresses: the interface's IPv4, the placement's private IP and the RoCE GID that maps it agree.
    ip4_token = re.search(r"inet (ip4-[0-9a-f]{10})/24", stream).group(1)
    assert placements[token]["extra"]["PrivateIpAddress"] == ip4_token
    assert f"gid-{ip4_token[4:]}" in stream
    guids = set(re.findall(r"GUID: (guid-[0-9a-f]{10})", stream))
    assert len(guids) == 1 and guids.pop() in stream.split("node_guid\n", 1)[1]  # 0x form = sysfs form
    # Another bundle of the same escalation (a new redactor, the same key) uses the same pseudonyms.
    again = make_redactor(corpus, True)
    assert again.host_pseudonym(victim) == token
    other = make_redactor(corpus, True, OTHER_KEY)
    assert other.host_pseudonym(victim) != token
    assert KEY != OTHER_KEY


@pseudonymized_only
def test_instance_and_topology_ids_are_never_redacted(built, corpus):
    content = members(built.bundle.path)
    placements = content["capture/placements.json"].decode()
    streams = b"".join(v for k, v in content.items() if k.endswith("stream.fc1")).decode()
    for instance in corpus.instance_ids:
        assert f'"instance_id": "{instance}"' in placements
        assert f"/sys/class/dmi/id/board_asset_tag\n{instance}\n" in streams
    for node in corpus.topology_ids:
        assert f"network-node:{node}" in placements


def test_the_manifest_hashes_the_redacted_bytes(built):
    content = members(built.bundle.path)
    manifest = read_manifest(built.bundle.path)
    listed = {m["path"]: m for m in manifest["members"]}
    assert set(listed) == set(content) - {"MANIFEST.json"}
    for name, data in content.items():
        if name != "MANIFEST.json":
            assert (listed[name]["size"], listed[name]["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
