"""The filters and globals the templates lay the facts out with: numbers and evidence, wrapped text, host lists,
tables and headings in the template's markup (Markdown, plain text, Jira wiki markup), and the fact-row helpers.

What data puts in a table cell, a heading or a wrapped line is made inert (templates/inert.py); the structure
these helpers build around it is Markup, so the environment's finalize leaves it as it is.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jinja2
import markupsafe

from fabricase.models import Evidence
from fabricase.redact import gate
from fabricase.templates.inert import inert_line, md_line

__all__ = [
    "MARKUPS",
    "WIDTH",
    "below_common",
    "columns",
    "distinct",
    "format_evidence",
    "format_number",
    "heading",
    "hostlist",
    "jira_table",
    "md_table",
    "prose",
    "table",
    "wrap",
]

WIDTH = 100
_JIRA_SPECIAL = re.compile(r"[\[\]{}]")  # links and macros in Jira wiki markup
_GLUE = re.compile(r"\b(snapshot|baseline) (\S+)")


def format_number(value: Any) -> str:
    """Counters as integers, rates with enough digits to compare, never scientific for everyday sizes."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if float(value).is_integer():
        return str(int(value))
    if abs(value) >= 1e-3:
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def format_evidence(ev: Evidence) -> str:
    """`metric = value unit (baseline ...; source ...)`."""
    unit = ev.unit or ""
    line = f"{ev.metric} = {format_number(ev.value)}" + (unit if unit[:1] in ("", "/", "%") else f" {unit}")
    notes = []
    if ev.baseline is not None:
        notes.append(f"baseline {format_number(ev.baseline)}")
    if ev.source:
        notes.append(f"source {ev.source}")
    if ev.snapshot is not None:
        notes.append(f"snapshot {ev.snapshot}")
    return line + (f" ({'; '.join(notes)})" if notes else "")


def wrap(text: str, indent: str = "", first: str | None = None, width: int = WIDTH) -> str:
    """Fill text to `width`; continuation lines get `indent`. Paths and ids are never split. Secrets are redacted
    first (redact.gate): a flag and its value, or a PEM header, split over two lines would pass any rule."""
    # keep "snapshot 1" and "baseline 0" on one line: NUL is not whitespace to textwrap
    glued = _GLUE.sub(lambda m: f"{m[1]}\0{m[2]}", inert_line(gate.text(str(text))))
    lead = indent if first is None else first
    lines = textwrap.wrap(glued, width=width, initial_indent=lead, subsequent_indent=indent,
                          break_long_words=False, break_on_hyphens=False)
    # The prefixes are the template's structure; what follows each is data, escaped where it opens a block.
    out = [md_line(line, lead if k == 0 else indent).replace("\0", " ") for k, line in enumerate(lines)]
    return markupsafe.Markup("\n".join(out))


def hostlist(names: Iterable[str]) -> str:
    """Host names folded the way fabric engineers write them: `gpu[001-064]`."""
    names = sorted(names)
    try:
        from ClusterShell.NodeSet import NodeSet, NodeSetException

        return str(NodeSet.fromlist(names))
    except (ImportError, NodeSetException, ValueError):
        return ",".join(names)


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An aligned Markdown table (readable as plain text in a mail client too)."""
    cells = [[_cell(c) for c in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(line.rstrip() for line in lines)


def jira_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A table in Jira wiki markup: `||head||head||` then `|cell|cell|`."""
    lines = ["||" + "||".join(_cell(c) for c in headers) + "||"]
    lines += ["|" + "|".join(_JIRA_SPECIAL.sub(r"\\\g<0>", _cell(c)) for c in row) + "|" for row in rows]
    return "\n".join(lines)


def _text_heading(text: str) -> str:
    return f"{text}\n{'-' * len(text)}"


# markup -> (heading, table): Markdown for the clouds' consoles (it reads well raw), plain text for mail and
# Zendesk comments, wiki markup for Jira.
MARKUPS: dict[str, tuple[Any, Any]] = {
    "markdown": (lambda text: f"## {text}", md_table),
    "text": (_text_heading, md_table),
    "jira": (lambda text: f"h2. {text}", jira_table),
}


def _markup(ctx: jinja2.runtime.Context) -> tuple[Any, Any]:
    name = ctx.get("markup", "markdown")
    if name not in MARKUPS:
        raise jinja2.TemplateRuntimeError(f"unknown markup {name!r}; valid: {', '.join(MARKUPS)}")
    return MARKUPS[name]


@jinja2.pass_context
def heading(ctx: jinja2.runtime.Context, text: str) -> str:
    """A section heading in the template's `markup` (structure: finalize leaves it as it is)."""
    return markupsafe.Markup(_markup(ctx)[0](inert_line(str(text))))


@jinja2.pass_context
def table(ctx: jinja2.runtime.Context, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A table in the template's `markup` (cells are data: escaped one by one, then the table is structure)."""
    return markupsafe.Markup(_markup(ctx)[1](headers, rows))


@jinja2.pass_context
def prose(ctx: jinja2.runtime.Context, text: str) -> str:
    """Running text of a section. Jira gets it preformatted: ids, `[severity]` tags and counter names such as
    `rx_crc_errors` would otherwise turn into links and emphasis; the lines are already wrapped to 100."""
    if _markup(ctx) is not MARKUPS["jira"]:
        return text
    body = text.rstrip("\n").replace("{noformat}", "{ noformat}")
    return "{noformat}\n" + body + "\n{noformat}" + "\n" * (len(text) - len(text.rstrip("\n")))


def columns(rows: Iterable[Mapping[str, Any]], *keys: str) -> list[list[Any]]:
    """Table rows from fact dicts: `affected | columns("host", "instance_id", "zone")`."""
    return [[row[k] for k in keys] for row in rows]


def below_common(rows: Iterable[Mapping[str, Any]], key: str) -> tuple[str, list[dict[str, Any]]]:
    """(the path segments all rows share at the top of `key`, the rows with those segments cut off). At least the
    last segment of each row stays: `{% set head, rows = affected | below_common("network_nodes") %}`."""
    rows = [dict(r) for r in rows]
    paths = [str(r[key]).split(" > ") if r[key] else [] for r in rows]
    depth = min((len(p) - 1 for p in paths), default=0)
    n = 0
    while n < depth and len({tuple(p[: n + 1]) for p in paths}) == 1:
        n += 1
    for r, p in zip(rows, paths, strict=True):
        r[key] = " > ".join(p[n:]) or None
    return " > ".join(paths[0][:n]) if n else "", rows


def distinct(rows: Iterable[Mapping[str, Any]], key: str) -> list[Any]:
    """The known values of one fact across rows, sorted: `affected | distinct("instance_type")`."""
    return sorted({row[key] for row in rows if row[key] not in (None, "")}, key=str)


def _cell(value: Any) -> str:
    text = inert_line(format_number(value)) if value is not None else "-"
    return (text or "-").replace("|", "\\|")
