"""A ticket body cut to a desk's length keeps the summary, the requested action and the bundle id first."""

from __future__ import annotations

from fabricase.escalate import desk_of, fit_draft
from fabricase.models import Severity, TicketDraft


def _draft(findings: int) -> TicketDraft:
    rows = "\n".join(f"| gpu{i:04d} | rdma:mlx5_{i % 8}/1 | symbol errors +{i} |" for i in range(findings))
    body = (
        "One-line summary: symbol errors under leaf-007.\n\n"
        f"## Findings\n\n| host | component | finding |\n|---|---|---|\n{rows}\n\n"
        "## Timeline\n\n- 2026-11-30T00:00:00Z captured\n\n"
        "## Requested action\n\nInvestigate switch leaf-007 (ports to gpu0001-gpu0016).\n\n"
        "## References\n\nBundle id: 0123abcd\n"
    )
    return TicketDraft("aws", "[fabricase] symbol errors", body, Severity.MAJOR, ["gpu0001"], ["switch:leaf-007"])


def test_a_long_body_fits_aws_and_keeps_what_matters():
    draft = _draft(600)
    assert len(draft.body) > 8000
    fitted = fit_draft(draft, desk_of("aws"))
    assert len(fitted.body) <= 8000
    body = fitted.body
    assert body.startswith("One-line summary")
    assert "## Requested action" in body and "Investigate switch leaf-007" in body
    assert "Bundle id: 0123abcd" in body and "ticket.md" in body  # says where the rest is


def test_a_short_body_is_left_alone_and_the_outbox_never_cuts():
    short = _draft(3)
    assert fit_draft(short, "aws") is short
    assert fit_draft(_draft(600), desk_of("static")).body == _draft(600).body
    assert desk_of("static") == "outbox" and desk_of("nobody") == "generic"
