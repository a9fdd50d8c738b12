"""fit_body and markdown_sections: the ticket body within the desk's character limit, most important first,
never cutting a table row or leaving a code block open."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricase.bundler.body import fit_body, markdown_sections
from fabricase.errors import BundleError

TABLE = "| host | port |\n|------|------|\n| gpu001 | mlx5_0/1 |\n| gpu002 | mlx5_3/1 |"
FENCE = "```\n## not a heading\n| not | a table |\n" + "\n".join(f"log line {i}" for i in range(30)) + "\n```"


def lines_of(text: str) -> set[str]:
    return set(text.split("\n"))


def open_block(text: str) -> bool:
    """True when a fenced block (``` / ~~~ / {noformat} / {code}) is left open at the end of text."""
    closer = None
    for line in text.split("\n"):
        if closer is not None:
            if re.fullmatch(rf" {{0,3}}{re.escape(closer[0])}{{{len(closer)},}}\s*", line) or line == closer:
                closer = None
            continue
        if m := re.match(r" {0,3}(`{3,}|~{3,})", line):
            closer = m.group(1)
        elif m := re.fullmatch(r"\{(noformat|code)(?::[^}]*)?\}\s*", line):
            closer = "{" + m.group(1) + "}"
    return closer is not None


def test_a_body_that_fits_is_returned_whole():
    sections = [("summary", "one line"), ("Findings", "## Findings\n\n1. a\n2. b")]
    assert fit_body(sections, 8000) == "one line\n\n## Findings\n\n1. a\n2. b"


def test_cut_at_a_section_boundary_names_what_is_left_out():
    sections = [("summary", "s" * 100), ("Findings", "## Findings\n\n" + "f" * 100),
                ("Timeline", "## Timeline\n\n" + "t" * 300)]
    body = fit_body(sections, 340)
    assert len(body) <= 340
    assert body.startswith("s" * 100 + "\n\n## Findings\n\n" + "f" * 100 + "\n\n(Cut")
    note = body.split("\n")[-1]
    assert "the section \u201cTimeline\u201d" in note and "ticket.md" in note and "340-character" in note
    assert "Findings\u201d" not in note  # kept whole


def test_the_last_section_is_cut_at_a_line_and_the_note_counts_its_lines():
    findings = "## Findings\n\n" + "\n".join(f"{i}. finding number {i}" for i in range(1, 41))
    body = fit_body([("summary", "worst: switch:leaf-3"), ("Findings", findings)], 400)
    assert len(body) <= 400
    kept = body.split("\n")[:-2]  # the note and the blank line before it
    assert all(line in lines_of(findings) | {"worst: switch:leaf-3", ""} for line in kept)
    assert re.search(r"the end of \u201cFindings\u201d \(\d+ of 42 lines\)", body)


def test_a_finding_is_kept_whole_rather_than_cut_after_its_first_line():
    items = [f"{i}. [minor] gpu{i:03d} rdma:mlx5_0/1\n   symbol_error +8 in 5 s\n   - confidence 0.95"
             for i in range(30)]
    findings = "## Findings\n\n" + "\n\n".join(items)
    for limit in range(400, 1500, 7):
        body = fit_body([("Findings", findings)], limit)
        content = body.rpartition("\n\n")[0]
        assert content.endswith("- confidence 0.95"), limit


def test_a_table_keeps_its_header_with_its_separator_and_whole_rows():
    text = "## Hosts\n\n" + TABLE
    for limit in range(50, len(text) + 200):
        body = fit_body([("Hosts", text)], limit)
        assert len(body) <= limit
        rows = [line for line in body.split("\n") if line.startswith("|")]
        assert all(row in lines_of(TABLE) for row in rows)
        assert rows == [] or len(rows) >= 2  # never a header without its separator


def test_a_fence_cut_in_the_middle_is_closed_and_headings_inside_it_do_not_split():
    text = "## Log\n\n" + FENCE
    assert [t for t, _ in markdown_sections("intro\n\n" + text)] == ["summary", "Log"]
    cut_inside = 0
    for limit in range(50, len(text) + 200):
        body = fit_body([("Log", text)], limit)
        assert len(body) <= limit and not open_block(body)
        cut_inside += "log line 3" in body and "log line 29" not in body
    assert cut_inside > 100  # most limits cut the block itself


def test_jira_noformat_and_plain_text_headings():
    jira = ("h2. Findings\n\n{noformat}\n1. [major] gpu001 rdma:mlx5_0/1\n2. [minor] gpu002\n{noformat}\n\n"
            "h2. Timeline\n\nx")
    assert [t for t, _ in markdown_sections(jira)] == ["Findings", "Timeline"]
    body = fit_body(markdown_sections(jira), 170)
    assert len(body) <= 170 and not open_block(body)
    text = "Findings\n--------\n\n1. a\n\nTimeline\n--------\n\n- now"
    assert [t for t, _ in markdown_sections(text)] == ["Findings", "Timeline"]


def test_a_heading_is_not_kept_alone():
    body = fit_body([("s", "short"), ("Findings", "## Findings\n\n" + "x" * 500)], 200)
    assert "## Findings" not in body
    assert "\u201cFindings\u201d" in body


def test_nothing_fits_but_the_note():
    body = fit_body([("summary", "x" * 500)], 150)
    assert len(body) <= 150 and body.startswith("(Cut to")


def test_a_small_limit_gets_the_short_note():
    body = fit_body([("summary", "first line\n" + "x" * 500)], 80)
    assert body == "first line\n\n(Cut to 80 characters; full text: ticket.md.)"


@pytest.mark.parametrize("limit", [40, 0, -1])
def test_a_limit_too_small_for_the_note_is_one_line_error(limit):
    with pytest.raises(BundleError, match="cannot hold"):
        fit_body([("summary", "x" * 500)], limit)


def test_a_non_integer_limit_is_refused():
    with pytest.raises(BundleError, match="integer"):
        fit_body([("summary", "x")], "8000")  # type: ignore[arg-type]


def suspect_sections(n: int, lines: int = 8) -> list[tuple[str, str]]:
    out = [("summary", "8 suspects on 8 of 16 captured hosts.")]
    for i in range(1, n + 1):
        title = f"Suspect {i} of {n}: link errors on gpu{i:03d} mlx5_{i}/1"
        body = "\n".join(f"  - evidence line {k} of suspect {i}: symbol_error +40 (8/s)" for k in range(lines))
        out.append((title, f"## {title}\n\nVerdict: bad link\nEvidence:\n{body}\nAction: replace the cable"))
    out.append(("Timeline", "## Timeline\n\n" + "\n".join(f"- t{k}: event" for k in range(20))))
    return out


def is_suspect(title: str) -> bool:
    return title.startswith("Suspect ")


def test_a_whole_section_is_kept_whole_or_left_out_never_cut_inside():
    sections = suspect_sections(5)
    texts = {title: text for title, text in sections}
    for limit in range(300, 3000, 13):
        body = fit_body(sections, limit, whole=is_suspect)
        assert len(body) <= limit
        content = body.rpartition("\n\n")[0] if "(Cut" in body else body  # without the note, which names them
        kept = [t for t in texts if is_suspect(t) and t in content]
        for title in kept:
            assert texts[title] in content, (limit, title)  # whole
        assert kept == [t for t in texts if is_suspect(t)][: len(kept)]  # suspect 3 never without suspect 2


def test_without_whole_the_same_section_is_cut_at_a_line():
    sections = suspect_sections(1, lines=40)
    body = fit_body(sections, 1200)
    assert "Suspect 1 of 1" in body and "evidence line 39" not in body
    assert "Suspect 1 of 1" not in fit_body(sections, 1200, whole=is_suspect).split("(Cut")[0]


def test_priority_chooses_what_stays_and_the_body_keeps_its_order():
    sections = [("summary", "s" * 50), ("Ruled out", "## Ruled out\n\n" + "r" * 900),
                ("Requested action", "## Requested action\n\n" + "a" * 100),
                ("References", "## References\n\n- bundle: sha256:ab")]
    body = fit_body(sections, 450, priority=[0, 2, 3, 1])
    assert len(body) <= 450
    assert body.index("s" * 50) < body.index("## Requested action") < body.index("## References")
    assert "## Ruled out" not in body and "\u201cRuled out\u201d" in body.split("\n")[-1]
    # the same sections, the default priority: the order given
    assert "## References" not in fit_body(sections, 450)


# --- properties ---------------------------------------------------------------------------------------

# no word is markup of its own: a heading (`h2. x`, an underline `---`), a table row, a fence
words = (
    st.text(alphabet="abcdefghij klmnop:/_-.0123456789", min_size=1, max_size=60)
    .map(str.strip)
    .filter(lambda w: w and not re.fullmatch(r"-{3,}|h[1-6]\..*", w))
)
paragraph = st.lists(words, min_size=1, max_size=6).map("\n".join)
table = st.lists(st.tuples(words, words), min_size=0, max_size=6).map(
    lambda rows: "\n".join(["| Host | Port |", "|---|---|", *(f"| {x} | {y} |" for x, y in rows)])
)
fence = st.tuples(st.sampled_from(["```", "~~~~", "{noformat}"]), st.lists(words, max_size=6)).map(
    lambda t: "\n".join([t[0], *t[1], t[0]])
)
block = st.one_of(paragraph, table, fence)
section = st.tuples(words, st.lists(block, min_size=1, max_size=5)).map(
    lambda t: (t[0], f"## {t[0]}\n\n" + "\n\n".join(t[1]))
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections=st.lists(section, min_size=1, max_size=6), slack=st.integers(min_value=0, max_value=3000))
def test_property_never_over_the_limit_most_important_first_blocks_intact(sections, slack):
    whole = "\n\n".join(text for _, text in sections)
    limit = 200 + slack
    body = fit_body(sections, limit)
    assert len(body) <= limit
    if len(whole) <= limit:
        assert body == whole
        return
    content, _, note = body.rpartition("\n\n")
    assert note.startswith("(Cut to") and "\n" not in note and note.endswith("ticket.md.)")
    if not content and note == body:
        return
    # what is kept is the start of the ticket, in its order (a closing fence line may be added)
    kept = content.split("\n")
    closed_here = open_block("\n".join(kept[:-1])) and not open_block(content)
    original = "\n".join(kept[:-1]) if closed_here else content
    assert whole.startswith(original)
    assert not open_block(content)
    rows = [line for line in kept if line.startswith("| ")]
    assert all(row in lines_of(whole) for row in rows)
    if kept[-1] == "| Host | Port |":
        pytest.fail("a table header was left without its separator")


@settings(max_examples=200, deadline=None)
@given(sections=st.lists(section, min_size=1, max_size=6))
def test_property_sections_round_trip(sections):
    whole = "\n\n".join(text for _, text in sections)
    assert "\n\n".join(text for _, text in markdown_sections(whole)) == whole
    assert [t for t, _ in markdown_sections(whole)] == [t for t, _ in sections]
