"""The secret rules: what is always redacted, in the order it is tried.

Each rule finds a value in text and names its kind; the value (only the value: `password=` stays) becomes
`[REDACTED:<kind>]`. Specific rules come before generic ones, so that `aws_secret_access_key = X` counts as an
AWS secret key and not as a generic secret; a value that an earlier rule already replaced is never matched
again. Every value class stops at quotes, whitespace and NUL, so redacting inside a JSON string, a quoted
shell argument or a NUL-separated /proc/<pid>/cmdline never breaks the structure around it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from fabricase.redact.lines import ascii_lower, literal_hits, on_lines

__all__ = ["SECRET_KINDS", "SECRET_RULES", "SecretRule", "marker"]


@dataclass(frozen=True)
class SecretRule:
    kind: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]  # lower-case strings one of which the text must hold for the rule to be tried
    accept: Callable[[str, re.Match[str]], bool] | None = None  # a last check of the value (and its match)
    multiline: bool = False  # may match across a line break: always run on the whole text

    def groups(self) -> tuple[str, ...]:
        return tuple(name for name in self.pattern.groupindex if name.startswith("v"))


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_MARK = "[REDACTED:"
_F = re.ASCII
_NOT_DONE = r"(?!\[REDACTED:)"
# A value after `key=`/`key:`: double-quoted (JSON escapes allowed), single-quoted, or bare up to whitespace,
# a quote, NUL or `&` (the next URL query parameter).
_VALUE = r"""(?:"(?P<vd>(?:[^"\\\n]|\\.)*)"|'(?P<vs>[^'\n]*)'|(?P<vu>[^\s\x00"'&]+))"""
_SEP = r"""["']?[ \t]*+[:=][ \t]*+"""
_ARG_SEP = r"[ \t\x00]+"  # between a command-line flag and its value (NUL in /proc/<pid>/cmdline)


# Patterns start with their keyword, not with the key's prefix (`DB_` of `DB_PASSWORD`): any prefix is allowed,
# and a literal start lets the regex engine skip from one candidate to the next instead of trying every position.
def _keyed(key: str) -> str:
    """`KEY=value`, `KEY: value`, `"KEY": "value"`, `--KEY=value`: KEY is the last word of the key."""
    return rf"(?:{key})(?![\w-]){_SEP}{_NOT_DONE}{_VALUE}"


def _keyed_line(key: str) -> str:
    """A YAML/INI line whose unquoted value is the rest of the line (`password: two words`, `password = a b`);
    the key must start the line (checked by _line_key)."""
    # `KEY=value rest` with no space around `=` is a shell assignment before a command: left to _keyed.
    return rf"(?m)(?:{key})(?![\w-])(?:[ \t]*+:[ \t]*+|[ \t]+=[ \t]*+|=[ \t]++){_NOT_DONE}(?![\"'])" \
           r"(?P<vl>[^\n\x00]*?)[ \t\r]*$"


_LINE_KEY_PREFIX = re.compile(r"[ \t]*(?:export[ \t]+)?[\w.-]*", re.ASCII)


def _line_key(value: str, m: re.Match[str]) -> bool:
    line_start = m.string.rfind("\n", 0, m.start()) + 1
    return _LINE_KEY_PREFIX.fullmatch(m.string, line_start, m.start()) is not None


def _flag(key: str) -> str:
    """`--KEY value` (the `=` form is taken by _keyed)."""
    return rf"--[\w-]*?(?:{key})(?![\w-]){_ARG_SEP}(?![-\[]){_VALUE}"


def _not_numeric(value: str, _m: re.Match[str]) -> bool:
    # A value of digits under a `token`/`secret` key is a count or a size (`max_token: 4096`), never a secret.
    return not value.isdigit()


def _line_not_numeric(value: str, m: re.Match[str]) -> bool:
    return _not_numeric(value, m) and _line_key(value, m)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _high_entropy(value: str, _m: re.Match[str]) -> bool:
    classes = sum(any(test(c) for c in value) for test in (str.isupper, str.islower, str.isdigit))
    looks_like_path = value.startswith(("/", "./", "~", "http:", "https:", "file:"))
    return len(value) >= 16 and classes >= 2 and not looks_like_path and _entropy(value) >= 3.5


def _token_like(value: str, _m: re.Match[str]) -> bool:
    # "Bearer authentication" is prose; a token has a digit somewhere, or is long.
    return len(value) >= 32 or any(c.isdigit() for c in value)


_AWS_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])|\[REDACTED:aws-access-key-id\]", _F)


def _beside_aws_key_id(value: str, m: re.Match[str]) -> bool:
    """A bare 40-character key is an AWS secret key when an access key id is within 200 characters of it
    (an `aws configure list`, a credentials dump); both cases are needed, so that a 40-hex sha1 is not one."""
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value)):
        return False
    return _AWS_ID.search(m.string, max(0, m.start() - 200), m.end() + 200) is not None


def _rule(kind: str, pattern: str, anchors: tuple[str, ...], flags: int = 0,
          accept: Callable[[str, re.Match[str]], bool] | None = None, multiline: bool = False) -> SecretRule:
    return SecretRule(kind, re.compile(pattern, _F | flags), anchors, accept, multiline)


_I = re.IGNORECASE
_PASSWORD_KEYS = r"password|passwd|passphrase|mysql_pwd"
_SECRET_KEYS = r"secret|token|api[_-]?key|apikey|secret[_-]?key|access[_-]?key|auth[_-]?key|private[_-]?key"
_SECRET_ANCHORS = ("secret", "token", "key")
_PEM_BODY = r"""(?:[^"\\]|\\[\s\S])*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?=")|\Z)"""

SECRET_RULES: tuple[SecretRule, ...] = (
    # Private keys first: their bodies would otherwise feed the token rules below.
    _rule("gcp-private-key", r'"private_key"\s*:\s*"(?P<v>(?:[^"\\]|\\.)+)"', ('"private_key"',), multiline=True),
    _rule("gcp-private-key-id", r'"private_key_id"\s*:\s*"(?P<v>[^"\\]+)"', ('"private_key_id"',), multiline=True),
    _rule("ssh-private-key", rf"(?P<v>-----BEGIN OPENSSH PRIVATE KEY-----{_PEM_BODY})", ("openssh private key",),
          multiline=True),
    _rule("private-key", rf"(?P<v>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----{_PEM_BODY})", ("private key",),
          multiline=True),
    _rule("jwt", r"(?<![\w-])(?P<v>eyJ[\w-]{6,}\.[\w-]{6,}\.[\w-]*)", ("eyj",)),
    # AWS: the secret key next to its id before the id itself (the id anchors the search).
    _rule("aws-secret-access-key",
          rf"(?:aws_?secret_?access_?key|aws_?secret_?key|secretaccesskey|secret_access_key)"
          rf"(?![\w-]){_SEP}{_NOT_DONE}[\"']?(?P<v>[A-Za-z0-9/+=]{{40}})(?![A-Za-z0-9/+=])", ("secret",), _I),
    _rule("aws-secret-access-key", r"(?<![A-Za-z0-9/+=])(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
          ("akia", "asia", "[redacted:aws-access-key-id]"), accept=_beside_aws_key_id, multiline=True),
    _rule("aws-access-key-id", r"(?<![A-Z0-9])(?P<v>(?:AKIA|ASIA)[A-Z0-9]{16})(?![A-Z0-9])", ("akia", "asia")),
    _rule("aws-session-token",
          rf"(?:x-amz-security-token|aws_session_token|aws_security_token|sessiontoken)"
          rf"(?![\w-]){_SEP}{_NOT_DONE}{_VALUE}", ("token",), _I),
    # Azure.
    _rule("azure-client-secret", r"(?<![\w~.-])(?P<v>[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?![\w~.-])",
          ("q~",)),
    _rule("azure-client-secret", _keyed(r"client[_-]?secret|clientsecret"), ("secret",), _I),
    _rule("azure-storage-key", rf"(?<![\w-])AccountKey={_NOT_DONE}(?P<v>[A-Za-z0-9+/=]{{20,}})", ("accountkey",),
          _I),
    _rule("azure-storage-key", _keyed(r"azure_storage_(?:account_)?key|storage_?account_?key"), ("key",), _I),
    _rule("azure-sas-signature", rf"[?&;]sig={_NOT_DONE}(?P<v>[A-Za-z0-9%+/=_-]{{16,}})", ("sig=",), _I),
    # Vendor tokens with a recognizable prefix.
    _rule("github-token", r"(?<![\w])(?P<v>(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_\w{22,255})"
          r"(?![\w])", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _rule("slack-token", r"(?<![\w-])(?P<v>xox[abposr]-[A-Za-z0-9-]{10,})", ("xox",)),
    _rule("google-api-key", r"(?<![\w-])(?P<v>AIza[\w-]{35})(?![\w-])", ("aiza",)),
    # HTTP credentials.
    _rule("basic-auth", rf"\bAuthorization{_SEP}[\"']?Basic[ \t]+{_NOT_DONE}(?P<v>[A-Za-z0-9+/]+=*)",
          ("basic",), _I),
    _rule("bearer-token", rf"\bBearer[ \t]+{_NOT_DONE}(?P<v>[\w.~+/-]{{8,}}=*)", ("bearer",), _I,
          accept=_token_like),
    _rule("cookie", r"""cookie["']?[ \t]*:[ \t]*["']?(?!\[REDACTED:)(?P<v>[^\r\n"']+)""",
          ("cookie",), _I),
    _rule("cookie", rf"(?<![\w-])--cookie(?:=|{_ARG_SEP}){_NOT_DONE}{_VALUE}", ("--cookie",), _I),
    # Passwords: in URLs, on command lines, in environments and configuration files.
    _rule("url-password",
          r"://[^\s/:@\"'<>]+:(?!\[REDACTED:)(?P<v>[^\s/@\"'<>]+)@",
          ("://",)),
    _rule("password", r"(?:mysql|mariadb|sshpass)[\w-]*[^\n|;&]*?[ \t\x00]-p"
          rf"(?:{_ARG_SEP}(?![-\[]))?{_NOT_DONE}(?P<v>[^\s\x00\"']+)", ("mysql", "mariadb", "sshpass")),
    _rule("password", _keyed_line(_PASSWORD_KEYS), ("pass", "pwd"), _I, accept=_line_key),
    _rule("password", _keyed(_PASSWORD_KEYS), ("pass", "pwd"), _I),
    _rule("password", _flag(_PASSWORD_KEYS), ("pass",), _I),
    # Anything else under a secret-looking key; then any high-entropy value under a key that mentions one.
    _rule("secret", _keyed_line(_SECRET_KEYS), _SECRET_ANCHORS, _I, accept=_line_not_numeric),
    _rule("secret", _keyed(_SECRET_KEYS), _SECRET_ANCHORS, _I, accept=_not_numeric),
    _rule("secret", _flag(_SECRET_KEYS), _SECRET_ANCHORS, _I, accept=_not_numeric),
    _rule("high-entropy-secret",
          rf"(?:secret|token|passw|api_?key|apikey|credential|private_?key|auth_?key|access_?key)[\w.-]*{_SEP}"
          rf"{_NOT_DONE}{_VALUE}", ("secret", "token", "passw", "key", "credential"), _I,
          accept=_high_entropy),
)

SECRET_KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule.kind for rule in SECRET_RULES))


_ALL_ANCHORS = tuple(sorted({a for r in SECRET_RULES for a in r.anchors}))


def _batches() -> list[tuple[tuple[str, ...] | None, tuple[SecretRule, ...]]]:
    """The rules in order, as runs of line-local rules (with the anchors of them all) and single multi-line
    rules (anchors None: run on the whole text)."""
    groups: list[list[SecretRule]] = []
    for rule in SECRET_RULES:
        if rule.multiline or not groups or groups[-1][0].multiline:
            groups.append([rule])
        else:
            groups[-1].append(rule)
    return [(None if g[0].multiline else tuple({a for r in g for a in r.anchors}), tuple(g)) for g in groups]


_BATCHES = _batches()


def redact_secrets(text: str, counts: Counter[str]) -> str:
    """Every secret in `text` replaced by its marker; `counts` gains one per value replaced, by kind."""
    lowered = ascii_lower(text)
    # Most text (counter names, sysfs paths, kernel log lines) holds no anchor at all.
    if not any(anchor in lowered for anchor in _ALL_ANCHORS):
        return text
    for anchors, rules in _BATCHES:
        if anchors is None:
            text = _run(rules, text, counts)
        else:
            text = on_lines(text, lambda t, anchors=anchors: literal_hits(ascii_lower(t), anchors),
                            lambda t, rules=rules: _run(rules, t, counts))
    return text


def _run(rules: tuple[SecretRule, ...], text: str, counts: Counter[str]) -> str:
    lowered = ascii_lower(text)
    for rule in rules:
        if any(anchor in lowered for anchor in rule.anchors):
            text = _apply(rule, text, counts)
    return text


def _apply(rule: SecretRule, text: str, counts: Counter[str]) -> str:
    groups = rule.groups()
    replacement = marker(rule.kind)

    def replace(m: re.Match[str]) -> str:
        group = next(g for g in groups if m.group(g) is not None)
        value = m.group(group)
        if not value or value.lstrip().startswith(_MARK) or (rule.accept and not rule.accept(value, m)):
            return m.group(0)
        counts[rule.kind] += 1
        start, end, base = m.start(group), m.end(group), m.start()
        whole = m.group(0)
        return whole[:start - base] + replacement + whole[end - base:]

    return rule.pattern.sub(replace, text)
