"""The email desk: the case goes by mail (SMTP, smtplib) to a provider's support address.

    [providers.static]
    desk = "email"
    [providers.static.email]
    smtp_host = "smtp.example.com"
    smtp_port = 587
    starttls = true
    from = "fabric-oncall@example.com"
    to = ["support@gpu-cloud.example"]
    cc = []                                     # optional

Credentials, only when the server wants a login: FABRICASE_SMTP_USER and FABRICASE_SMTP_PASSWORD.
The server's ESMTP SIZE (its largest message) decides how much bundle one message can carry
(bundler.limits.smtp_attachment_bytes); a larger bundle is split into parts, one message each, the later
ones replies to the first. What was sent is recorded in DATA/outbox/<escalation id>/email.json, so filing again
sends nothing twice and completes a filing that stopped between messages. Mail has no status to read back:
the provider answers in your mailbox.
"""

from __future__ import annotations

import json
import mimetypes
import smtplib
import socket
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import Any

from fabricase.bundler.limits import MIB, DeskLimits, smtp_attachment_bytes
from fabricase.errors import ConfigError, FabricaseError, ProviderError
from fabricase.models import EscalationState, TicketDraft
from fabricase.providers.base import CheckResult, Feature, FilingResult, PlannedRequest, attachment_ref
from fabricase.providers.desks.base import Desk, subject_for
from fabricase.providers.desks.outbox import RESOLVED_MARKER, write_atomic
from fabricase.providers.retry import call_with_retries

__all__ = ["CASE_PREFIX", "EmailDesk", "SENT_STATUS"]

CASE_PREFIX = "email-"
SENT_STATUS = "sent"
RECORD = "email.json"


def _transient(exc: BaseException) -> bool:
    """SMTP 4xx replies are temporary by definition (RFC 5321 4.2.1); a dropped connection may pass too."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(400 <= code < 500 for code, _ in exc.recipients.values())
    if isinstance(exc, smtplib.SMTPResponseException):
        return 400 <= exc.smtp_code < 500
    return isinstance(exc, smtplib.SMTPServerDisconnected | socket.timeout)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return f"login refused ({exc.smtp_code}): check FABRICASE_SMTP_USER and FABRICASE_SMTP_PASSWORD"
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return "recipients refused: " + ", ".join(f"{who} ({code})" for who, (code, _) in exc.recipients.items())
    if isinstance(exc, smtplib.SMTPResponseException):
        said = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        what = "message too large for the server" if exc.smtp_code == 552 else "server refused"
        return f"{what} ({exc.smtp_code} {' '.join(said.split())})"
    if isinstance(exc, ConnectionRefusedError | socket.gaierror | TimeoutError | OSError) and not isinstance(
            exc, smtplib.SMTPException):
        return f"cannot reach the SMTP server: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)
    return " ".join(str(exc).split()) or type(exc).__name__


class EmailDesk(Desk):
    name = "email"
    unsupported = {Feature.SYNC: "mail has no status to read back: the provider answers in your mailbox"}
    credentials_env = ("FABRICASE_SMTP_USER", "FABRICASE_SMTP_PASSWORD")
    template = "ticket_email.md.j2"  # severity: fabricase's own scale (mail has none)
    limits = DeskLimits(
        "email",
        body_max_chars=None,  # SMTP has no body length of its own; SIZE covers the whole message
        # cloud-apis.md :756-757 "the receiving server advertises SIZE"; "Common provider caps are around 25 MB
        # [UNVERIFIED]": the attachment bytes a 25 MiB message holds (attachment_limit reads the server's SIZE)
        attachment_max_bytes=smtp_attachment_bytes(25 * MIB),
    )

    # --- settings and the connection ---------------------------------------------------------------------

    def _addresses(self, key: str, required: bool) -> list[str]:
        value = self.setting(key, [] if not required else None, required=required, kind=(str, list))
        items = [value] if isinstance(value, str) else list(value)
        if not all(isinstance(a, str) and "@" in a for a in items) or (required and not items):
            raise ConfigError(f"[providers.static.email] {key} must be an address or a list of addresses")
        return items

    def _call(self, operation: str, fn):
        return call_with_retries(fn, provider=self.where, operation=operation, transient=_transient,
                                 describe=_describe, sleep=self.ctx.sleep)

    def _connect(self) -> smtplib.SMTP:
        host = self.setting("smtp_host", "localhost")
        port = self.setting("smtp_port", 25, kind=int)
        timeout = float(self.setting("timeout_s", 30.0, kind=(int, float)))

        def connect() -> smtplib.SMTP:
            smtp = smtplib.SMTP(host, port, timeout=timeout)
            try:
                smtp.ehlo()
                if self.setting("starttls", False, kind=bool):
                    smtp.starttls()
                    smtp.ehlo()
                user, password = (self.ctx.env.get(n, "") for n in self.credentials_env)
                if user and password:
                    smtp.login(user, password)
            except BaseException:
                smtp.close()
                raise
            return smtp

        return self._call(f"connect to {host}:{port}", connect)

    @staticmethod
    def attachment_limit(smtp: smtplib.SMTP) -> int | None:
        """The attachment bytes one message can carry: from the server's SIZE, else the email desk's default."""
        size = smtp.esmtp_features.get("size", "").strip()
        if size.isdigit() and int(size) > 0:
            return smtp_attachment_bytes(int(size))
        return EmailDesk.limits.attachment_max_bytes

    # --- the record of what was sent ---------------------------------------------------------------------

    def _record(self, escalation_id: str) -> dict[str, Any] | None:
        path = self.case_folder(escalation_id) / RECORD
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ProviderError(f"cannot read the record of sent mail: {exc}", where=str(path)) from exc

    def _save(self, escalation_id: str, record: dict[str, Any]) -> None:
        folder = self.case_folder(escalation_id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")
        except OSError as exc:
            raise ProviderError(f"cannot write to the outbox: {exc.strerror or exc}", where=str(folder)) from exc

    def _escalation_of(self, case_id: str) -> tuple[str, dict[str, Any]]:
        if not case_id.startswith(CASE_PREFIX):
            raise ProviderError(f"not an email case id (expected {CASE_PREFIX}<escalation>)", where=case_id)
        escalation_id = case_id.removeprefix(CASE_PREFIX)
        record = self._record(escalation_id)
        if record is None or not record.get("complete"):
            raise ProviderError("no such email case", where=str(self.case_folder(escalation_id)))
        return escalation_id, record

    def _result(self, escalation_id: str) -> FilingResult:
        return FilingResult(case_id=f"{CASE_PREFIX}{escalation_id}", raw_status=SENT_STATUS,
                            state=EscalationState.FILED, location=str(self.case_folder(escalation_id)))

    # --- messages ----------------------------------------------------------------------------------------

    def _message(self, subject: str, body: str, files: list[Path], *, escalation_id: str,
                 reply_to: str | None = None) -> EmailMessage:
        sender = self._addresses("from", True)[0]
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = ", ".join(self._addresses("to", True))
        cc = self._addresses("cc", False)
        if cc:
            msg["Cc"] = ", ".join(cc)
        msg["Subject"] = subject
        msg["Date"] = formatdate(self.ctx.now().timestamp(), localtime=False)
        msg["Message-ID"] = make_msgid(idstring=escalation_id, domain=sender.rsplit("@", 1)[1])
        if reply_to:
            msg["In-Reply-To"] = reply_to
            msg["References"] = reply_to
        msg.set_content(body if body.endswith("\n") else body + "\n")
        for f in files:
            kind = mimetypes.guess_type(f.name)[0] or "application/octet-stream"
            maintype, _, subtype = kind.partition("/")
            msg.add_attachment(f.read_bytes(), maintype=maintype, subtype=subtype, filename=f.name)
        return msg

    def _send(self, smtp: smtplib.SMTP, msg: EmailMessage) -> None:
        self._call(f"send {msg['Subject']!r}", lambda: smtp.send_message(msg))

    def plan(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        return [PlannedRequest("smtp", "send_message", {
            "from": self._addresses("from", True)[0], "to": self._addresses("to", True),
            "cc": self._addresses("cc", False), "subject": subject_for(escalation_id, draft.title),
            "body_chars": len(draft.body),
            "attachments": [attachment_ref(Path(bundle_path))] if bundle_path is not None else []})]

    def find(self, escalation_id: str) -> FilingResult | None:
        record = self._record(escalation_id)
        return self._result(escalation_id) if record and record.get("complete") else None

    def file(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        record = self._record(escalation_id) or {}
        if record.get("complete"):
            return self._result(escalation_id)
        subject = subject_for(escalation_id, draft.title)
        body = self.fitted_body(draft)
        files = [Path(bundle_path)] if bundle_path is not None else []
        smtp = self._connect()
        try:
            with self.deliverable(files, self.attachment_limit(smtp)) as parts:
                record = self._send_parts(smtp, escalation_id, subject, body, parts, record)
            record["complete"] = True
            self._save(escalation_id, record)
            write_atomic(self.case_folder(escalation_id) / "ticket.md", f"{subject}\n\n{body}\n")
        finally:
            _quit(smtp)
        return self._result(escalation_id)

    def _send_parts(self, smtp: smtplib.SMTP, escalation_id: str, subject: str, body: str, parts: list[Path],
                    record: dict[str, Any]) -> dict[str, Any]:
        """One message with the body and the first file, then one reply per further part; each recorded as it
        goes, so that a filing interrupted between messages resumes where it stopped."""
        record = {"subject": subject, "sent": [], **record}
        groups = [parts[:1], *[[p] for p in parts[1:]]] if parts else [[]]
        for index, group in enumerate(groups):
            names = [p.name for p in group]
            if index < len(record["sent"]):
                continue  # sent before an interruption
            first = record.get("message_id")
            if first is None:
                msg = self._message(subject, body, group, escalation_id=escalation_id)
            else:
                note = (f"Part {index + 1} of {len(groups)} of the evidence bundle ({', '.join(names)}). Each part "
                        "holds PART.json, which gives the shell line that joins them back into the bundle.")
                msg = self._message(f"Re: {subject}", note, group, escalation_id=escalation_id, reply_to=first)
            self._send(smtp, msg)
            record.setdefault("message_id", msg["Message-ID"])
            record["sent"].append(names)
            self._save(escalation_id, record)
        return record

    def _reply(self, case_id: str, text: str, files: list[Path] = ()) -> None:
        escalation_id, record = self._escalation_of(case_id)
        smtp = self._connect()
        try:
            with self.deliverable(list(files), self.attachment_limit(smtp)) as parts:
                groups = [[p] for p in parts] or [[]]
                for index, group in enumerate(groups):
                    note = text if index == 0 else f"Part {index + 1} of {len(groups)}: {group[0].name}"
                    self._send(smtp, self._message(f"Re: {record['subject']}", note, group,
                                                   escalation_id=escalation_id, reply_to=record["message_id"]))
        finally:
            _quit(smtp)

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        self._reply(case_id, note, [Path(f) for f in files])

    def comment(self, case_id: str, text: str) -> None:
        self._reply(case_id, text)

    def resolve(self, case_id: str, note: str | None) -> None:
        escalation_id, _ = self._escalation_of(case_id)
        self._reply(case_id, "Resolved on our side." + (f"\n\n{note}" if note else ""))
        write_atomic(self.case_folder(escalation_id) / RESOLVED_MARKER, f"{note}\n" if note else "")

    def reopen(self, case_id: str, note: str) -> None:
        escalation_id, _ = self._escalation_of(case_id)
        self._reply(case_id, f"Reopened: the fault is back.\n\n{note}")
        (self.case_folder(escalation_id) / RESOLVED_MARKER).unlink(missing_ok=True)

    def check(self) -> list[CheckResult]:
        results = []
        try:
            sender, to = self._addresses("from", True)[0], self._addresses("to", True)
            results.append(CheckResult("addresses", True, f"from {sender} to {', '.join(to)}"))
            smtp = self._connect()
        except FabricaseError as exc:
            return [*results, CheckResult("smtp server", False, exc.message)]
        try:
            limit = self.attachment_limit(smtp)
            size = smtp.esmtp_features.get("size", "").strip()
            said = f"SIZE {size} bytes" if size else "no SIZE advertised"
            results.append(CheckResult("smtp server", True, f"{said}: up to {limit} bundle bytes a message"))
            code, _ = smtp.noop()
            results.append(CheckResult("session", code == 250, f"NOOP answered {code}"))
        finally:
            _quit(smtp)
        return results


def _quit(smtp: smtplib.SMTP) -> None:
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()

