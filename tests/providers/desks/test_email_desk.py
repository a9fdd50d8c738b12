"""The email desk against a real SMTP server on 127.0.0.1 (aiosmtpd), which advertises SIZE."""

from __future__ import annotations

import email
import email.policy
import json

import pytest

from fabricase.errors import ProviderError, UnsupportedError
from fabricase.models import EscalationState
from fabricase.providers.base import Feature


def _settings(box, **more):
    return {"smtp_host": "127.0.0.1", "smtp_port": box.port, "from": "fabric-oncall@example.com",
            "to": ["support@gpu-cloud.example"], **more}


def _parsed(envelope):
    return email.message_from_bytes(envelope.content, policy=email.policy.default)


def _h(msg, name):
    """A header as a reader sees it (a long one is folded after its colon)."""
    return str(msg[name]).strip()


def test_file_comment_attach_resolve_reopen(desks, smtp_server, draft, bundle, paths, tmp_path):
    desk = desks("email", _settings(smtp_server, cc=["fabric-team@example.com"]))
    filed = desk.file("FC-7", draft, bundle)
    assert (filed.case_id, filed.raw_status, filed.state) == ("email-FC-7", "sent", EscalationState.FILED)
    [sent] = smtp_server.messages
    assert sent.rcpt_tos == ["support@gpu-cloud.example", "fabric-team@example.com"]
    msg = _parsed(sent)
    assert _h(msg, "Subject") == "[fabricase FC-7] " + draft.title
    assert "switch:leaf-3, rack:r1" in msg.get_body(("plain",)).get_content()
    [attachment] = list(msg.iter_attachments())
    assert attachment.get_filename() == bundle.name and attachment.get_content() == bundle.read_bytes()
    record = json.loads((paths.outbox / "FC-7" / "email.json").read_text())
    assert record["complete"] and record["message_id"] == _h(msg, "Message-ID")

    desk.comment("email-FC-7", "Reseated the cable; errors continue.")
    log = tmp_path / "nccl.log"
    log.write_text("NCCL WARN\n")
    desk.attach("email-FC-7", [log], "NCCL log")
    desk.resolve("email-FC-7", "optic replaced")
    assert (paths.outbox / "FC-7" / "resolved").read_text() == "optic replaced\n"
    desk.reopen("email-FC-7", "errors are back")
    assert not (paths.outbox / "FC-7" / "resolved").exists()
    replies = [_parsed(m) for m in smtp_server.messages[1:]]
    assert [_h(r, "In-Reply-To") for r in replies] == [_h(msg, "Message-ID")] * 4
    assert all(_h(r, "Subject") == "Re: " + _h(msg, "Subject") for r in replies)
    assert [a.get_filename() for a in replies[1].iter_attachments()] == ["nccl.log"]


def test_filing_again_sends_nothing(desks, smtp_server, draft, bundle):
    desk = desks("email", _settings(smtp_server))
    assert desk.file("FC-1", draft, bundle) == desk.file("FC-1", draft, bundle) == desk.find("FC-1")
    assert len(smtp_server.messages) == 1 and desk.find("FC-2") is None


@pytest.mark.parametrize("smtp_server", [512 * 1024], indirect=True)
def test_a_bundle_over_the_servers_size_goes_in_parts(desks, smtp_server, draft, big_bundle):
    desks("email", _settings(smtp_server)).file("FC-3", draft, big_bundle)
    messages = [_parsed(m) for m in smtp_server.messages]
    names = [a.get_filename() for m in messages for a in m.iter_attachments()]
    assert len(messages) == len(names) >= 2 and all(len(m.content) <= 512 * 1024 for m in smtp_server.messages)
    assert names[0] == f"{big_bundle.name}.part001-of-{len(names):03d}"
    assert all(_h(m, "In-Reply-To") == _h(messages[0], "Message-ID") for m in messages[1:])


def test_status_is_declared_unsupported(desks, smtp_server):
    desk = desks("email", _settings(smtp_server))
    assert Feature.SYNC in desk.unsupported
    from fabricase.providers.static import StaticProvider

    provider = StaticProvider(desks.paths, desk=desk)
    with pytest.raises(UnsupportedError, match="mail has no status to read back"):
        provider.case_status("email-FC-1")


def test_errors_are_one_line(desks, smtp_server, draft, paths):
    with pytest.raises(ProviderError, match=r"connect to 127.0.0.1:9: cannot reach the SMTP server"):
        desks("email", {**_settings(smtp_server), "smtp_port": 9}).file("FC-1", draft, None)
    bad = desks("email", _settings(smtp_server, to=["nobody"]))
    with pytest.raises(Exception, match=r"\[providers.static.email\] to must be an address"):
        bad.file("FC-1", draft, None)
    with pytest.raises(ProviderError, match="not an email case id"):
        desks("email", _settings(smtp_server)).comment("outbox-FC-1", "x")
    with pytest.raises(ProviderError, match="no such email case"):
        desks("email", _settings(smtp_server)).comment("email-FC-404", "x")
    assert smtp_server.messages == [] and not (paths.outbox / "FC-1" / "email.json").exists()


def test_check(desks, smtp_server):
    results = desks("email", _settings(smtp_server)).check()
    assert [(r.check, r.ok) for r in results] == [("addresses", True), ("smtp server", True), ("session", True)]
    assert results[1].detail.startswith(f"SIZE {25 * 1024 * 1024} bytes")
    failed = desks("email", {**_settings(smtp_server), "smtp_port": 9}).check()
    assert failed[-1].ok is False and smtp_server.messages == []
