"""`nvidia-imex-ctl -N`: the IMEX domain (multi-node NVLink, GB200 NVL72) as this node sees it.

    Nodes:
    Node #0   - 172.31.48.81    - READY                - Version: 570.172
     Nodes From\\To  0   1
           0        C   C
    Domain State: UP

Connection letters (the tool's legend): C connected, I invalid, N never connected, R recovering, D disconnected,
A authenticating, !V! version mismatch, !M! node map mismatch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricase.parsers.numbers import to_int

__all__ = ["ImexNode", "ImexStatus", "parse_imex_status"]

_NODE = re.compile(
    r"Node #(?P<index>[0-9]{1,9})\s+-\s+(?P<address>\S+)\s+-\s+(?P<state>[A-Z_]+)(?:\s+-\s+Version: (?P<v>\S+))?"
)
_MATRIX_HEADER = ["Nodes", "From\\To"]  # the words before the matrix's column numbers
_DOMAIN = re.compile(r"Domain State:\s*(?P<state>\S+)")
_LEGEND = re.compile(r"\s*!?[A-Z]!? - ")


@dataclass
class ImexNode:
    index: int
    address: str
    state: str  # READY, ...
    version: str | None = None


@dataclass
class ImexStatus:
    nodes: list[ImexNode] = field(default_factory=list)
    connections: dict[tuple[int, int], str] = field(default_factory=dict)  # (from, to) -> "C"
    domain_state: str | None = None  # UP, DOWN, DEGRADED, ...
    errors: list[str] = field(default_factory=list)

    @property
    def not_ready(self) -> list[ImexNode]:
        return [n for n in self.nodes if n.state != "READY"]

    @property
    def broken_connections(self) -> dict[tuple[int, int], str]:
        return {pair: state for pair, state in self.connections.items() if state != "C"}


def _node_numbers(words: list[str]) -> list[int] | None:
    numbers = [to_int(word) for word in words]
    return None if None in numbers else numbers  # type: ignore[return-value]


def parse_imex_status(text: str | None) -> ImexStatus:
    """Parse `nvidia-imex-ctl -N`. Never raises; output that is neither a node list nor a matrix (the daemon
    not running, a connection error) is kept in errors."""
    status = ImexStatus()
    columns: list[int] = []
    for line in (text or "").splitlines():
        words = line.split()  # the matrix is read by words: `\s+[\d\s]+` was quadratic in a run of spaces
        if not words:
            continue  # blank lines first: a megabyte of newlines is a million of them
        if node := _NODE.search(line):
            status.nodes.append(ImexNode(int(node.group("index")), node.group("address"), node.group("state"),
                                         node.group("v")))  # fmt: skip
        elif words[:2] == _MATRIX_HEADER and len(words) > 2 and (header := _node_numbers(words[2:])) is not None:
            columns = header
        elif columns and len(words) > 1 and (source := to_int(words[0])) is not None:
            for target, cell in zip(columns, words[1:], strict=False):
                status.connections[(source, target)] = cell
        elif domain := _DOMAIN.search(line):
            status.domain_state = domain.group("state")
        elif _LEGEND.match(line):
            continue
        elif re.search(r"\b(?:error|fail\w*|unable|not running|refused|timed out)\b", line, re.I):
            status.errors.append(line.strip()[:160])
    if text and text.strip() and not status.nodes and not status.errors:
        status.errors.append("no node list in the output")
    return status
