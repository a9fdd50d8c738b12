"""Redaction before hashing: secrets always, pseudonyms when asked (docs/redaction.md).

    redactor = Redactor(pseudonymize=True, key=escalation_key, hosts=[h.host for h in capture.hosts])
    build_bundle(capture.root, out, extra=extra, mtime=mtime, redactor=redactor)

`Redactor.redact(name, data)` is pure in what it returns: the same bytes, key and hosts give the same output,
whatever was redacted before. It also counts what it replaced, per kind and per member; `report()` is what
`redaction.json` holds: counts, never values.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from fabricase.errors import BundleError
from fabricase.redact.lines import ascii_lower, literal_hits, on_lines, regex_hits
from fabricase.redact.pseudonyms import (
    NODESET_CHARS_MAX,
    NODESET_LIST_MAX,
    PSEUDONYM_KINDS,
    TOKEN_HEX,
    HostPrefixes,
    expand_nodeset,
    folded_sets,
    nodeset_size,
    pseudonym_rules,
    trie_pattern,
)
from fabricase.redact.secrets import SECRET_KINDS, marker, redact_secrets

__all__ = [
    "PSEUDONYM_KINDS",
    "REDACTION_FORMAT",
    "REDACTION_FORMAT_VERSION",
    "REDACTION_NAME",
    "SECRET_KINDS",
    "Redactor",
    "redaction_json",
]

REDACTION_NAME = "redaction.json"
REDACTION_FORMAT = "fabricase-redaction"
REDACTION_FORMAT_VERSION = 1

_INERT_BYTES = re.compile(rb"[0-9\s]*")  # a counter value: nothing any rule could match
_INERT = re.compile(r"[0-9\s]*")
# Never redacted, even when a rule would match inside: the provider's instance id field (GCP instance names are
# host names) and the provider's topology ids.
_PROTECTED = re.compile(
    r'"instance_id"\s*:\s*"(?:[^"\\]|\\.)*"'
    r"|(?<![\w-])(?:network-node|block|subblock):[^\s\"',\]\)]+"
    r"|(?<![\w-])nn-[0-9a-z]{4,}(?![\w-])",
    re.ASCII,
)
_PROTECTED_ANCHORS = ("instance_id", "network-node:", "block:", "nn-")
_MEMO_TEXT, _MEMO_ENTRIES = 512, 200_000  # texts up to this long are remembered, this many at most
_MIN_LEARNED_USER = 3  # shorter names are not chased through free text (`ps` columns, prose)


class Redactor:
    """Redacts members of a bundle. pseudonymize: also replace host names, addresses, GUIDs/GIDs and user
    names with tokens keyed by `key` (one key per escalation); hosts: the capture's host names."""

    def __init__(self, pseudonymize: bool = False, key: bytes | None = None, hosts: Iterable[str] = ()) -> None:
        if not isinstance(pseudonymize, bool):
            raise BundleError(f"pseudonymize must be true or false, not {pseudonymize!r}")
        if pseudonymize and (not isinstance(key, bytes | bytearray) or len(key) < 16):
            raise BundleError("pseudonymization needs a key of at least 16 bytes (one per escalation)")
        hosts = [hosts] if isinstance(hosts, str) else list(hosts)
        if not all(isinstance(h, str) and h for h in hosts):
            raise BundleError("host names must be non-empty strings")
        self.pseudonymize = pseudonymize
        self._key = bytes(key) if pseudonymize and key is not None else b""
        self.hosts = sorted(set(hosts))
        self._host_names = _host_names(self.hosts)
        self._rules = pseudonym_rules(list(self._host_names), self._host_canonical) if pseudonymize else ()
        self._prefixes = HostPrefixes(self._host_names if pseudonymize else ())
        self._folded: dict[str, str | None] = {}  # a folded set -> what replaces it (None: left as it is)
        self._tokens: dict[tuple[str, str], str] = {}
        self._owners: dict[str, tuple[str, str]] = {}
        self._paths: dict[str, str] = {}
        self._counts: dict[str, Counter[str]] = {}
        self._memo: dict[str, tuple[str, dict[str, int]]] = {}

    # -- the API build_bundle uses -------------------------------------------------------------------------

    def redact(self, name: str, data: bytes) -> bytes:
        """`data` (a member named `name`) with secrets, and pseudonyms when asked, replaced. Text that is not
        UTF-8 is read as latin-1, byte for byte, so binary content comes back unchanged where nothing matched."""
        if _INERT_BYTES.fullmatch(data):
            return data
        try:
            text, codec = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, codec = data.decode("latin-1"), "latin-1"
        out = self.redact_text(name, text)
        return data if out == text else out.encode(codec)

    def redact_text(self, name: str, text: str) -> str:
        out, counts = self._redact(text)
        if counts:
            self._counts.setdefault(self.redact_path(name), Counter()).update(counts)
        return out

    def redact_path(self, path: str) -> str:
        """A member or item path with host names, addresses and user names pseudonymized (secrets are not
        looked for in paths, and nothing is counted)."""
        if not self.pseudonymize:
            return path
        if path not in self._paths:
            self._paths[path] = self._pseudonymize(path, None)
        return self._paths[path]

    def redact_nodeset(self, name: str, nodeset: str) -> str:
        """A target node set (`gpu[001-064],login01`) with each host's token in place of its name, the tokens
        listed (they cannot be folded), so the result is still a node set. One that cannot be rewritten whole
        (a `@group`, a host not among the capture's, more than NODESET_LIST_MAX hosts) is dropped for a marker."""
        if not self.pseudonymize or not nodeset:
            return nodeset
        self._counts.setdefault(self.redact_path(name), Counter())["nodeset"] += 1
        out = self._pseudonymize(nodeset.strip(), None)
        return out if all(self._is_host_token(part) for part in out.split(",")) else marker("nodeset")

    def host_pseudonym(self, host: str) -> str:
        """The token that stands for one of the capture's hosts (the host itself when not pseudonymizing)."""
        if not self.pseudonymize:
            return host
        canonical = self._host_names.get(host.lower())
        if canonical is None:
            raise BundleError(f"{host!r} is not one of the capture's hosts")
        return self._token("host", "host", canonical)

    def reset(self) -> None:
        """Forget the counts (build_bundle starts each bundle afresh); pseudonyms stay the same."""
        self._counts.clear()

    def report(self) -> dict[str, Any]:
        """What redaction.json holds: counts per kind in all and per member, never a value."""
        members = {name: dict(sorted(c.items())) for name, c in sorted(self._counts.items()) if c}
        totals: Counter[str] = Counter()
        for counts in self._counts.values():
            totals.update(counts)
        return {
            "format": REDACTION_FORMAT,
            "format_version": REDACTION_FORMAT_VERSION,
            "pseudonymized": self.pseudonymize,
            "key_id": self._key_id(),
            "kinds": {"secrets": list(SECRET_KINDS), "pseudonyms": list(PSEUDONYM_KINDS) if self.pseudonymize else []},
            "totals": dict(sorted(totals.items())),
            "members": members,
        }

    # -- internals ------------------------------------------------------------------------------------------

    def _key_id(self) -> str | None:
        # Tells two bundles pseudonymized with the same key apart from others, without revealing the key.
        if not self.pseudonymize:
            return None
        return hmac.new(self._key, b"fabricase redaction key id", hashlib.sha256).hexdigest()[:16]

    def _redact(self, text: str) -> tuple[str, dict[str, int]]:
        """The redacted text and what was replaced, by kind."""
        if not text or _INERT.fullmatch(text):
            return text, {}
        hit = self._memo.get(text)
        if hit is None:
            found: Counter[str] = Counter()
            hit = (self._redact_uncached(text, found), dict(found))
            # Index fields and small items repeat across hosts (the same sysfs names, the same states).
            if len(text) <= _MEMO_TEXT:
                if len(self._memo) >= _MEMO_ENTRIES:
                    self._memo.clear()
                self._memo[text] = hit
        return hit

    def _redact_uncached(self, text: str, counts: Counter[str]) -> str:
        lowered = ascii_lower(text)
        if not any(anchor in lowered for anchor in _PROTECTED_ANCHORS) or not _PROTECTED.search(text):
            return self._redact_span(text, counts)
        out, pos = [], 0
        for m in _PROTECTED.finditer(text):
            out += [self._redact_span(text[pos:m.start()], counts), m.group(0)]
            pos = m.end()
        out.append(self._redact_span(text[pos:], counts))
        return "".join(out)

    def _redact_span(self, text: str, counts: Counter[str]) -> str:
        if not text:
            return text
        text = redact_secrets(text, counts)
        return self._pseudonymize(text, counts) if self.pseudonymize else text

    def _pseudonymize(self, text: str, counts: Counter[str] | None) -> str:
        if self._prefixes:  # folded host sets first: the host rule would see only their heads
            text = self._unfold_all(text, counts)
        learned: set[str] = set()
        for rule in self._rules:

            def replace(m: re.Match[str], rule=rule) -> str:
                canonical = rule.canonical(m)
                if canonical is None:
                    return m.group(0)
                if rule.kind == "user":
                    learned.add(canonical[1])
                if counts is not None:
                    counts[rule.kind] += 1
                start, end, base = m.start("v"), m.end("v"), m.start()
                whole = m.group(0)
                return whole[:start - base] + self._token(rule.kind, *canonical) + whole[end - base:]

            if rule.prefilter is None:
                text = rule.pattern.sub(replace, text)
            else:  # every pseudonym rule is line-local
                text = on_lines(text, lambda t, found=rule.prefilter: _hits(t, found),
                                lambda t, rule=rule, replace=replace: rule.pattern.sub(replace, t))
        return self._chase_users(text, learned, counts)

    def _chase_users(self, text: str, names: set[str], counts: Counter[str] | None) -> str:
        """A user name found in one place (`/home/alice`) is replaced wherever else it stands alone in the same
        member (the USER column of `ps`, `alice@host`)."""
        names = {n for n in names if len(n) >= _MIN_LEARNED_USER}
        if not names:
            return text
        pattern = re.compile(rf"(?<![\w.-])(?:{trie_pattern(names)})(?![\w-])", re.ASCII)

        def replace(m: re.Match[str]) -> str:
            if counts is not None:
                counts["user"] += 1
            return self._token("user", "user", m.group(0))

        return pattern.sub(replace, text)

    def _unfold_all(self, text: str, counts: Counter[str] | None) -> str:
        """Each folded host set (`gpu[0004,0011]`) that names one of the capture's hosts as its hosts' tokens
        (`host-…,host-…`), a marker where it names more than NODESET_LIST_MAX; any other left as it is."""
        pieces, pos = [], 0
        for m in folded_sets(text, self._prefixes):
            spec = m.group(0)
            if spec not in self._folded:
                if len(self._folded) >= _MEMO_ENTRIES:
                    self._folded.clear()
                self._folded[spec] = self._unfolded(spec)
            out = self._folded[spec]
            if out is None:
                continue
            if counts is not None:
                counts["nodeset"] += 1
            pieces += [text[pos:m.start()], out]
            pos = m.end()
        return "".join(pieces) + text[pos:] if pieces else text

    def _unfolded(self, spec: str) -> str | None:
        if not self._prefixes.starts_one(spec[:spec.index("[")]):
            return None  # `sshd[1234]`: no host name starts like it
        size = nodeset_size(spec)
        if size is None:
            return None
        if size > NODESET_LIST_MAX or len(spec) > NODESET_CHARS_MAX:
            return marker("nodeset")  # its head is a host's: too many names to list, and none may stay
        names = expand_nodeset(spec)
        if not names:
            return None
        # Each name as the host rule rewrites it alone (`gpu0004-ib` -> `host-…-ib`), so a host has one token.
        named = [self._host_words(name) for name in names]
        if named == names:
            return None  # names none of the capture's hosts, like a single unknown name
        # A name beside the capture's hosts in one set is a host of the same cluster: it gets a token too.
        return ",".join(new if new != name else self._token("host", "host", name.lower())
                        for new, name in zip(named, names, strict=True))

    def _host_words(self, name: str) -> str:
        """`name` with the capture's host names in it replaced, as the host rule does in any text."""
        rule = self._rules[0]  # pseudonym_rules puts the host rule first whenever there are hosts

        def replace(m: re.Match[str]) -> str:
            canonical = rule.canonical(m)
            if canonical is None:
                return m.group(0)
            whole, base = m.group(0), m.start()
            return whole[:m.start("v") - base] + self._token("host", *canonical) + whole[m.end("v") - base:]

        return rule.pattern.sub(replace, name)

    def _is_host_token(self, text: str) -> bool:
        return self._owners.get(text, ("",))[0] == "host"  # a token this redactor gave a host name

    def _host_canonical(self, m: re.Match[str]) -> tuple[str, str] | None:
        canonical = self._host_names.get(m.group("h").lower())
        return None if canonical is None else ("host", canonical)

    def _token(self, kind: str, namespace: str, value: str) -> str:
        token = self._tokens.get((namespace, value))
        if token is None:
            digest = hmac.new(self._key, f"{namespace}\0{value}".encode(), hashlib.sha256).hexdigest()[:TOKEN_HEX]
            owner = self._owners.setdefault(f"{namespace}-{digest}", (namespace, value))
            if owner != (namespace, value):
                raise BundleError(f"two {namespace} values share one pseudonym; pseudonymize with another key")
            token = self._tokens[(namespace, value)] = digest
        return f"{kind}-{token}"


def _hits(text: str, found: re.Pattern[str] | tuple[str, ...]) -> list[int]:
    return literal_hits(ascii_lower(text), found) if isinstance(found, tuple) else regex_hits(text, found)


def _host_names(hosts: list[str]) -> dict[str, str]:
    """Lower-case name -> canonical host, for every host and, where it is unambiguous, the first label of a
    host given as an FQDN (`gpu001` for `gpu001.cluster.example.com`)."""
    names = {h.lower(): h.lower() for h in hosts}
    short: dict[str, set[str]] = {}
    for h in names:
        label = h.split(".", 1)[0]
        if label != h and len(label) >= 3:
            short.setdefault(label, set()).add(h)
    for label, owners in short.items():
        if len(owners) == 1 and label not in names:
            names[label] = next(iter(owners))
    return names


def redaction_json(report: dict[str, Any]) -> bytes:
    """The redaction.json bytes: keys sorted, two-space indent, one trailing newline (deterministic)."""
    return (json.dumps(report, sort_keys=True, indent=2) + "\n").encode("utf-8")

