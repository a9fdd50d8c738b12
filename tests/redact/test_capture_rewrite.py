"""The redacted copy of a capture stays a capture: streams cut short stay cut, format-1 items follow their
redacted paths, and what cannot be redacted consistently stops the bundle with one line."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from fabricase.bundler import build_bundle, extract_bundle, verify_bundle
from fabricase.capture_index import INDEX_FILE, index_records, records_index
from fabricase.capturedir import host_capture_from_stream, load_capture, write_capture_meta, write_host
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.errors import BundleError
from fabricase.models import HostStatus
from fabricase.redact import Redactor

KEY = b"k" * 32
MTIME = 1796083200
PLAN = CapturePlan(collectors=(), interval_s=5.0)


def frame(kind: str, source: str, content: bytes, declared: int | None = None) -> bytes:
    size = len(content) if declared is None else declared
    end = b"\n" if declared is None else b""
    return f"@@FC1 I identity {kind} 0 0 {size} 0 - - {source}\n".encode() + content + end


def stream(*frames: bytes, complete: bool = True) -> bytes:
    body = b"@@FC1 BEGIN 1 1\n@@FC1 S 0 1800000000.0 1000.0\n" + b"".join(frames)
    return body + (b"@@FC1 E 0 1800000000.1 1000.1\n@@FC1 END\n" if complete else b"")


def capture(root: Path, streams: dict[str, bytes], status: HostStatus = HostStatus.OK,
            version: int | None = None) -> Path:
    root.mkdir(parents=True)
    write_capture_meta(root, plan=PLAN, targets={"nodeset": "gpu[001-002]", "via": "local"},
                       hosts=list(streams), created_at="2026-12-01T00:00:00Z", version=version)
    for host, raw in streams.items():
        hc = host_capture_from_stream(host, parse_stream(raw), PLAN)
        hc.status, hc.transport = status, "local"
        write_host(root, hc, raw, version=version)
    return root


def _edit_index(cap: Path, host: str, edit) -> None:
    """Apply `edit` to the host's index records, whichever format holds them (index.json or index.fci)."""
    hdir = cap / "hosts" / host
    if (hdir / INDEX_FILE).exists():
        items = index_records((hdir / INDEX_FILE).read_bytes())
        edit(items)
        (hdir / INDEX_FILE).write_bytes(records_index(items))
        return
    doc = json.loads((hdir / "index.json").read_text())
    edit(doc["items"])
    (hdir / "index.json").write_text(json.dumps(doc))


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_a_stream_cut_short_stays_cut_and_loses_its_secrets(tmp_path):
    raw = stream(frame("file", "/sys/class/net/eth0/statistics/rx_errors", b"17\n"),
                 frame("command", "cmd:env", b"PGPASSWORD=hunter2xyz\nHOME=/root\n"),
                 # cut a byte before the end of a 20-byte item: redacted, its start is longer than the whole item
                 frame("command", "cmd:conf", b"password=cutsecret9", declared=20), complete=False)
    cap = capture(tmp_path / "cap", {"gpu001": raw}, HostStatus.PARTIAL)
    bundle = build_bundle(cap, tmp_path / "b.tgz", extra={}, mtime=MTIME, redactor=Redactor())
    new = members(bundle.path)["capture/hosts/gpu001/stream.fc1"]
    assert b"hunter2xyz" not in new and b"cutsecret9" not in new
    before, after = parse_stream(raw), parse_stream(new)
    assert [i.source for i in after.items] == [i.source for i in before.items] == ["/sys/class/net/eth0/statistics/"
                                                                                    "rx_errors", "cmd:env"]
    assert after.error.startswith("stream cut inside item cmd:conf")
    assert after.items[1].content == b"PGPASSWORD=[REDACTED:password]\nHOME=/root\n"
    loaded = load_capture(extract_bundle(bundle.path, tmp_path / "x"), verify=True)
    assert loaded.hosts[0].status == HostStatus.PARTIAL


def test_format_1_items_follow_their_redacted_paths(tmp_path):
    home = b"export GITHUB_TOKEN=ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r\n"
    uname = b"Linux gpu001 6.8.0-45-generic x86_64\n"
    items = [("/home/alice/.bashrc", "file", "s0/fs/home/alice/.bashrc", home),
             ("cmd:uname", "command", "s0/cmd/uname", uname)]
    root = tmp_path / "cap"
    host = root / "hosts" / "gpu001"
    for _, _, path, data in items:
        (host / path).parent.mkdir(parents=True, exist_ok=True)
        (host / path).write_bytes(data)
    index = [{"source": s, "snapshot": 0, "kind": k, "collector": "identity", "path": p, "bytes": len(d),
              "sha256": hashlib.sha256(d).hexdigest(), "rc": 0, "offset": None} for s, k, p, d in items]
    (host / "index.json").write_text(json.dumps({"items": index}, indent=2))
    (host / "host.json").write_text(json.dumps({"host": "gpu001", "status": "ok", "transport": "local"}))
    (root / "capture.json").write_text(json.dumps({"format": "fabricase-capture", "format_version": 1,
                                                   "created_at": "2026-12-01T00:00:00Z", "hosts": ["gpu001"]}))
    assert load_capture(root, verify=True)
    redactor = Redactor(pseudonymize=True, key=KEY, hosts=["gpu001"])
    bundle = build_bundle(root, tmp_path / "b.tgz", extra={}, mtime=MTIME, redactor=redactor)
    content = members(bundle.path)
    token, user = redactor.host_pseudonym("gpu001"), redactor.redact_path("/home/alice")[6:]
    assert f"capture/hosts/{token}/s0/fs/home/{user}/.bashrc" in content
    assert not [name for name in content if "alice" in name or "gpu001" in name]
    loaded = load_capture(extract_bundle(bundle.path, tmp_path / "x"), verify=True)
    by_source = {it.source: it for it in loaded.hosts[0].items}
    assert loaded.hosts[0].read(by_source[f"/home/{user}/.bashrc"]) == b"export GITHUB_TOKEN=[REDACTED:github-token]\n"
    assert loaded.hosts[0].read(by_source["cmd:uname"]) == f"Linux {token} 6.8.0-45-generic x86_64\n".encode()


def test_node_sets_become_the_hosts_tokens_when_hosts_are_pseudonymized(tmp_path):
    from fabricase.targets import parse_nodeset

    cap = capture(tmp_path / "cap", {"gpu001": stream(), "gpu002": stream()})
    plain = build_bundle(cap, tmp_path / "a.tgz", extra={}, mtime=MTIME, redactor=Redactor())
    redactor = Redactor(pseudonymize=True, key=KEY, hosts=["gpu001", "gpu002"])
    pseudo = build_bundle(cap, tmp_path / "b.tgz", extra={}, mtime=MTIME, redactor=redactor)
    assert json.loads(members(plain.path)["capture/capture.json"])["targets"]["nodeset"] == "gpu[001-002]"
    doc = json.loads(members(pseudo.path)["capture/capture.json"])
    tokens = [redactor.host_pseudonym("gpu001"), redactor.host_pseudonym("gpu002")]
    # The same tokens as the host folders, and still a node set `fabricase collect --hosts` reads.
    assert doc["targets"]["nodeset"] == ",".join(tokens)
    assert sorted(parse_nodeset(doc["targets"]["nodeset"])) == sorted(tokens)
    assert json.loads(members(pseudo.path)["redaction.json"])["members"]["capture/capture.json"]["nodeset"] == 1


@pytest.mark.parametrize("nodeset", ["@gpus", "gpu[001-002],login07", "gpu[001-100]"])
def test_node_sets_that_cannot_be_rewritten_whole_go(nodeset):
    redactor = Redactor(pseudonymize=True, key=KEY, hosts=["gpu001", "gpu002"])
    assert redactor.redact_nodeset("capture/capture.json", nodeset) == "[REDACTED:nodeset]"


def test_binary_files_keep_every_byte_but_the_secret(tmp_path):
    cap = capture(tmp_path / "cap", {"gpu001": stream()})
    blob = bytes(range(256)) + b" token: s3cr3t-Value-99 " + bytes(range(255, -1, -1))
    (cap / "blob.bin").write_bytes(blob)
    bundle = build_bundle(cap, tmp_path / "b.tgz", extra={"core.bin": blob}, mtime=MTIME, redactor=Redactor())
    want = bytes(range(256)) + b" token: [REDACTED:secret] " + bytes(range(255, -1, -1))
    content = members(bundle.path)
    assert content["capture/blob.bin"] == content["core.bin"] == want
    assert verify_bundle(bundle.path).ok


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("version", [2, 3])
def test_an_index_that_points_nowhere_stops_the_bundle(tmp_path, version):
    cap = capture(tmp_path / "cap", {"gpu001": stream(frame("command", "cmd:env", b"A=1\n"))}, version=version)

    def shift(items: list[dict]) -> None:
        items[0]["offset"] += 1

    _edit_index(cap, "gpu001", shift)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BundleError, match="does not point at an item of the stream") as err:
        build_bundle(cap, out / "b.tgz", extra={}, mtime=MTIME, redactor=Redactor())
    assert "\n" not in str(err.value) and "cmd:env" in str(err.value)
    assert _leftovers(out) == []  # neither bundle nor the redacted copy


def test_a_host_the_redactor_was_not_told_about_stops_the_bundle(tmp_path):
    cap = capture(tmp_path / "cap", {"gpu001": stream(), "gpu002": stream()})
    with pytest.raises(BundleError, match="not among the hosts given for pseudonymization") as err:
        build_bundle(cap, tmp_path / "b.tgz", extra={}, mtime=MTIME,
                     redactor=Redactor(pseudonymize=True, key=KEY, hosts=["gpu001"]))
    assert err.value.where == str(cap / "hosts" / "gpu002")


def test_redaction_json_cannot_be_an_extra(tmp_path):
    cap = capture(tmp_path / "cap", {"gpu001": stream()})
    with pytest.raises(BundleError, match="redaction report"):
        build_bundle(cap, tmp_path / "b.tgz", extra={"redaction.json": b"{}"}, mtime=MTIME, redactor=Redactor())
    # Without a redactor the name is free, as before.
    assert build_bundle(cap, tmp_path / "c.tgz", extra={"redaction.json": b"{}"}, mtime=MTIME).members


@pytest.mark.parametrize("version", [2, 3])
def test_a_capture_without_secrets_bundles_the_same_files_plus_the_report(tmp_path, version):
    cap = capture(tmp_path / "cap", {"gpu001": stream(frame("file", "/proc/net/snmp", b"Ip: 1 64\n"))},
                  version=version)
    index = "capture/hosts/gpu001/" + ("index.json" if version == 2 else INDEX_FILE)
    plain = members(build_bundle(cap, tmp_path / "a.tgz", extra={"x.md": b"x\n"}, mtime=MTIME).path)
    redacted = members(build_bundle(cap, tmp_path / "b.tgz", extra={"x.md": b"x\n"}, mtime=MTIME,
                                    redactor=Redactor()).path)
    report = json.loads(redacted.pop("redaction.json"))
    assert (report["totals"], report["members"], report["pseudonymized"]) == ({}, {}, False)
    for name in set(plain) - {"MANIFEST.json", index, "capture/capture.json"}:
        assert redacted[name] == plain[name], name
    # The index and capture.json are re-encoded, with the same content.
    assert json.loads(redacted["capture/capture.json"]) == json.loads(plain["capture/capture.json"])
    if version == 2:
        assert json.loads(redacted[index]) == json.loads(plain[index])
    else:
        assert index_records(redacted[index]) == index_records(plain[index])
