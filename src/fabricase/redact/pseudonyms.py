"""The pseudonym rules: what `pseudonymize=True` replaces, and how a value becomes its token.

A token is `<kind>-<10 hex>`: the first 40 bits of HMAC-SHA256(key, namespace NUL canonical value). The same
value under the same key gives the same token in every member and every bundle of an escalation; without the
key the value cannot be recovered or confirmed by guessing. Values are canonicalized first, so `FE80::0C42:1`
and `fe80:0000:0000:0000:0000:0000:0c42:0001` are one address, and `aa-bb-cc-dd-ee-ff` one MAC with
`AA:BB:CC:DD:EE:FF`. An IPv4-mapped IPv6 address or RoCE GID takes the hex of its IPv4 address, so a RoCE v2
GID and the interface address behind it are visibly the same (`gid-1a2b3c4d5e` and `ip4-1a2b3c4d5e`).

Host names also come folded, the way fabric engineers and Slurm write them (`gpu[0004,0011]`, `NodeList=
rack[1-2]-gpu[01-08]`): `NODESET` finds such a folded set, `nodeset_size` counts what it names without
expanding it (a text can say `gpu[1-999999999]`), and `expand_nodeset` lists its names with ClusterShell's
NodeSet, so that each host gets the token it has everywhere else.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "NODESET",
    "NODESET_CHARS_MAX",
    "NODESET_LIST_MAX",
    "PSEUDONYM_KINDS",
    "TOKEN",
    "TOKEN_HEX",
    "HostPrefixes",
    "PseudonymRule",
    "expand_nodeset",
    "folded_sets",
    "host_pattern",
    "host_prefilter",
    "nodeset_size",
    "pseudonym_rules",
    "trie_pattern",
]

PSEUDONYM_KINDS = ("host", "gid", "mac", "guid", "ip6", "ip4", "user", "nodeset")
TOKEN_HEX = 10
_F = re.ASCII
TOKEN = re.compile(rf"(?:{'|'.join(PSEUDONYM_KINDS)})-[0-9a-f]{{{TOKEN_HEX}}}", _F)
# Accounts that name no person; pseudonymizing them would only hide what a support engineer needs to read.
_SYSTEM_USERS = frozenset({"root", "nobody", "daemon", "unknown"})

# The canonical form of a matched value as (namespace, value), or None to leave the match as it is.
Canonical = Callable[[re.Match[str]], "tuple[str, str] | None"]


@dataclass(frozen=True)
class PseudonymRule:
    kind: str
    pattern: re.Pattern[str]
    # Where the rule can match: lower-case literals (found with str.find in the ASCII-lowered text) or a regex
    # that starts with a literal; the rule runs on those lines only. None: on the whole text.
    prefilter: re.Pattern[str] | tuple[str, ...] | None
    canonical: Canonical


def trie_pattern(words: Iterable[str]) -> str:
    """One regex alternation for many literal words, factored by prefix (`gpu0(?:01|02)`): fast to search
    for thousands of host names, and the longest word wins."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        branches = [re.escape(ch) + walk(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return walk(trie)


def host_prefilter(names: Iterable[str]) -> tuple[str, ...] | None:
    """The host names' distinct first three characters (lower case), when there are few: a fast first search."""
    heads = tuple(sorted({name[:3].lower() for name in names}))
    return heads if len(heads) <= 64 else None


def host_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """A host name, or an FQDN that starts with it (two or more labels more), as a whole word."""
    names = sorted(set(names))
    if not names:
        return None
    return re.compile(rf"(?<![A-Za-z0-9])(?P<v>(?P<h>{trie_pattern(names)})(?:(?:\.[A-Za-z0-9-]+){{2,}})?)"
                      r"(?![A-Za-z0-9])", _F | re.IGNORECASE)


def _ip4(m: re.Match[str]) -> tuple[str, str] | None:
    try:
        addr = ipaddress.IPv4Address(m.group("v"))
    except ValueError:
        return None
    value = int(addr)
    # Netmasks, 0.0.0.0, loopback and broadcast identify nothing.
    is_mask = value and (value | (value - 1)) == 0xFFFFFFFF and addr.packed[0] == 255
    if addr.is_loopback or addr.is_unspecified or is_mask:
        return None
    return "ip4", str(addr)


def _ip6_value(text: str) -> tuple[str, str] | None:
    try:
        addr = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    if addr.is_unspecified or addr.is_loopback:
        return None
    if addr.ipv4_mapped is not None:
        return "ip4", str(addr.ipv4_mapped)
    return "ip6", addr.compressed


def _ip6(m: re.Match[str]) -> tuple[str, str] | None:
    text = m.group("v")
    # Eight groups, or a `::`: timestamps (12:34:56), MACs and PCI addresses are neither.
    if "::" not in text and text.count(":") != 7:
        return None
    return _ip6_value(text)


def _gid(m: re.Match[str]) -> tuple[str, str] | None:
    return _ip6_value(m.group("v"))


def _hex_id(kind: str, strip: str) -> Canonical:
    def canonical(m: re.Match[str]) -> tuple[str, str] | None:
        value = m.group("v").lower()
        digits = re.sub(strip, "", value)
        if set(digits) <= {"0"} or set(digits) <= {"f"}:
            return None  # all zeros (unset) or all ones (broadcast)
        return kind, digits

    return canonical


def _user(m: re.Match[str]) -> tuple[str, str] | None:
    name = m.group("v")
    if name.lower() in _SYSTEM_USERS or name.isdigit() or TOKEN.fullmatch(name):
        return None
    return "user", name


_USER = r"[A-Za-z_][A-Za-z0-9_.-]{0,31}"
_HEX2 = "[0-9A-Fa-f]{2}"


def _r(kind: str, pattern: str, prefilter: str | tuple[str, ...], canonical: Canonical,
       flags: int = 0) -> PseudonymRule:
    found = prefilter if isinstance(prefilter, tuple) else re.compile(prefilter, _F)
    return PseudonymRule(kind, re.compile(pattern, _F | flags), found, canonical)


_H4 = "[0-9A-Fa-f]{4}"


ADDRESS_RULES: tuple[PseudonymRule, ...] = (
    # GIDs as sysfs and ibv_devinfo print them: eight groups of four hex digits, before IPv6 takes them.
    _r("gid", r"(?<![0-9A-Fa-f:])(?P<v>[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){7})(?![0-9A-Fa-f:])", f":{_H4}:{_H4}:{_H4}:",
       _gid),
    # MACs (6 octets) and IPoIB hardware addresses (20 octets), `:` or `-` separated.
    _r("mac", rf"(?<![0-9A-Fa-f:-])(?P<v>{_HEX2}(?P<sep>[:-]){_HEX2}(?:(?P=sep){_HEX2}){{4}}"
              rf"(?:(?:(?P=sep){_HEX2}){{14}})?)(?![0-9A-Fa-f:-])", f"[:-]{_HEX2}[:-]{_HEX2}[:-]",
       _hex_id("mac", "[:-]")),
    # InfiniBand GUIDs: 0x + 16 hex (ibstat), four groups of four (sysfs node_guid), eight octets, and
    # S-/H-<hex> (ibnetdiscover).
    _r("guid", r"(?<![\w])(?P<v>0x[0-9A-Fa-f]{16})(?![0-9A-Fa-f])", "0x[0-9A-Fa-f]{16}", _hex_id("guid", "^0x")),
    _r("guid", r"(?<![0-9A-Fa-f:])(?P<v>[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){3})(?![0-9A-Fa-f:])", f":{_H4}:{_H4}",
       _hex_id("guid", ":")),
    _r("guid", rf"(?<![0-9A-Fa-f:])(?P<v>{_HEX2}(?::{_HEX2}){{7}})(?![0-9A-Fa-f:])", f":{_HEX2}:{_HEX2}:{_HEX2}:",
       _hex_id("guid", ":")),
    _r("guid", r"(?<![\w-])[SH]-(?P<v>[0-9a-f]{16})(?![0-9A-Fa-f])", "-[0-9a-f]{16}", _hex_id("guid", "")),
    # IPv6 in every compressed form (and with an IPv4 tail), then IPv4.
    _r("ip6", r"(?<![\w:.])(?P<v>(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?)"
              r"(?![\w:]|\.\d)", r"::|:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:", _ip6),
    _r("ip4", r"(?<![\w.])(?P<v>(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})"
              r"(?![\w]|\.\d)", r"\.\d{1,3}\.\d{1,3}\.\d", _ip4),
)

USER_RULES: tuple[PseudonymRule, ...] = (
    _r("user", rf"(?<=/home/)(?P<v>{_USER})(?![\w.-])", ("/home/",), _user),
    _r("user", rf"(?:user|username|logname|acct)[\"']?=[\"']?(?P<v>{_USER})(?![\w.-])", ("user", "logname", "acct"),
       _user, re.IGNORECASE),
    _r("user", rf"id=\d+\((?P<v>{_USER})\)", r"id=\d", _user),
    _r("user", rf"\bfor (?:invalid )?user (?P<v>{_USER})(?![\w.-])", ("for ",), _user, re.IGNORECASE),
    _r("user", rf"\b(?:Accepted|Failed) \S+ for (?P<v>{_USER}) from\b", (" for ",), _user),
    _r("user", rf"\bInvalid user (?P<v>{_USER}) from\b", ("invalid user ",), _user),
    _r("user", rf"://(?P<v>{_USER})(?::[^\s/@\"'<>]*)?@", ("://",), _user),
)


def pseudonym_rules(hosts: list[str], host_canonical: Canonical) -> tuple[PseudonymRule, ...]:
    """Host names first (an FQDN holds dots and digits the address rules would otherwise take), then
    addresses, then user names."""
    pattern = host_pattern(hosts)
    head = (PseudonymRule("host", pattern, host_prefilter(hosts), host_canonical),) if pattern is not None else ()
    return head + ADDRESS_RULES + USER_RULES


# -- folded host sets ------------------------------------------------------------------------------------------

# A folded set lists its hosts' tokens one by one (tokens are random: they cannot be folded again), so past this
# many hosts it becomes a marker: the ticket stays readable, and a short text cannot grow without bound.
NODESET_LIST_MAX = 64
NODESET_CHARS_MAX = 4096  # a longer folded set is not read (NodeSet's parse of it costs more than it is worth)
_SIZE_CAP = 1 << 32
_NAME_CHAR = r"A-Za-z0-9_.\-"
_NUM = r"\d{1,9}"  # more digits than this name no host; int() of them stays cheap
_RANGE = rf"\[{_NUM}(?:-{_NUM})?(?:/{_NUM})?(?:,{_NUM}(?:-{_NUM})?(?:/{_NUM})?)*\]"
# A folded set: a head of word characters, one or more bracketed range lists with name characters between them
# (`rack[1-2]-gpu[01-08]`), and a tail that does not end in `.` or `-` (the end of a sentence, a dash after it).
NODESET = re.compile(
    rf"(?<![A-Za-z0-9_\]])(?P<v>[A-Za-z0-9][A-Za-z0-9_]*{_RANGE}(?:[{_NAME_CHAR}]*?{_RANGE})*"
    rf"(?:[{_NAME_CHAR}]*[A-Za-z0-9_])?)(?![A-Za-z0-9_\[])", _F)
_WORD = frozenset(map(ord, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"))
_DIGITS = frozenset(map(ord, "0123456789"))
# Bytes as what they are to a folded set: d (a digit), w (any other word character), [ and space (the rest).
_KINDS = bytes(ord("d") if i in _DIGITS else ord("w") if i in _WORD else ord("[") if i == ord("[") else ord(" ")
               for i in range(256))
_HEADS = bytes(ord("w") if i in _WORD else ord(" ") for i in range(256))
_OPENINGS = (b"w[d", b"d[d")  # a word character, `[`, a digit: where a folded set's first range list opens
_RANGE_LIST = re.compile(r"\[([^\]]*)\]", _F)
_RANGE_ITEM = re.compile(r"(\d+)(?:-(\d+))?(?:/(\d+))?", _F)


def nodeset_size(spec: str) -> int | None:
    """How many names a folded set (a NODESET match) names at most, counted from its ranges without expanding
    them; None when a range runs backwards or has a zero step (NodeSet would refuse it)."""
    size = 1
    for ranges in _RANGE_LIST.findall(spec):
        count = 0
        for item in ranges.split(","):
            m = _RANGE_ITEM.fullmatch(item)
            if m is None:
                return None
            low, high, step = int(m[1]), int(m[2] or m[1]), int(m[3] or 1)
            if high < low or step == 0:
                return None
            count += (high - low) // step + 1
        size *= count
        if size > _SIZE_CAP:
            return size  # already more than any set is listed for: no bigger numbers to multiply
    return size


def expand_nodeset(spec: str) -> list[str] | None:
    """The names a folded set names, in NodeSet's order; None when NodeSet cannot read it. Call it only on sets
    whose nodeset_size is small: NodeSet expands every range it is given."""
    try:
        from ClusterShell.NodeSet import NodeSet, NodeSetException
    except ImportError:
        return None
    try:
        return list(NodeSet(spec))
    except (NodeSetException, ValueError, IndexError):
        return None


class HostPrefixes:
    """Whether some host name starts with a text: a folded set whose head starts no host name names none of
    them, and is left alone without expanding it (`sshd[1234]` in a syslog)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = sorted({n.lower() for n in names})

    def __bool__(self) -> bool:
        return bool(self._names)

    def starts_one(self, head: str) -> bool:
        head = head.lower()
        at = bisect.bisect_left(self._names, head)
        return at < len(self._names) and self._names[at].startswith(head)


def folded_sets(text: str, prefixes: HostPrefixes) -> Iterator[re.Match[str]]:
    """The folded sets in `text` whose head starts one of the host names, in order.

    A regex tried at every position of a 10 MB log costs more than all the other pseudonym rules: instead the
    openings (`w[d`) are found with a byte translation and a literal search, each head is read back to its
    start, and only a head that starts a host name is matched, once, from there. A set's later range lists
    (after a `]`) are never openings of their own, so every character is looked at a bounded number of times."""
    if "[" not in text:
        return
    raw = text.encode("ascii") if text.isascii() else text.encode("ascii", "replace")  # one byte a character
    kinds = raw.translate(_KINDS)
    openings = sorted(at + 1 for opening in _OPENINGS for at in _finds(kinds, opening))
    if not openings:
        return
    heads = raw.translate(_HEADS)
    done = 0
    for bracket in openings:
        if bracket < done:
            continue  # inside the set matched last
        start = heads.rfind(b" ", 0, bracket) + 1
        if (start and text[start - 1] == "]") or not prefixes.starts_one(text[start:bracket]):
            continue
        m = NODESET.match(text, start)
        if m is not None:
            done = m.end()
            yield m


def _finds(data: bytes, needle: bytes) -> Iterator[int]:
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)
