"""One exception tree for fabricase. The CLI turns any of these into a one-line message and exit 1.

    FabricaseError                  base; .where names the host, collector, item, provider or file at fault
    ├── ConfigError                 bad configuration, unwritable data directory, missing credentials
    ├── TargetError                 empty or malformed nodeset, unknown job, bad --replay directory
    ├── TransportError              a transport could not run at all (not a single host failing)
    ├── CaptureError                a capture stream or capture directory is malformed
    │   ├── CorruptItemError        an item on disk does not match its index (size or sha256)
    │   └── CaptureInterrupted      Ctrl-C during a capture; .where is the partial capture directory, kept
    ├── ParseError                  a parser could not read an item (recorded, not usually raised to the user)
    ├── BundleError                 a bundle cannot be built or read
    │   └── VerifyError             a bundle failed verification; .problems lists each member at fault
    ├── ProviderError               unknown provider, or a provider/desk API call failed
    │   └── UnsupportedError        a provider lacks a capability (declared up front)
    └── TrackerError                the escalation store cannot be opened or updated
        ├── NotFoundError           an escalation id that does not exist
        └── DuplicateError          an open escalation already covers these hosts (`open --force` files anyway)
"""

from __future__ import annotations

import re

__all__ = [
    "BundleError",
    "CaptureError",
    "CaptureInterrupted",
    "ConfigError",
    "CorruptItemError",
    "DuplicateError",
    "FabricaseError",
    "NotFoundError",
    "ParseError",
    "ProviderError",
    "TargetError",
    "TrackerError",
    "TransportError",
    "UnsupportedError",
    "UNSAFE_CHARACTERS",
    "VerifyError",
    "inert",
]

# What a terminal acts on instead of showing: C0 and C1 controls (ESC, CR, BS, BEL, newline...), DEL, lone
# surrogates (from undecodable bytes, which cannot even be written to a UTF-8 stream), the zero-width and
# direction marks, line and paragraph separators, the bidirectional embeddings, overrides and isolates that
# reorder what is shown ("Trojan Source"), and the byte-order mark. A regex [class] body, shared with cli.output.
UNSAFE_CHARACTERS = r"\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff"
_UNSAFE = re.compile(f"[{UNSAFE_CHARACTERS}]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def inert(text: object) -> str:
    """`text` as one line that a terminal shows and never acts on: each unsafe character written as its Python
    escape (\\x1b, \\r, \\n, \\u202e); everything else, markup-like brackets included, kept as it is.

    Errors quote data (a host name, a path, a member name), and they and the CLI render through this one
    function; it lives here, the lowest module, so that the library's errors need nothing from the CLI."""
    return _UNSAFE.sub(_escaped, str(text))


class FabricaseError(Exception):
    """Base of every error fabricase raises on purpose. It renders as one inert line ("where: message"), however
    the host names, paths or member names it quotes were made."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return inert(f"{self.where}: {self.message}" if self.where else self.message)


class ConfigError(FabricaseError):
    pass


class TargetError(FabricaseError):
    pass


class TransportError(FabricaseError):
    pass


class CaptureError(FabricaseError):
    pass


class CorruptItemError(CaptureError):
    pass


class CaptureInterrupted(CaptureError):
    pass


class ParseError(FabricaseError):
    pass


class BundleError(FabricaseError):
    pass


class VerifyError(BundleError):
    def __init__(self, message: str, *, where: str | None = None, problems: list[str] | None = None) -> None:
        super().__init__(message, where=where)
        self.problems = problems or []


class ProviderError(FabricaseError):
    pass


class UnsupportedError(ProviderError):
    pass


class TrackerError(FabricaseError):
    pass


class NotFoundError(TrackerError):
    pass


class DuplicateError(TrackerError):
    """Open escalations already cover the hosts, instances or shared components of a new one. .duplicates:
    [(escalation id, what it covers in words)]."""

    def __init__(self, message: str, *, where: str | None = None,
                 duplicates: list[tuple[str, tuple[str, ...]]] | None = None) -> None:
        super().__init__(message, where=where)
        self.duplicates = list(duplicates or [])
