"""Acceptance (issue 14): a seeded corpus of 300+ secrets in 40+ formats, planted in hosts' kernel logs, an NCCL
log, the symptom, comments and notes. After a full `open` (the static outbox, and a local Zendesk stand-in),
`comment`, `attach --note` and `resolve --note`, none appears in anything that left or in the tracker
database; look-alikes in a comment (digests, GUIDs, GPU UUIDs, firmware) come through unchanged."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from corpus import _rewrite
from secret_corpus import lookalikes, secret_corpus

from fabricase.capturedir import add_inputs, host_capture_from_stream, write_host
from fabricase.cli import cli
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus

sys.path.insert(0, str(Path(__file__).parents[1] / "providers"))

from desks.fakes import ZENDESK_EMAIL, ZENDESK_TOKEN, FakeZendesk  # noqa: E402

SEED = 14


class RecordingZendesk(FakeZendesk):
    """The Zendesk stand-in, keeping every byte it was sent (paths, query strings and bodies)."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[bytes] = []

    def handle(self, method, target, headers, body):
        self.received.append(target.encode() + b"\n" + body)
        return super().handle(method, target, headers, body)


def _plant(capture: Path, hosts: list[str], secrets: list) -> None:
    """Every second secret into some host's kernel log, the others into an NCCL log given as an input."""
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "ethtool"])), interval_s=3.0)
    kernel: dict[str, list[str]] = {}
    for n, s in enumerate(secrets[::2]):
        kernel.setdefault(hosts[n % len(hosts)], []).append(s.text.rstrip("\n"))
    for host, lines in kernel.items():
        raw = (capture / "hosts" / host / "stream.fc1").read_bytes()
        raw = _rewrite(raw, SimpleNamespace(kernel=lines, frames=[]))
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "harness"
        write_host(capture, hc, raw)
    nccl = capture.parent / "job-stdout.log"
    nccl.write_text("".join(f"{hosts[0]}:4242:4242 [0] NCCL INFO train: {s.text.rstrip()}\n"
                            for s in secrets[1::2]))
    add_inputs(capture, "nccl-log", [nccl])
    nccl.unlink()


def _run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, (args, result.output)
    return result.stdout


def _tar_members(data: bytes) -> list[bytes]:
    """The bytes of every member of a gzip'd tar (and of the tars inside it: a part holds a slice)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            return [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    except (tarfile.TarError, gzip.BadGzipFile, OSError, EOFError):
        return [data]


def _left(root: Path) -> list[tuple[str, bytes]]:
    """Every file under root, and each member of every bundle among them."""
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            out.append((str(path.relative_to(root)), data))
            if data[:2] == b"\x1f\x8b":
                out += [(f"{path.name}!{k}", m) for k, m in enumerate(_tar_members(data))]
    return out


def _leaks(blobs: list[tuple[str, bytes]], secrets: list) -> list[str]:
    return sorted({f"{s.kind} in {name}" for s in secrets for name, data in blobs if s.value.encode() in data})


@pytest.fixture(scope="module")
def planted(corpus, tmp_path_factory):
    secrets = secret_corpus(SEED)
    assert len(secrets) >= 300 and len({s.kind for s in secrets}) >= 40
    capture = tmp_path_factory.mktemp("leak") / "capture"
    shutil.copytree(corpus.root, capture)
    # the symptom, comments and notes carry 30 secrets between them; the capture the rest
    said, in_capture = secrets[:30], secrets[30:]
    _plant(capture, corpus.hosts, in_capture)
    return SimpleNamespace(capture=capture, secrets=secrets, said=said, all=secrets + corpus.secrets)


def _said(planted, k: int) -> str:
    return "\n".join(s.text.rstrip("\n") for s in planted.said[k::5])


@pytest.mark.parametrize("desk", ["outbox", "zendesk"])
def test_no_secret_leaves_or_stays_in_the_tracker(planted, tmp_path, monkeypatch, desk):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("FABRICASE_HOME", str(home))
    for name in ("FABRICASE_DEBUG", "FABRICASE_DB", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    fake = None
    if desk == "zendesk":
        monkeypatch.setenv("FABRICASE_ZENDESK_EMAIL", ZENDESK_EMAIL)
        monkeypatch.setenv("FABRICASE_ZENDESK_TOKEN", ZENDESK_TOKEN)
        fake = RecordingZendesk()
        base = fake.start()
        (home / "config.toml").write_text(f'[providers.static]\ndesk = "zendesk"\n\n'
                                          f'[providers.static.zendesk]\nbase_url = "{base}"\n')
    try:
        capture = tmp_path / "capture"
        shutil.copytree(planted.capture, capture)
        drafted = _run("draft", str(capture), "--symptom", _said(planted, 0))
        opened = json.loads(_run("open", "--replay", str(capture), "--symptom", _said(planted, 0),
                                 "--provider", "static", "--json"))
        esc = opened["escalation_id"]
        _run("comment", esc, _said(planted, 1))
        note_file = tmp_path / "ibdiagnet.txt"
        note_file.write_text(_said(planted, 2) + "\n")
        _run("attach", esc, str(note_file), "--note", _said(planted, 3))
        note_file.unlink()
        _run("resolve", esc, "--note", _said(planted, 4))
        shown = _run("show", esc) + _run("show", esc, "--json")
    finally:
        if fake is not None:
            fake.stop()
    blobs = _left(home) + [("draft", drafted.encode()), ("show", shown.encode())]
    if fake is not None:
        blobs += [(f"request {k}", b) for k, b in enumerate(fake.received)]
        blobs += [(f"request {k}!{j}", m) for k, b in enumerate(fake.received) for j, m in
                  enumerate(_tar_members(b[b.index(b"\n") + 1:]))]
    # the capture directory is the user's own (the raw text stays there); everything else left or was stored
    assert _leaks(blobs, planted.all) == []
    assert any(b"[REDACTED:" in data for name, data in blobs if name.endswith((".db", "tracker.db")))


def test_look_alikes_survive_a_comment(planted, tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    capture = tmp_path / "capture"
    shutil.copytree(planted.capture, capture)
    opened = json.loads(_run("open", "--replay", str(capture), "--symptom", "hang", "--json"))
    kept = [x.text for x in lookalikes(SEED)]
    assert len(kept) >= 100
    _run("comment", opened["escalation_id"], "\n".join(kept))
    shown = json.loads(_run("show", opened["escalation_id"], "--json"))
    [comment] = [e["detail"] for e in shown["events"] if e["kind"] == "comment"]
    altered = [t for t in kept if t not in comment]
    assert altered == []
