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

from fabricase.redact.lines import WINDOW_MIN, ascii_lower, literal_hits, on_lines, on_runs, token_runs
from fabricase.redact.vendors import TOKEN_FORMATS, TokenFormat, token_regex

__all__ = [
    "SECRET_KINDS",
    "SECRET_RULES",
    "SecretRule",
    "marker",
    "redact_secrets",
]


@dataclass(frozen=True)
class SecretRule:
    kind: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]  # lower-case strings one of which the text must hold for the rule to be tried
    accept: Callable[[str, re.Match[str]], bool] | None = None  # a last check of the value (and its match)
    multiline: bool = False  # may match across a line break: always run on the whole text
    runs: bool = False  # matches only within token runs (lines.token_runs): run on those (no anchors: always)

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
    the key starts the line (after indentation or `export`) and ends with KEY."""
    # `KEY=value rest` with no space around `=` is a shell assignment before a command: left to _keyed.
    # Anchored at the line start, so each line is tried once; the value runs to the last non-blank of the line
    # (a greedy run and one step back: linear, where a lazy value before `[ \t]*$` is quadratic in blanks).
    return rf"(?m)^[ \t]*+(?:export[ \t]++)?[\w.-]{{0,64}}?(?:{key})(?![\w-])" \
           rf"(?:[ \t]*+:[ \t]*+|[ \t]+=[ \t]*+|=[ \t]++){_NOT_DONE}(?![\"'])" \
           r"(?P<vl>[^\s\x00](?:[^\n\x00]*[^\s\x00])?)[ \t\r]*$"


def _flag(key: str) -> str:
    """`--KEY value` (the `=` form is taken by _keyed)."""
    return rf"(?<![\w-])--[\w-]{{0,64}}?(?:{key})(?![\w-]){_ARG_SEP}(?![-\[]){_VALUE}"


def _program_flag(programs: str, flag: str) -> str:
    """`PROGRAM ... FLAGvalue`, `FLAG value`, `FLAG'value'`: a password flag of one program (`mysql -pX`,
    `ipmitool -P X`), within its first 32 arguments (a pipe, `;` or `&` ends the command)."""
    # The program name stands alone (`mysqlmysql…` is one start, not one per repetition), and the arguments
    # before the flag are taken whole and never given back: each start costs one pass over its command.
    return rf"(?<![\w-])(?:{programs})[\w-]{{0,32}}+(?:[ \t\x00]++(?!{flag})[^\s\x00|;&]++){{0,32}}+" \
           rf"[ \t\x00]++{flag}(?:{_ARG_SEP}(?![-\[]))?{_NOT_DONE}" \
           r"""(?:'(?P<vs>[^'\n]*)'|"(?P<vd>[^"\n]*)"|(?P<vu>[^\s\x00"']+))"""


def _not_numeric(value: str, _m: re.Match[str]) -> bool:
    # A value of digits under a `token`/`secret` key is a count or a size (`max_token: 4096`), never a secret.
    return not value.isdigit()


# What a key that mentions a secret (`token_digest`, `access_key_id`, `secret_hash`) holds when it is no secret:
# a digest, a GUID or UUID (GPU and MIG UUIDs too), a version, a PCI address, a MAC.
_IDENTIFIER = re.compile(
    r"(?:sha(?:1|224|256|384|512)[:-])?(?:[0-9a-f]{32}|[0-9A-F]{32}|[0-9a-f]{40}|[0-9A-F]{40}|[0-9a-f]{56}"
    r"|[0-9a-f]{64}|[0-9A-F]{64}|[0-9a-f]{96}|[0-9a-f]{128})"
    r"|sha(?:256|384|512)-[A-Za-z0-9+/]{43,86}={0,2}"
    r"|0x[0-9a-fA-F]{1,32}"
    r"|[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3,7}"
    r"|(?:(?:GPU|MIG|MIG-GPU)-)?\{?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\}?"
    r"(?:/\d{1,3}){0,2}"
    r"|v?\d{1,6}(?:[._-]\d{1,8}){1,5}"
    r"|(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
    r"|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5,19}",
    re.ASCII,
)


def _identifier(value: str) -> bool:
    return _IDENTIFIER.fullmatch(value.rstrip(",;)]}")) is not None


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _high_entropy(value: str, _m: re.Match[str]) -> bool:
    if _identifier(value):
        return False
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


def _standalone(value: str, m: re.Match[str]) -> bool:
    """No word character or `-` right before the token (`x-ghp_…`, `my_hf_…` are words, not tokens)."""
    start = m.start()
    return start == 0 or not (m.string[start - 1].isalnum() or m.string[start - 1] in "_-")


def _run_rule(kind: str, pattern: str, anchors: tuple[str, ...]) -> SecretRule:
    return SecretRule(kind, re.compile(pattern, _F), anchors, _standalone, runs=True)


def _token_rule(fmt: TokenFormat) -> SecretRule:
    return _run_rule(fmt.kind, token_regex(fmt), fmt.anchors)


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
    # A PuTTY key file whole, as a PEM block is (its comment often names a user and a host); a fragment from
    # its private lines on.
    _rule("putty-private-key", r"(?P<v>PuTTY-User-Key-File-[23]:[^\n]{0,256}\n(?:[^\n]{0,4096}\n){0,64}?"
          r"Private-MAC:[ \t]*[0-9a-fA-F]{0,128})", ("putty-user-key-file",), multiline=True),
    _rule("putty-private-key", r"Private-Lines:[ \t]*\d{1,5}\r?\n"
          r"(?P<v>(?:[A-Za-z0-9+/=]{1,256}\r?\n)*+[A-Za-z0-9+/=]{1,256})", ("private-lines",), multiline=True),
    # Vendor formats, on token runs (all 24 characters or more): cloud, model hubs, LLM APIs, CI, registries,
    # chat, payment and mail (vendors.py).
    _run_rule("azure-client-secret", r"(?<![\w~.-])(?P<v>[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?![\w~.-])",
              ("q~",)),
    _run_rule("github-token", r"(?P<v>(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}+|github_pat_\w{22,255}+)(?![\w-])",
              ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _run_rule("google-api-key", r"(?P<v>AIza[\w-]{35})(?![\w-])", ("aiza",)),
    *(_token_rule(fmt) for fmt in TOKEN_FORMATS),
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
    _rule("azure-client-secret", _keyed(r"client[_-]?secret|clientsecret"), ("secret",), _I),
    _rule("azure-storage-key", rf"(?<![\w-])AccountKey={_NOT_DONE}(?P<v>[A-Za-z0-9+/=]{{20,}})", ("accountkey",),
          _I),
    _rule("azure-storage-key", _keyed(r"azure_storage_(?:account_)?key|storage_?account_?key"), ("key",), _I),
    _rule("azure-sas-signature", rf"[?&;]sig={_NOT_DONE}(?P<v>[A-Za-z0-9%+/=_-]{{16,}})", ("sig=",), _I),
    # A Telegram bot token holds a `:`, which ends a token run: a line rule of its own.
    _rule("telegram-bot-token", r"(?:(?<=/bot)|(?<![\w-]))(?P<v>\d{8,10}:AA[\w-]{33})(?![\w-])", (":aa",)),
    # Credentials files.
    _rule("docker-auth", rf'"auth"[ \t]*+:[ \t]*+"{_NOT_DONE}(?P<v>[A-Za-z0-9+/=]{{4,}})"', ('"auth"',)),
    _rule("npm-token", rf"(?<![\w-])_auth[ \t]*+={_NOT_DONE}[ \t]*+{_VALUE}", ("_auth",)),
    # HTTP credentials.
    _rule("basic-auth", rf"\bAuthorization{_SEP}[\"']?Basic[ \t]+{_NOT_DONE}(?P<v>[A-Za-z0-9+/]+=*)",
          ("basic",), _I),
    _rule("bearer-token", rf"\bBearer[ \t]+{_NOT_DONE}(?P<v>[\w.~+/-]{{8,}}=*)", ("bearer",), _I,
          accept=_token_like),
    _rule("cookie", r"""cookie["']?[ \t]*:[ \t]*["']?(?!\[REDACTED:)(?P<v>[^\r\n"']+)""",
          ("cookie",), _I),
    _rule("cookie", rf"(?<![\w-])--cookie(?:=|{_ARG_SEP}){_NOT_DONE}{_VALUE}", ("--cookie",), _I),
    # Passwords: in URLs, on command lines, in environments and configuration files.
    # The password runs to the last `@` of the URL (passwords hold `/` and `@`): `@`-separated stretches taken
    # whole, the last one being the host and the rest of the URL.
    _rule("url-password", r"://[^\s/:@\"'<>]{1,256}+:(?!\[REDACTED:)"
          r"(?P<v>[^\s\"'<>@]{1,256}+(?:@[^\s\"'<>@]{0,256}+)*?)@[^\s\"'<>@]*+(?![^\s\"'<>])", ("://",)),
    _rule("password", _program_flag("mysql|mariadb|sshpass", "-p"), ("mysql", "mariadb", "sshpass")),
    _rule("password", _program_flag("ipmitool", "-P"), ("ipmitool",)),
    _rule("password", _program_flag("redis-cli", "-a"), ("redis-cli",)),
    _rule("password", r"(?<![\w-])curl(?:[ \t]++(?!(?:-u|--user)[ \t=])[^\s|;&]++){0,32}+[ \t]++(?:-u|--user)"
          r"(?:[ \t]+|=)"
          r"""(?:'[^':\n]{1,128}:(?P<vs>[^'\n]*)'|"[^":\n]{1,128}:(?P<vd>[^"\n]*)"|"""
          r"""[^\s:"']{1,128}:(?!\[REDACTED:)(?P<vu>[^\s"']+))""", ("curl",)),
    _rule("password", rf"(?<![\w-])-pass(?:in|out)?[ \t]+pass:{_NOT_DONE}(?P<vu>[^\s\x00\"']+)", ("pass:",)),
    # netrc: `machine h login u password p` on one line, or `password p` alone on its line.
    _rule("password", rf"(?<![\w-])login[ \t]+[^\s]{{1,256}}[ \t]+password[ \t]+{_NOT_DONE}(?P<vu>[^\s]+)",
          ("login",)),
    _rule("password", rf"(?m)^[ \t]*+password[ \t]+{_NOT_DONE}(?P<vu>[^\s\"']+)[ \t]*+\r?$", ("password",)),
    _rule("password", r'key="(?:ClearText)?Password"[ \t]+value="(?!\[REDACTED:)(?P<vd>[^"\n]*)"', ("password",),
          _I),
    _rule("secret", rf"(?<![\w-])wandb[ \t]+login(?:[ \t]+--relogin)?[ \t]+{_NOT_DONE}(?P<vu>[\w-]{{40,86}})",
          ("wandb",)),
    _rule("password", _keyed_line(_PASSWORD_KEYS), ("pass", "pwd"), _I),
    _rule("password", _keyed(_PASSWORD_KEYS), ("pass", "pwd"), _I),
    _rule("password", _flag(_PASSWORD_KEYS), ("pass",), _I),
    # Anything else under a secret-looking key; then any high-entropy value under a key that mentions one.
    _rule("secret", _keyed_line(_SECRET_KEYS), _SECRET_ANCHORS, _I, accept=_not_numeric),
    _rule("secret", _keyed(_SECRET_KEYS), _SECRET_ANCHORS, _I, accept=_not_numeric),
    _rule("secret", _flag(_SECRET_KEYS), _SECRET_ANCHORS, _I, accept=_not_numeric),
    _rule("high-entropy-secret",
          rf"(?:secret|token|passw|api_?key|apikey|credential|private_?key|auth_?key|access_?key)[\w.-]{{0,64}}{_SEP}"
          rf"{_NOT_DONE}{_VALUE}", ("secret", "token", "passw", "key", "credential"), _I,
          accept=_high_entropy),
)

SECRET_KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule.kind for rule in SECRET_RULES))


# Run-local rules need a token run, which the fast path looks for instead of their many anchors.
_ALL_ANCHORS = tuple(sorted({a for r in SECRET_RULES if not r.runs for a in r.anchors}))


_LINES, _WHOLE, _RUNS = "lines", "whole", "runs"


def _batches() -> list[tuple[str, tuple[str, ...], tuple[SecretRule, ...]]]:
    """The rules in order, as (how, anchors, rules): runs of line-local rules with the anchors of them all,
    single multi-line rules (run on the whole text), runs of run-local rules (run on token runs)."""
    groups: list[list[SecretRule]] = []
    for rule in SECRET_RULES:
        if not groups or rule.multiline or groups[-1][0].multiline or rule.runs != groups[-1][0].runs:
            groups.append([rule])
        else:
            groups[-1].append(rule)
    out = []
    for g in groups:
        how = _WHOLE if g[0].multiline else _RUNS if g[0].runs else _LINES
        out.append((how, _fewest({a for r in g for a in r.anchors}), tuple(g)))
    return out


def _fewest(anchors: set[str]) -> tuple[str, ...]:
    """The anchors that find every line the given ones find: each scan of a big text costs, and a line that
    holds `password` holds `pass`."""
    return tuple(sorted(a for a in anchors if not any(b != a and b in a for b in anchors)))


_BATCHES = _batches()


def redact_secrets(text: str, counts: Counter[str]) -> str:
    """Every secret in `text` replaced by its marker; `counts` gains one per value replaced, by kind."""
    lowered = ascii_lower(text)
    # Most items (counter names, sysfs paths, states) hold no anchor and no token run at all. A big text holds
    # some anchor anyway, and each batch below looks for its own.
    if len(text) < WINDOW_MIN and not any(anchor in lowered for anchor in _ALL_ANCHORS) and not token_runs(text):
        return text
    for how, anchors, rules in _BATCHES:
        before = text
        if how == _RUNS:
            text = on_runs(text, token_runs(text), lambda t, rules=rules: _run(rules, t, counts))
        elif how == _WHOLE:
            text = _run(rules, text, counts, lowered)
        else:
            text = on_lines(text, lambda t, anchors=anchors: literal_hits(ascii_lower(t), anchors),
                            lambda t, rules=rules: _run(rules, t, counts))
        if text != before:
            lowered = ascii_lower(text)
    return text


def _run(rules: tuple[SecretRule, ...], text: str, counts: Counter[str], lowered: str | None = None) -> str:
    lowered = ascii_lower(text) if lowered is None else lowered
    for rule in rules:
        if (rule.runs and not rule.anchors) or any(anchor in lowered for anchor in rule.anchors):
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
