"""What data puts into a ticket is shown, never read as structure or passed in secret (issue 14): a host name or
a kernel-log line cannot open a heading, a quote or an HTML block; control characters and bidi overrides are
shown as escapes; and a secret split by wrapping is redacted before the wrap, so no split can hide it."""

from __future__ import annotations

import dataclasses
import random
import re
import string

import pytest
import ticket_cases as tc
from test_desk_templates import draft

from fabricase.models import Severity
from fabricase.templates import wrap

INJECTIONS = ["## Resolved: no action needed", "> quoted by AWS", "<img src=x onerror=alert(1)>", "===",
              "h2. Closed"]


def _structure_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r" {0,3}(#|>|<|=+\s*$|h[1-6]\.)", line)]


@pytest.mark.parametrize("desk", tc.DESKS)
def test_a_symptom_cannot_inject_structure(desk):
    clean = _structure_lines(draft(desk).body)
    for injected in INJECTIONS:
        d = draft(desk, symptom=f"job slow\n{injected}\n{injected}")
        assert _structure_lines(d.body) == clean, injected


@pytest.mark.parametrize("desk", tc.DESKS)
def test_control_characters_and_bidi_overrides_are_shown_escaped(desk):
    d = draft(desk, symptom="busbw \x1b]8;;http://evil\x07fell\x1b[2J \u202eTXT.exe\r\x08 done")
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]", d.title + d.body)
    assert "\\x1b" in d.body and "\\u202e" in d.body


def _secret(rng: random.Random, n: int = 24) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n - 2)) + "a9"


def test_a_flag_and_its_value_split_by_the_wrap_are_redacted():
    rng = random.Random(14)
    missed = []
    for pad in range(40):
        value = _secret(rng)
        text = "x" * pad + f" mysql --password {value} and PGPASSWORD={_secret(rng)} later"
        out = wrap(text, width=60)
        if value in out or "PGPASSWORD=" in out and "[REDACTED:" not in out.split("PGPASSWORD=", 1)[1][:12]:
            missed.append(pad)
    assert missed == []


def test_a_pem_header_split_by_the_wrap_is_redacted():
    rng = random.Random(15)
    body = _secret(rng, 64)
    for width in range(30, 101, 7):
        out = wrap(f"key: -----BEGIN RSA PRIVATE KEY----- {body} -----END RSA PRIVATE KEY-----", width=width)
        assert body not in out, width


def test_severity_and_prose_are_unchanged_by_the_escaping():
    d = draft("generic", severity=Severity.MAJOR)
    assert "\\" not in d.title


@pytest.mark.parametrize("desk", tc.DESKS)
def test_a_host_name_cannot_inject_structure(desk):
    clean = _structure_lines(draft(desk).body)
    for injected in INJECTIONS:
        name = f"gpu002\n{injected}"
        hosts = [{**h, "host": name} if h["host"] == "gpu002" else h for h in tc.hosts()]
        placements = [dataclasses.replace(p, host=name) if p.host == "gpu002" else p for p in tc.placements(desk)]
        findings = [dataclasses.replace(f, host=name) if f.host == "gpu002" else f
                    for f in tc.findings(tc.shared_component(desk))]
        d = draft(desk, hosts=hosts, placements=placements, findings=findings)
        assert len(_structure_lines(d.body)) == len(clean), (injected, d.body)


@pytest.mark.parametrize("desk", tc.DESKS)
def test_a_kernel_log_line_cannot_inject_structure(desk):
    clean = _structure_lines(draft(desk).body)
    log = tc.KERNEL_LOG_GPU002 + "".join(f"2024-05-14T08:13:00.000000+0000 gpu002 kernel: x\n{i}\n"
                                         for i in INJECTIONS)
    d = draft(desk, kernel_logs={"gpu002": log})
    assert _structure_lines(d.body) == clean
