"""The whole flow on the secret-seeded corpus: `fabricase open` files a ticket and a bundle with no secret in
either, and `fabricase bundle --pseudonymize` is byte-for-byte reproducible with the tracker's key."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

from click.testing import CliRunner

from fabricase.cli import cli


def _run(*args: str) -> dict:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}


def test_open_files_no_secret_in_the_ticket_or_the_bundle(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    capture = tmp_path / "capture"
    shutil.copytree(corpus.root, capture)
    out = _run("open", "--replay", str(capture), "--symptom", "NCCL hang on rank 3")
    case = Path(out["ticket_path"]).parent
    filed = {p.name: p.read_bytes() for p in case.iterdir() if p.is_file() and not p.name.endswith(".tar.gz")}
    members = _members(Path(out["bundle_path"]))
    assert "redaction.json" in members and "report.html" in members
    for planted in corpus.secrets + corpus.extra_secrets:
        needle = planted.value.encode()
        leaks = [name for name, data in {**filed, **members}.items() if needle in data]
        assert not leaks, (planted.kind, leaks)
    counts = json.loads(members["redaction.json"])
    assert not counts["pseudonymized"] and sum(counts["totals"].values()) >= len(corpus.secrets)


def test_bundle_pseudonymized_twice_is_identical_and_hides_the_hosts(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    a = _run("bundle", str(corpus.root), "-o", str(tmp_path / "a.tar.gz"), "--pseudonymize")
    b = _run("bundle", str(corpus.root), "-o", str(tmp_path / "b.tar.gz"), "--pseudonymize")
    assert a["bundle_id"] == b["bundle_id"]
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    members = _members(tmp_path / "a.tar.gz")
    for host in corpus.hosts:
        assert not [name for name, data in members.items() if host.encode() in data or host in name], host
    for instance in corpus.instance_ids:  # the provider needs these: never pseudonymized
        assert any(instance.encode() in data for data in members.values()), instance
    plain = _run("bundle", str(corpus.root), "-o", str(tmp_path / "plain.tar.gz"))
    assert plain["bundle_id"] != a["bundle_id"]
