"""The ticket body fitted to a desk's length limit (bundler/limits.py): the most important section first, cut at
section then line boundaries, never inside a table row or an open code block, ending with one line saying what
was left out and that the whole text is in the bundle's ticket.md."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from fabricase.errors import BundleError
from fabricase.models import TicketDraft

__all__ = ["fit_body", "fit_ticket", "markdown_sections"]

SECTION_SEP = "\n\n"
NOTE_NAMES = 4  # sections named in the cut note; the rest are counted

# Blocks a cut must not break: Markdown fences (``` or ~~~) and Jira {noformat}/{code} blocks.
_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_JIRA_BLOCK = re.compile(r"^\{(noformat|code)(?::[^}]*)?\}\s*$")
_MD_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_JIRA_HEADING = re.compile(r"^h[1-6]\.\s+(.*?)\s*$")
_UNDERLINE = re.compile(r"^(?:-{3,}|={3,})\s*$")  # a plain-text heading's underline (markup "text")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


class _Blocks:
    """Tracks whether a line is inside a fenced block, and the line that would close it."""

    def __init__(self) -> None:
        self.closer = ""  # the line that closes the open block, "" outside one
        self._closes: re.Pattern[str] | None = None
        self.just_opened = False

    def feed(self, line: str) -> None:
        self.just_opened = False
        if self._closes is not None:
            if self._closes.match(line):
                self._closes, self.closer = None, ""
            return
        if m := _MD_FENCE.match(line):
            marker = m.group(1)
            self._closes = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$")
            self.closer, self.just_opened = marker, True
        elif m := _JIRA_BLOCK.match(line):
            self._closes = re.compile(rf"^\{{{m.group(1)}\}}\s*$")
            self.closer, self.just_opened = "{" + m.group(1) + "}", True


def _heading(lines: list[str], i: int) -> tuple[str, int] | None:
    """(title, lines it takes) when lines[i] starts a heading in any of the ticket markups."""
    line = lines[i]
    if m := _MD_HEADING.match(line) or _JIRA_HEADING.match(line):
        return m.group(1), 1
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if line.strip() and not line.lstrip().startswith("|") and _UNDERLINE.match(nxt):
        return line.strip(), 2
    return None


def markdown_sections(text: str, *, first_title: str = "summary") -> list[tuple[str, str]]:
    """A rendered ticket body split at its headings (Markdown `##`, Jira `h2.`, or underlined plain text),
    never inside a fenced block: [(title, text)], the text starting with its heading. The text before the
    first heading is a section titled `first_title`."""
    lines = text.split("\n")
    sections: list[tuple[str, list[str]]] = [(first_title, [])]
    blocks = _Blocks()
    for i, line in enumerate(lines):
        found = _heading(lines, i) if not blocks.closer else None
        if found is not None and (sections[-1][1] or len(sections) > 1):
            sections.append((found[0], []))
        elif found is not None:
            sections[0] = (found[0], [])
        blocks.feed(line)
        sections[-1][1].append(line)
    return [(title, _trim("\n".join(body))) for title, body in sections if "\n".join(body).strip()]


def _trim(text: str) -> str:
    """Without leading and trailing blank lines (indentation of the first line is kept)."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def _cut_section(text: str, room: int) -> tuple[str, int, int] | None:
    """The longest head of a section that fits `room` characters and cuts no block: a table keeps its header
    with its separator, an open fence is closed, a heading is not left alone. (text, lines kept, lines)."""
    lines = text.split("\n")
    head = (_heading(lines, 0) or ("", 0))[1]
    blocks = _Blocks()
    best: tuple[str, int, int] | None = None
    paragraph: tuple[str, int, int] | None = None  # the best cut at the end of a paragraph or list item
    length, content = -1, False
    for i, line in enumerate(lines):
        length += len(line) + 1
        if length > room:
            break
        blocks.feed(line)
        content = content or (i >= head and bool(line.strip()))
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        header_alone = line.lstrip().startswith("|") and bool(_TABLE_SEPARATOR.match(nxt)) and not blocks.closer
        if not content or blocks.just_opened or header_alone:
            continue
        kept = lines[: i + 1] + ([blocks.closer] if blocks.closer else [])
        candidate = _trim("\n".join(kept))
        if len(candidate) <= room:
            best = (candidate, i + 1, len(lines))
            if not nxt.strip():
                paragraph = best
    # a whole finding reads better than one cut after its first line, unless that wastes half the room
    if paragraph is not None and best is not None and 2 * len(paragraph[0]) >= len(best[0]):
        return paragraph
    return best


def _title(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _note(limit: int, cut: tuple[str, int, int] | None, omitted: list[str], full_text: str) -> str:
    left = []
    if cut is not None:
        title, kept, total = cut
        left.append(f"the end of \u201c{_title(title)}\u201d ({total - kept} of {total} lines)")
    named = [f"\u201c{_title(t)}\u201d" for t in omitted[:NOTE_NAMES]]
    if len(omitted) > NOTE_NAMES:
        named.append(f"{len(omitted) - NOTE_NAMES} more section{'s' if len(omitted) - NOTE_NAMES > 1 else ''}")
    if named:
        left.append(("the section " if len(omitted) == 1 else "the sections ") + ", ".join(named))
    what = " and ".join(left) if left else "part of the text"
    return f"(Cut to the desk's {limit}-character limit: left out {what}. The full text is in the bundle: {full_text}.)"


def _select(parts: list[tuple[str, str]], budget: int, priority: Sequence[int],
            whole: Callable[[str], bool]) -> tuple[dict[int, str], tuple[str, int, int] | None, list[str]]:
    """The sections that fit `budget`, taken in `priority` order: {index: text}, the cut (title, lines kept,
    lines) of the one section cut at a line, and the titles left out (in body order).

    A `whole` section is kept whole or left out, and once one is left out so are the whole sections after it
    (suspect 6 is not kept without suspect 5); any other section that does not fit is cut at a line and ends
    the selection."""
    kept: dict[int, str] = {}
    used, cut, stopped, whole_stopped = 0, None, False, False
    for i in priority:
        title, text = parts[i]
        sep = len(SECTION_SEP) if kept else 0
        if stopped:
            continue
        if whole(title):
            if not whole_stopped and used + sep + len(text) <= budget:
                kept[i], used = text, used + sep + len(text)
            else:
                whole_stopped = True
            continue
        if used + sep + len(text) <= budget:
            kept[i], used = text, used + sep + len(text)
            continue
        stopped = True
        part = _cut_section(text, budget - used - sep)
        if part is not None:
            kept[i] = part[0]
            cut = (title, part[1], part[2])
    omitted = [title for i, (title, _) in enumerate(parts) if i not in kept]
    return kept, cut, omitted


def _prefix(sections: list[tuple[str, str]], budget: int, priority: Sequence[int] | None = None,
            whole: Callable[[str], bool] = lambda title: False) -> tuple[list[str], tuple[str, int, int] | None,
                                                                       list[str]]:
    """The sections that fit `budget` (the most important first, `priority`; default the order given), in the
    body's order, the one cut at a line, and what was left out."""
    order = list(range(len(sections))) if priority is None else list(priority)
    kept, cut, omitted = _select(sections, budget, order, whole)
    return [kept[i] for i in sorted(kept)], cut, omitted


def fit_body(sections: Sequence[tuple[str, str]], limit: int, *, full_text: str = "ticket.md",
             priority: Sequence[int] | None = None, whole: Callable[[str], bool] = lambda title: False) -> str:
    """The ticket body from (title, text) sections in at most `limit` characters (Python str length: what the
    desks' APIs count). Sections are joined by one blank line; when they do not all fit, the most important
    ones are kept (`priority`: indexes into `sections`, most important first; default: the order given), in
    their order in the body, and the body ends with one line naming what was left out and where the full text
    is. A section whose title `whole` accepts is never cut inside: kept whole or left out."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise BundleError(f"a body limit must be an integer, not {limit!r}")
    parts = [(title, _trim(text)) for title, text in sections if text.strip()]
    full = SECTION_SEP.join(text for _, text in parts)
    if len(full) <= limit:
        return full
    reserve = 0
    if priority is not None:  # indexes into `sections`; the empty ones were dropped from `parts`
        index = [i for i, (_, text) in enumerate(sections) if text.strip()]
        priority = [index.index(i) for i in priority if i in index]
    for _ in range(8):  # the note names what it leaves out, so its length depends on the cut: settle it
        kept, cut, omitted = _prefix(parts, limit - reserve - len(SECTION_SEP), priority, whole)
        note = _note(limit, cut, omitted, full_text)
        if len(note) <= reserve:
            break
        reserve = len(note)
    body = SECTION_SEP.join([*kept, note])
    if len(body) > limit:  # a very small limit: the short note, and what fits beside it
        note = f"(Cut to {limit} characters; full text: {full_text}.)"
        kept = _prefix(parts, limit - len(note) - len(SECTION_SEP), priority, whole)[0]
        body = SECTION_SEP.join([*kept, note])
    if len(body) > limit:
        raise BundleError(f"a {limit}-character body cannot hold even the note saying the ticket was cut")
    return body


# --- summary.json ---------------------------------------------------------------------------------------


# When a ticket body must be cut to a desk's length, what the provider's engineer must read even if nothing else
# fits comes first: the summary, the impact, what we ask for and the bundle that proves it; then the suspects,
# each whole, most severe first; then what was ruled out (no other section says it), then the rest (the hosts,
# whose ids the suspects already carry, and the timeline) in the body's order. The fitted body keeps the body's
# order: only the choice of what stays follows this ranking.
_KEEP_FIRST = ("impact", "requested action", "references")
_AFTER_SUSPECTS = ("ruled out",)


def _ticket_priority(sections: Sequence[tuple[str, str]], is_suspect: Callable[[str], bool]) -> list[int]:
    titles = [t.strip().lower() for t, _ in sections]
    first = [0] + [i for i, t in enumerate(titles) if i and t.startswith(_KEEP_FIRST)]
    first += [i for i, (t, _) in enumerate(sections) if i not in first and is_suspect(t)]
    first += [i for i, t in enumerate(titles) if i not in first and t.startswith(_AFTER_SUSPECTS)]
    return first + [i for i in range(len(sections)) if i not in first]


def fit_ticket(draft: TicketDraft, desk: str) -> TicketDraft:
    """The draft with its body fitted to the desk's length limit (fit_body): the summary, impact, requested
    action and references are kept first, then whole suspect sections (never cut inside one), then the rest;
    unchanged when it fits. The full text is always in the bundle's ticket.md."""
    from fabricase.bundler.limits import desk_limits
    from fabricase.templates.suspects import is_suspect_section

    limit = desk_limits(desk).body_max_chars
    if limit is None or len(draft.body) <= limit:
        return draft
    sections = markdown_sections(draft.body)
    priority = _ticket_priority(sections, is_suspect_section)
    return dataclasses.replace(draft, body=fit_body(sections, limit, priority=priority, whole=is_suspect_section))
