"""The one redaction gate (redact/gate.py): no provider or desk can be written that sends ungated text or files,
comments and notes are redacted before they reach the desk or the tracker, and what the tracker stores is what
was sent (so a sync matches the desk's copy instead of recording it twice)."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from fabricase import filing
from fabricase.models import EscalationState, Placement
from fabricase.providers import PROVIDERS, provider_class
from fabricase.providers.base import FilingResult, Provider
from fabricase.providers.desks import DESKS, desk_class
from fabricase.providers.desks.base import Desk as DeskBase
from fabricase.redact import gate
from fabricase.tracker import Tracker
from tracker.deskprovider import Desk, DeskProvider, draft_for, paths_at

_ALNUM = string.ascii_letters + string.digits


def _word(rng: random.Random, n: int, alphabet: str = _ALNUM) -> str:
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value):
            return value


def _secrets(seed: int) -> dict[str, tuple[str, str]]:
    """kind -> (a line carrying the secret, the secret): fresh random values, of kinds fabricase always redacts."""
    rng = random.Random(seed)
    aws = _word(rng, 40, _ALNUM + "+/")
    pg = _word(rng, 18)
    pem_line = _word(rng, 64, _ALNUM + "+/")
    ghp = "ghp_" + _word(rng, 36)
    return {
        "aws": (f"aws_secret_access_key = {aws}", aws),
        "pg": (f"PGPASSWORD={pg} psql -h db", pg),
        "pem": (f"-----BEGIN RSA PRIVATE KEY-----\n{pem_line}\n-----END RSA PRIVATE KEY-----", pem_line),
        "github": (f"token {ghp} from CI", ghp),
    }


def _text(secrets: dict[str, tuple[str, str]]) -> str:
    return "Still failing after the reboot.\n" + "\n".join(line for line, _ in secrets.values()) + "\nthanks"


# -- enforcement ----------------------------------------------------------------------------------------------


def _classes() -> list[type]:
    found: list[type] = [Provider, DeskBase]
    for name in PROVIDERS:
        try:
            found.append(provider_class(name))
        except Exception as exc:  # an SDK extra not installed: its class cannot be checked here
            pytest.skip(f"{name}: {exc}")
    found += [desk_class(name) for name in DESKS]
    return found


def test_every_outbound_method_of_every_provider_and_desk_is_gated():
    checked = 0
    for cls in _classes():
        for name in gate.GATED:
            fn = getattr(cls, name, None)
            if fn is None or not callable(fn):
                continue
            assert gate.is_gated(fn), f"{cls.__module__}.{cls.__name__}.{name} sends without the gate"
            checked += 1
    assert checked >= 40  # seven providers and five desks, each with several outbound methods


def test_a_new_provider_cannot_receive_ungated_text_or_files(tmp_path):
    secrets = _secrets(1)
    got: dict[str, object] = {}

    class Careless(Provider):  # written as a careless contributor would: it sends what it is given
        name = "careless"

        def locate(self, hosts):
            return []

        def file_case(self, *, escalation_id, draft, bundle_path):
            got["draft"], got["bundle"] = draft, Path(bundle_path).read_bytes()
            return FilingResult("c-1", "opened", EscalationState.FILED, "here")

        def resolve_case(self, case_id, note):
            got["resolve"] = note

        def comment(self, case_id, text):
            got["comment"] = text

        def attach(self, case_id, files, note):
            got["files"], got["note"] = [Path(f).read_bytes() for f in files], note

        def report_faulty_host(self, placement, findings):
            got["findings"] = findings

    secret_file = tmp_path / "ibdiagnet.log"
    secret_file.write_text(_text(secrets))
    p = Careless(paths_at(tmp_path))
    draft = draft_for()
    draft = type(draft)(**{**draft.__dict__, "body": _text(secrets), "title": f"x {secrets['pg'][0]}"})
    p.file_case(escalation_id="FC-1", draft=draft, bundle_path=secret_file)
    p.comment("c-1", _text(secrets))
    p.attach("c-1", [secret_file], note=_text(secrets))
    p.resolve_case("c-1", _text(secrets))
    sent = repr(got).encode() + b"".join(got["files"]) + got["bundle"]
    for _line, value in secrets.values():
        assert value.encode() not in sent
    assert b"[REDACTED:" in got["bundle"] and secret_file.read_text() == _text(secrets)  # the original is kept
    assert "Still failing" in got["comment"] and got["comment"].count("[REDACTED:") == len(secrets)


def test_a_redacted_bundle_passes_the_gate_as_it_is(tmp_path):
    from fabricase.bundler.archive import build_bundle
    from fabricase.redact import Redactor

    capture = tmp_path / "capture"
    (capture / "hosts").mkdir(parents=True)
    (capture / "capture.json").write_text('{"format": "fabricase-capture"}\n')
    bundle = build_bundle(capture, tmp_path / "b.tar.gz", extra={"ticket.md": b"# t\n"}, mtime=0,
                          redactor=Redactor()).path
    with gate.files([bundle]) as sent:
        assert sent == [bundle]


# -- compressed files and archives ----------------------------------------------------------------------------


def _log(secrets: dict[str, tuple[str, str]]) -> bytes:
    return ("".join(f"[{k:6d}.000000] mlx5_core 0000:{k % 256:02x}:00.0: link up\n" for k in range(2000))
            + _text(secrets) + "\n").encode()


class _Attacher(Provider):
    """A provider that records what attach() was given, as a careless contributor would write it."""

    name = "attacher"

    def __init__(self, paths):
        super().__init__(paths)
        self.sent: list[bytes] = []

    def locate(self, hosts):
        return []

    def file_case(self, *, escalation_id, draft, bundle_path):
        return FilingResult("c-1", "opened", EscalationState.FILED, "here")

    def resolve_case(self, case_id, note):
        pass

    def attach(self, case_id, files, note):
        self.sent += [Path(f).read_bytes() for f in files]


@pytest.mark.parametrize("level", [0, 9])
def test_a_gzip_log_is_redacted_inside_and_still_decompresses(tmp_path, level):
    """Level 0 keeps the text as it is in stored blocks: redacting the raw bytes put markers in them and the
    file no longer decompressed. Level 9 hides the text: redacting the raw bytes found nothing and the secrets
    went out inside it."""
    import gzip

    secrets = _secrets(10 + level)
    log = tmp_path / "nvidia-bug-report.log.gz"
    log.write_bytes(gzip.compress(_log(secrets), compresslevel=level, mtime=1_700_000_000))
    original = log.read_bytes()
    p = _Attacher(paths_at(tmp_path))
    p.attach("c-1", [log], note="the bug report")
    (sent,) = p.sent
    inner = gzip.decompress(sent)
    assert inner.count(b"[REDACTED:") == len(secrets) and b"link up" in inner
    for _line, value in secrets.values():
        assert value.encode() not in inner
    assert log.read_bytes() == original and sent[4:8] == original[4:8]  # the original kept, its mtime too


def test_a_gzip_log_without_secrets_goes_byte_for_byte(tmp_path):
    import gzip

    log = tmp_path / "dmesg.log.gz"
    log.write_bytes(gzip.compress(b"mlx5_core: link up\n" * 5000, mtime=1))
    with gate.files([log]) as sent:
        assert sent[0].read_bytes() == log.read_bytes()


def _tar(path: Path, inner: bytes, mode: str) -> Path:
    import io
    import tarfile

    with tarfile.open(path, mode) as tar:
        info = tarfile.TarInfo("logs/syslog")
        info.size = len(inner)
        tar.addfile(info, io.BytesIO(inner))
    return path


def _zip(path: Path, inner: bytes) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("logs/syslog", inner)
    return path


def _xz(path: Path, inner: bytes) -> Path:
    import lzma

    path.write_bytes(lzma.compress(inner))
    return path


def _bz2(path: Path, inner: bytes) -> Path:
    import bz2

    path.write_bytes(bz2.compress(inner))
    return path


_PACKED = {
    "bzip2": lambda d, b: _bz2(d / "syslog.bz2", b),
    "tar inside gzip": lambda d, b: _tar(d / "logs.tar.gz", b, "w:gz"),
    "tar": lambda d, b: _tar(d / "logs.tar", b, "w"),
    "zip": lambda d, b: _zip(d / "logs.zip", b),
    "xz": lambda d, b: _xz(d / "syslog.xz", b),
}


@pytest.mark.parametrize("kind", sorted(_PACKED))
def test_an_archive_or_other_compressed_file_is_refused_and_nothing_is_sent(tmp_path, kind):
    """An archive of logs (or a bundle that does not verify) went out with its secrets unseen: the gate read
    its compressed bytes as text."""
    from fabricase.errors import ProviderError

    secrets = _secrets(20)
    packed = _PACKED[kind](tmp_path, _log(secrets))
    plain = tmp_path / "ok.txt"
    plain.write_text("nothing secret\n")
    p = _Attacher(paths_at(tmp_path))
    with pytest.raises(ProviderError, match=f"not sent: a {kind} file cannot be checked for secrets") as info:
        p.attach("c-1", [plain, packed], note="x")
    assert p.sent == [] and packed.name in str(info.value) and "\n" not in str(info.value)


def test_a_text_that_starts_like_a_format_is_still_redacted_as_text():
    assert gate.packed_format(b"BZh91AY&SY" + bytes(20)) == "bzip2"
    assert gate.packed_format(b"BZh9\x17rE8P\x90") == "bzip2"
    for head in (b"BZh is the stock symbol\n", b"BZh1 2 3\n", b"PK03 rack 4\n", b"ustar\n" * 100, b""):
        assert gate.packed_format(head) is None, head


def test_a_bundle_without_its_redaction_report_is_refused(tmp_path):
    """Its members were never redacted: it went out with its raw bytes run through the rules (its compressed
    data, where they find nothing). The gate now takes the manifest's word for redaction.json, so a verified
    bundle that does not list it must never pass."""
    from fabricase.bundler.archive import build_bundle
    from fabricase.errors import ProviderError

    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "ibdiagnet.log").write_text(_text(_secrets(40)))
    bundle = build_bundle(capture, tmp_path / "FC-1.tar.gz", extra={}, mtime=0).path
    with pytest.raises(ProviderError, match="does not verify or has no redaction.json") as info, gate.files([bundle]):
        pass
    assert "FC-1.tar.gz" in str(info.value)


def test_a_gzip_that_is_cut_corrupt_or_too_large_once_decompressed_is_refused(tmp_path, monkeypatch):
    import gzip

    from fabricase import caps
    from fabricase.errors import ProviderError

    whole = gzip.compress(_log(_secrets(30)), mtime=1)
    cases = {
        "cut.log.gz": (whole[:-100], "cut short"),
        "corrupt.log.gz": (whole[:20] + bytes(64) + whole[84:], "not a readable gzip file"),
        "trailing.log.gz": (whole + b"junk", "data after it"),
        "bomb.log.gz": (gzip.compress(bytes(200_000), mtime=1), "more than 100000 bytes once decompressed"),
    }
    monkeypatch.setattr(caps, "MAX_MEMBER_BYTES", 100_000)
    for name, (data, why) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ProviderError, match=why), gate.files([tmp_path / name]):
            pass


def test_gating_is_idempotent_and_keeps_digests_and_ids():
    secrets = _secrets(2)
    once = gate.text(_text(secrets))
    assert gate.text(once) == once
    keep = ("sha256 0f343b0931126a20f133d67c2b018a3b5bfee9a4a9a6d8b2d3c1f7a1c0e2d4b6 GPU-1d2f3a4b-5c6d-7e8f-9a0b-"
            "1c2d3e4f5a6b node_guid 0x0c42a10300b1c2d3 fw 28.39.1002 i-0abc1234def567890")
    assert gate.text(keep) == keep


# -- comments and notes, to the desk and in the tracker --------------------------------------------------------


@pytest.fixture
def filed(tmp_path):
    paths = paths_at(tmp_path)
    provider = DeskProvider(paths)
    tracker = Tracker.open(paths)
    esc = tracker.create(provider="desk", title="gpu001 symbol errors", symptom="s", severity="major",
                         hosts=["gpu001"], components=[])
    filing.file_escalation(tracker, provider, esc.id, draft_for(), None)
    yield tracker, provider, esc.id, Desk(paths.data / "desk"), tmp_path
    tracker.close()


def _leaks(root: Path, secrets: dict[str, tuple[str, str]]) -> list[str]:
    """The files under `root` (the desk folder and the tracker's SQLite file among them) holding a secret."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}: {kind}" for kind, (_l, v) in secrets.items() if v.encode() in data]
    return found


def test_comments_and_notes_never_reach_the_desk_or_the_tracker(filed, tmp_path):
    tracker, provider, esc_id, desk, root = filed
    secrets = _secrets(3)
    note_file = tmp_path / "extra.txt"
    filing.comment(tracker, provider, esc_id, _text(secrets))
    note_file.write_text(_text(secrets))
    filing.attach(tracker, provider, esc_id, [note_file], _text(secrets))
    filing.resolve(tracker, provider, esc_id, _text(secrets))
    filing.reopen(tracker, provider, esc_id, _text(secrets))
    note_file.unlink()  # the user's own file: kept as it was, but it is not the desk's or the tracker's
    assert _leaks(root, secrets) == []
    esc = tracker.get(esc_id)
    comments = [e for e in esc.events if e.kind == "comment"]
    assert comments and all("[REDACTED:" in e.detail for e in comments)
    case = esc.provider_case_id
    assert any("[REDACTED:" in c["body"] for c in desk.comments(case))


def test_what_the_tracker_stores_is_what_the_desk_got(filed):
    tracker, provider, esc_id, desk, _root = filed
    text = _text(_secrets(4))
    filing.comment(tracker, provider, esc_id, text)
    case = tracker.get(esc_id).provider_case_id
    [posted] = [c["body"] for c in desk.comments(case)]
    [stored] = [e.detail for e in tracker.get(esc_id).events if e.kind == "comment"]
    assert posted.strip() == stored
    filing.sync(tracker, lambda _name: provider, escalations=[esc_id])
    comments = [e for e in tracker.get(esc_id).events if e.kind == "comment"]
    assert len(comments) == 1  # the desk's copy matched to ours: the same, redacted, text


def test_the_symptom_and_title_are_stored_redacted(tmp_path):
    secrets = _secrets(5)
    with Tracker.open(paths_at(tmp_path)) as tracker:
        esc = tracker.create(provider="desk", title=f"hang {secrets['github'][0]}", symptom=_text(secrets),
                             severity="major", hosts=["gpu001"], components=[])
        assert "[REDACTED:" in esc.symptom and "[REDACTED:" in esc.title
    assert _leaks(tmp_path, secrets) == []


def test_faulty_host_findings_are_gated():
    from fabricase.models import Finding, Severity

    secrets = _secrets(6)
    got = {}

    class Reporter(DeskProvider):
        unsupported = {}

        def report_faulty_host(self, placement, findings):
            got["findings"] = findings

    finding = Finding(kind="kernel.xid", severity=Severity.CRITICAL, host="gpu001", component="gpu:0",
                      summary=_text(secrets))
    Reporter(paths_at(Path("/nonexistent"))).report_faulty_host(Placement(host="gpu001", provider="desk"),
                                                                [finding])
    [sent] = got["findings"]
    assert all(v not in sent.summary for _l, v in secrets.values()) and "[REDACTED:" in sent.summary


def test_a_key_spread_over_findings_is_redacted_in_the_joined_description():
    from fabricase.faulty import describe
    from fabricase.models import Finding, Severity
    from fabricase.providers import gcp_topology

    rng = random.Random(7)
    body = [_word(rng, 64, _ALNUM + "+/") for _ in range(3)]
    parts = ["-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----"]
    findings = [Finding(kind="kernel.log", severity=Severity.MAJOR, host="gpu001", component=f"c{k}", summary=p)
                for k, p in enumerate(parts)]
    described = [describe("fabricase FC-1", [f"{f.severity}: {f.component}: {f.summary}" for f in findings]),
                 *(text for _b, text in gcp_topology._reasons([("PERFORMANCE", f) for f in findings]))]
    for text in described:
        assert not any(line in text for line in body), text


def test_a_case_url_is_stored_whole(tmp_path):
    class WithUrl(DeskProvider):
        def file_case(self, *, escalation_id, draft, bundle_path):
            result = super().file_case(escalation_id=escalation_id, draft=draft, bundle_path=bundle_path)
            return FilingResult(result.case_id, result.raw_status, result.state,
                                f"https://support.example.com/cases/{result.case_id}")

    paths = paths_at(tmp_path)
    with Tracker.open(paths) as tracker:
        esc = tracker.create(provider="desk", title="t", symptom="s", severity="major", hosts=["gpu001"],
                             components=[])
        filed = filing.file_escalation(tracker, WithUrl(paths), esc.id, draft_for(), None)
        assert str(filed.ticket_path).startswith("https://support.example.com/cases/case-")
