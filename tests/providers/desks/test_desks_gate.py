"""Issue 14, at the bytes level: no secret reaches a desk (Jira Service Management, Zendesk, mail) through any of
its outbound methods.

Fresh random secrets (fakes.py `plant`) go into the draft's title and body, the bundle file, a comment, an attach
note and file, a resolve note and a reopen note. Each desk then talks to its local stand-in over real sockets:
the HTTP fakes keep every request as it arrived (`FakeDesk.wire`: target and body, multipart uploads included),
the SMTP server every message (read raw, and each MIME part decoded: attachments travel base64). No secret may be
in any of them, each place's canary and `[REDACTED:` must be. With the gate bypassed (`gate.text` made the
identity) every place must leak."""

from __future__ import annotations

import email
import email.policy

import pytest

from desks.fakes import assert_wire, plant_all
from fabricase.models import Severity, TicketDraft
from fabricase.redact import gate

SEED = 14
PLACES = ("title", "body", "bundle", "comment", "attach-note", "attach-file", "resolve-note", "reopen-note")


def _mail_wire(envelopes: list) -> list[bytes]:
    """Each message as it arrived, then its subject and each of its parts decoded."""
    out = []
    for k, envelope in enumerate(envelopes):
        out.append(f"DATA {k}\n".encode() + envelope.content)
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        out.append(f"SUBJECT {k}\n{msg['Subject']}".encode())
        out += [f"PART {k}\n".encode() + (part.get_payload(decode=True) or b"") for part in msg.walk()
                if not part.is_multipart()]
    return out


def _lifecycle(desk, planted, tmp_path) -> None:
    bundle = tmp_path / "FC-1-evidence.txt"
    bundle.write_text(planted["bundle"].text)
    log = tmp_path / "nccl.log"
    log.write_text(planted["attach-file"].text)
    draft = TicketDraft(provider="static", title=planted["title"].line, body=planted["body"].text,
                        severity=Severity.MAJOR, hosts=["gpu001"], components=["rdma:mlx5_3/1"])
    case_id = desk.file("FC-1", draft, bundle).case_id
    desk.comment(case_id, planted["comment"].text)
    desk.attach(case_id, [log], planted["attach-note"].text)
    desk.resolve(case_id, planted["resolve-note"].text)
    desk.reopen(case_id, planted["reopen-note"].text)


@pytest.fixture(params=[True, False], ids=["gated", "gate-bypassed"])
def gated(request, monkeypatch) -> bool:
    if not request.param:
        monkeypatch.setattr(gate, "text", lambda value: value)
    return request.param


@pytest.mark.parametrize("name", ["jira", "zendesk"])
def test_no_secret_reaches_an_http_desk_in_any_request(desks, request, tmp_path, gated, name):
    fake = request.getfixturevalue(name)
    planted = plant_all(SEED, PLACES)
    _lifecycle(desks(name, request.getfixturevalue(f"{name}_settings")), planted, tmp_path)
    assert_wire(fake.wire, planted, gated=gated)


def test_no_secret_reaches_the_mail_server_in_any_message(desks, smtp_server, tmp_path, gated):
    planted = plant_all(SEED, PLACES)
    settings = {"smtp_host": "127.0.0.1", "smtp_port": smtp_server.port, "from": "fabric-oncall@example.com",
                "to": ["support@gpu-cloud.example"]}
    _lifecycle(desks("email", settings), planted, tmp_path)
    assert len(smtp_server.messages) == 5  # the case, then comment, attach, resolve and reopen replies
    assert_wire(_mail_wire(smtp_server.messages), planted, gated=gated)
