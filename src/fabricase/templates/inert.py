"""Data in a ticket is shown, never read as structure (docs/redaction.md, "Data never becomes structure").

A line that data starts with a heading, quote or HTML mark, a setext underline or Jira's `h1.`-`h6.`/`bq.` is
escaped with a backslash; control characters and bidi overrides are written as escapes by `errors.inert`, the
one function the terminal uses too. Line breaks and tabs of multi-line data are kept.
"""

from __future__ import annotations

import re

from fabricase.errors import inert

__all__ = ["inert_block", "inert_line", "md_line"]

_MD_BLOCK = re.compile(r"(?m)^([ \t]{0,3})(#|>|<|=+[ \t]*$|h[1-6]\.|bq\.)")


def _escape_blocks(text: str, count: int = 0) -> str:
    return _MD_BLOCK.sub(r"\1\\\2", text, count=count)


def inert_block(text: str) -> str:
    """Multi-line data: every line inert, its own line breaks kept, block marks escaped."""
    return _escape_blocks("\n".join("\t".join(inert(part) for part in line.split("\t"))
                                    for line in text.split("\n")))


def inert_line(text: str) -> str:
    """Data on one line: whitespace runs (line breaks included) become one space, the rest inert."""
    return inert(" ".join(str(text).split()))


def md_line(line: str, prefix: str) -> str:
    """A wrapped line: `prefix` is the template's structure, what follows it is data, escaped where it opens a
    block."""
    rest = line[len(prefix):] if line.startswith(prefix) else line
    return line[:len(line) - len(rest)] + _escape_blocks(rest, count=1)
