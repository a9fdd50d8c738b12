"""The secret rules at the coverage of public rule sets (issue 14): every format of the seeded corpus is
redacted and counted under its kind, in every carrier and inside a big log; no look-alike is touched; every
rule is linear on adversarial text; and detect-secrets, as an outside oracle, finds nothing in what is left."""

from __future__ import annotations

import random
import re
import time
from collections import Counter

import pytest
from secret_corpus import adversarial_texts, carrier_lines, lookalikes, secret_corpus

from fabricase.redact import SECRET_KINDS
from fabricase.redact.lines import RUN_CHARS, RUN_MIN, WINDOW_MIN, token_runs
from fabricase.redact.secrets import SECRET_RULES, redact_secrets

SEED = 14
CORPUS = secret_corpus(SEED)
LOOKALIKES = lookalikes(SEED)
_SHAPE_RULES = [r for r in SECRET_RULES if r.runs or r.kind in ("aws-access-key-id", "jwt")]
# Secrets recognized by the token's own shape (no key around it): these must go even standing alone.
SHAPED = [s for s in CORPUS if any(r.pattern.fullmatch(s.value) for r in _SHAPE_RULES)]


def redacted(text: str) -> tuple[str, Counter[str]]:
    counts: Counter[str] = Counter()
    return redact_secrets(text, counts), counts


def test_the_corpus_has_300_secrets_in_40_formats_built_fresh_from_the_seed():
    kinds = Counter(s.kind for s in CORPUS)
    assert len(CORPUS) >= 300 and len(kinds) >= 40, (len(CORPUS), len(kinds))
    assert len({s.value for s in CORPUS}) == len(CORPUS)  # fresh values
    assert all(s.value in s.text for s in CORPUS)
    assert secret_corpus(SEED) == CORPUS and secret_corpus(SEED + 1) != CORPUS
    assert len(LOOKALIKES) >= 100


def test_every_rule_kind_has_a_corpus_or_table_case():
    """What test_rules' table does not show, the corpus does: every kind is exercised."""
    from test_rules import SECRETS

    assert set(SECRET_KINDS) == {s.kind for s in CORPUS} | {kind for kind, _, _ in SECRETS}


@pytest.mark.parametrize("secret", CORPUS, ids=[f"{s.kind}-{i}" for i, s in enumerate(CORPUS)])
def test_each_corpus_secret_is_redacted_in_its_carrier_and_counted_by_kind(secret):
    out, counts = redacted(secret.text)
    assert secret.value not in out, out
    assert counts[secret.kind] >= 1, dict(counts)
    assert redacted(out) == (out, Counter())  # a marker is never matched again


def test_shaped_tokens_go_standing_alone_and_in_every_carrier():
    assert len(SHAPED) >= 200 and len({s.kind for s in SHAPED}) >= 40
    missed = []
    for secret in SHAPED:
        for text in [secret.value, *carrier_lines(secret.value)]:
            out, counts = redacted(text)
            if secret.value in out or not counts:
                missed.append((secret.kind, text[:80]))
    assert not missed, missed[:5]


def test_secrets_inside_a_big_log_are_redacted_as_in_small_texts():
    """Past WINDOW_MIN the line and token-run windows decide what is searched: the result must not change."""
    rng = random.Random(SEED)
    filler = [f"2026-11-30T00:00:{i % 60:02d}.000001+0000 gpu001 kernel: mlx5_core 0000:3b:00.{i % 8}: "
              f"rx_prio{i % 8}_pause_duration: {rng.randrange(10**9)}" for i in range(2000)]
    pieces = filler[:]
    for secret in CORPUS:
        pieces.insert(rng.randrange(len(pieces)), secret.text)
    text = "\n".join(pieces)
    assert len(text) > 50 * WINDOW_MIN
    out, _ = redacted(text)
    assert [s.kind for s in CORPUS if s.value in out] == []
    assert all(line in out for line in filler)


def test_no_look_alike_is_touched():
    """Digests, GUIDs, UUIDs, GPU UUIDs, firmware versions, PCI addresses and MACs, even under a key that
    mentions a secret (`token_digest=<sha256>`, `access_key_id: GPU-…`), counts and base64 data stay."""
    altered = [(la.kind, la.text, redacted(la.text)[0]) for la in LOOKALIKES if redacted(la.text)[0] != la.text]
    assert len(altered) == 0, altered[:5]


@pytest.mark.parametrize("text", [
    "token_digest=3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
    "access_key_id: GPU-5f3c2a1b-9d8e-4f70-a1b2-c3d4e5f60718",
    "secret_hash: 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "token_guid=0x0c42a10300123456",
    "credential_port_guid: 0c42:a103:0012:3456",
    "api_key_uuid: 123e4567-e89b-42d3-a456-426614174000",
])
def test_the_high_entropy_rule_leaves_identifiers_next_to_a_secret_key(text):
    assert redacted(text) == (text, Counter())


@pytest.mark.parametrize(("text", "value"), [
    ("git clone https://ci:pa/ss@w0rd@git.example.com/x.git", "pa/ss@w0rd"),
    ("mysql -h db -u root -p'two words' jobs", "two words"),
    ('mysql -h db -uroot -p"two words" jobs', "two words"),
    ("machine api.example.com login ci password hunter2xyz", "hunter2xyz"),
    ('{"auths": {"nvcr.io": {"auth": "cm9ib3Q6aHVudGVyMnh5eg=="}}}', "cm9ib3Q6aHVudGVyMnh5eg=="),
])
def test_passwords_in_their_harder_forms(text, value):
    out, counts = redacted(text)
    assert value not in out and sum(counts.values()) == 1, out


# -- linearity ----------------------------------------------------------------------------------------------

LINEAR_LIMIT_S = 0.5


def _adversarial_sample(rule, size: int, rng: random.Random) -> dict[str, str]:
    """The texts built on the rule's first two anchors, and a seeded sample of the others (the benchmark runs
    them all)."""
    texts = adversarial_texts(rule, size)
    own = [n for n in texts if any(repr(a) in n for a in rule.anchors[:2])]
    rest = sorted(set(texts) - set(own))
    return {n: texts[n] for n in own + rng.sample(rest, min(6, len(rest)))}


@pytest.mark.parametrize("index", range(len(SECRET_RULES)), ids=[f"{i}-{r.kind}" for i, r in enumerate(SECRET_RULES)])
def test_every_rule_is_linear_on_100_kb_of_adversarial_text(index):
    rule = SECRET_RULES[index]
    slow = {}
    for name, text in _adversarial_sample(rule, 100_000, random.Random(index)).items():
        start = time.perf_counter()
        for _ in rule.pattern.finditer(text):
            pass
        elapsed = time.perf_counter() - start
        if elapsed > LINEAR_LIMIT_S:
            slow[name] = round(elapsed, 2)
    assert not slow, slow


def test_run_local_rules_match_only_run_characters_and_at_least_run_min():
    """What lines.on_runs needs to be exact: a match never leaves a token run, and no run shorter than
    RUN_MIN can hold one."""
    allowed = set(RUN_CHARS)
    for rule in (r for r in SECRET_RULES if r.runs):
        low, _ = re._parser.parse(rule.pattern.pattern, rule.pattern.flags).getwidth()  # type: ignore[attr-defined]
        assert low >= RUN_MIN, (rule.kind, low)
    for secret in (s for s in CORPUS if s.kind in {r.kind for r in SECRET_RULES if r.runs}):
        assert set(secret.value) <= allowed, secret.kind
        assert any(start <= secret.text.find(secret.value) < end for start, end in token_runs(secret.text))


# -- the oracle ---------------------------------------------------------------------------------------------


def test_detect_secrets_finds_nothing_in_the_redacted_corpus(tmp_path):
    pytest.importorskip("detect_secrets")
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    def scan(texts: list[str], name: str) -> list[tuple[str, str]]:
        path = tmp_path / name
        path.write_text("\n".join(texts) + "\n")
        lines = path.read_text().splitlines()
        found = SecretsCollection()
        with default_settings():
            found.scan_file(str(path))
        return [(secret.type, lines[secret.line_number - 1][:120]) for _, secret in found]

    assert len(scan([s.text for s in CORPUS], "raw.txt")) >= 100  # the oracle does see the planted secrets
    assert scan([redacted(s.text)[0] for s in CORPUS], "redacted.txt") == []
