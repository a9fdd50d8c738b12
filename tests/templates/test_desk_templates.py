"""Every shipped template, rendered for the fixed 3-host case (two hosts below one shared switch): golden output,
the sections in order, and each desk's own terms."""

from __future__ import annotations

import re
from importlib import resources

import jinja2
import pytest
import ticket_cases as tc
from golden_files import GOLDEN, check_golden

from fabricase.bundler.body import markdown_sections
from fabricase.models import Severity
from fabricase.templates import environment, jira_table, render_draft, ticket_template
from fabricase.templates.ruled_out import checks_run
from fabricase.templates.severity import desk_severity
from fabricase.templates.suspects import diagnosis_of

SECTIONS = ["Impact on the workload", "Ruled out", "Timeline", "Requested action", "References"]
HOSTS_TITLE = {"aws": "Affected instances", "gcp": "Affected instances", "azure": "Affected VMs"}
# ARM resource ids and hashed topology ids are never split, so a line holding one may pass 100 columns
LONG_ID = re.compile(r"/subscriptions/\S+")


def draft(desk: str, **overrides):
    kwargs = dict(
        provider=desk,
        symptom=tc.SYMPTOM,
        severity=Severity.MAJOR,
        findings=tc.findings(tc.shared_component(desk)),
        hosts=tc.hosts(),
        placements=tc.placements(desk),
        bundle_id=tc.BUNDLE_ID,
        capture_created_at=tc.CREATED_AT,
        escalation_id=tc.ESCALATION,
        checks=checks_run(tc.host_captures()),
        kernel_logs={"gpu002": tc.KERNEL_LOG_GPU002},
        events=tc.events(),
    )
    return render_draft(**(kwargs | overrides))


def heading(desk: str, text: str) -> str:
    if desk == "jira":
        return f"h2. {text}\n"
    if desk in ("email", "zendesk"):
        return f"{text}\n{'-' * len(text)}\n"
    return f"## {text}\n"


@pytest.mark.parametrize("desk", tc.DESKS)
def test_ticket_golden(desk):
    d = draft(desk)
    check_golden(f"ticket_{desk}.md", d.title + "\n\n" + d.body)


def test_summary_golden():
    check_golden("summary.md", draft("generic").summary)


def test_every_shipped_template_has_a_golden_file():
    shipped = {p.name for p in resources.files("fabricase.templates").iterdir() if p.name.endswith(".md.j2")}
    desks = {name.removeprefix("ticket_").removesuffix(".md.j2") for name in shipped if name.startswith("ticket_")}
    assert desks == set(tc.DESKS)
    assert all((GOLDEN / f"ticket_{d}.md").is_file() for d in desks)
    assert (GOLDEN / "summary.md").is_file()


@pytest.mark.parametrize("desk", tc.DESKS)
def test_each_desk_gets_its_own_template(desk):
    assert ticket_template(desk) == f"ticket_{desk}.md.j2"


@pytest.mark.parametrize("desk", tc.DESKS)
def test_sections_come_in_order(desk):
    body = draft(desk).body
    hosts_title = HOSTS_TITLE.get(desk, "Affected hosts")
    titles = [t for t, _ in markdown_sections(body)]
    suspects = [t for t in titles if t.startswith("Suspect ")]
    assert suspects == [f"Suspect {i} of 4: " + t.split(": ", 1)[1] for i, t in enumerate(suspects, 1)]
    order = [SECTIONS[0], *suspects, hosts_title, *SECTIONS[1:]]
    positions = [body.index(heading(desk, h)) for h in order]
    assert positions == sorted(positions)
    # the scope line comes first
    first = body.removeprefix("{noformat}\n")
    assert first.startswith("4 suspects (1 of them shared) on 2 of 3 captured hosts; 1 host checked and healthy.")


@pytest.mark.parametrize("desk", tc.DESKS)
def test_lines_fit_100_columns_except_unsplittable_ids(desk):
    d = draft(desk)
    assert len(d.title) <= 120 and "\n" not in d.title  # the summary repeats the title: up to 120
    for text in (d.body, d.summary):
        lines = [line for line in text.splitlines() if line not in (d.title, d.title.removeprefix("[FC-0012] "))]
        long = [line for line in lines if len(line) > 100 and not LONG_ID.search(line)]
        assert long == [], long


LOWER = {"aws": "normal", "gcp": "P3", "azure": "minimal", "jira": "Medium", "zendesk": "normal", "generic": "minor",
         "email": "minor"}


@pytest.mark.parametrize("desk", tc.DESKS)
def test_a_capped_severity_still_fits(desk):
    body = draft(desk, severity=Severity.CRITICAL, max_level=LOWER[desk]).body
    lines = body.split("\n\n")
    severity = next(p for p in lines if p.removeprefix("{noformat}\n").startswith(("Severity:", "Priority:")))
    assert all(len(line) <= 100 for line in severity.splitlines())
    if desk not in ("generic", "email"):
        assert f"capped from {desk_severity(desk, 'major').code} by the max_level {LOWER[desk]}" in " ".join(
            body.split())


@pytest.mark.parametrize("desk", tc.DESKS)
def test_the_facts_every_desk_must_carry(desk):
    body = draft(desk).body
    for fact in (
        "link.error_recovery 38; fleet 0.2",  # evidence against the fleet baseline
        "q-value 0.0004",
        "confidence 0.95",
        "Where: gpu001: rdma:mlx5_3/1",
        "no Xid on any of the 3 hosts",  # ruled out
        "no PCIe downgrade on any of the 3 hosts",
        "no PHY, FEC or FCS errors on the other 2 hosts",  # gpu001's symbol errors are PHY errors
        "2024-05-14T08:02:11.204518+0000: gpu002: first kernel-log error: eth3 link down",  # timeline
        "2024-05-14T08:31:05Z: created: escalation FC-0012 opened",
        f"bundle id (manifest sha256): {tc.BUNDLE_ID}",
        "raw findings: 4 in the bundle's findings.json",
        f"Where: {tc.shared_component(desk)} (shared)",
        "its ports and the links down to the hosts below it",  # the shared suspect's action
    ):
        assert fact in " ".join(body.split()), (desk, fact)
    assert "no PHY, FEC or FCS errors on any of" not in body


def test_aws_speaks_instance_ids_az_ids_and_network_nodes():
    body = draft("aws").body
    assert "Severity: high (Production system impaired), from fabricase severity major" in body
    assert "All of them are below network nodes nn-1a2b3c4d5e6f7a8b9 > nn-0f1e2d3c4b5a69788." in body
    assert re.search(r"\| gpu001 \| i-0a1b2c3d4e5f60001 \| use1-az4 \| nn-7a8b9c0d1e2f3a4b5 \|", body)
    assert "- network node nn-7a8b9c0d1e2f3a4b5 is shared by: i-0a1b2c3d4e5f60001, i-0a1b2c3d4e5f60002" in body
    assert "Instance type: p5.48xlarge" in body and "Placement group: pg-train-48213" in body
    assert "gpu003" not in dict(markdown_sections(body))["Affected instances"]  # only hosts with suspects


def test_gcp_speaks_instance_names_and_cluster_block_subblock_host():
    body = draft("gcp").body
    assert "Priority: P2 (Severe impact: service greatly impaired), from fabricase severity major" in body
    assert "| host   | instance      | cluster                  | block    | sub-block | physical host |" in body
    assert "| gpu002 | a3u-train-002 | us-central1-cluster-jfhb | 0b6e5d12 | 3f9c1e07  | h2c4e         |" in body
    assert "- sub-block 3f9c1e07 is shared by: a3u-train-001, a3u-train-002" in body
    assert "Project: ml-train-prod" in body and "Zone: us-central1-b" in body


def test_azure_speaks_resource_ids_physical_hosts_and_fault_domains():
    body = draft("azure").body
    assert "Severity: moderate (Severity B: moderate business impact), from fabricase severity major" in body
    assert "/resourceGroups/rg-train/providers/Microsoft.Compute/virtualMachines/gpu002\n" in body
    assert "physical host GZ21B0702C3D4E; fault domain 1; update domain 0; zone 2" in body


def test_jira_uses_wiki_markup_and_preformats_running_text():
    body = draft("jira").body
    assert "## " not in body
    assert "h2. Suspect 1 of 4: link flapping on gpu002 mlx5_3/1\n\n{noformat}\nVerdict: link flapping" in body
    assert "||host||status||instance||zone||topology||\n|gpu001|ok|node-0001|dc1-hall2|" in body
    assert body.count("{noformat}") % 2 == 0
    assert "Priority: High, from fabricase severity major" in body


def test_jira_cannot_be_broken_out_of_a_preformatted_block():
    diagnosis = diagnosis_of(tc.findings(), tc.hosts(), tc.placements("jira"))
    diagnosis.suspects[0].evidence[0] = "evil {noformat} h2. Injected [link|http://x]"
    body = draft("jira", diagnosis=diagnosis).body
    assert "{noformat} h2." not in body and "{ noformat} h2. Injected" in body
    assert jira_table(["a"], [["[x]{y}"]]) == "||a||\n|\\[x\\]\\{y\\}|"


def test_zendesk_and_email_are_plain_text():
    for desk in ("zendesk", "email"):
        body = draft(desk).body
        assert "## " not in body and "{noformat}" not in body
        assert "Requested action\n----------------\n" in body
    assert "Priority: high, from fabricase severity major" in draft("zendesk").body


def test_email_subject_carries_the_escalation_id_for_threading():
    d = draft("email")
    assert d.title.startswith("[FC-0012] [fabricase] ") and len(d.title) <= 120
    assert "FC-0012" not in d.body.splitlines()[0]
    assert draft("email", escalation_id=None).title.startswith("[fabricase] ")


@pytest.mark.parametrize("desk", ["aws", "gcp", "azure"])
def test_provider_templates_extend_the_generic_one(desk):
    source = environment().loader.get_source(environment(), f"ticket_{desk}.md.j2")[0]
    assert '{% extends "ticket_generic.md.j2" %}' in source
    assert "## " not in source and "{% block findings %}" not in source  # no copied sections


def test_a_desk_without_topology_still_renders_every_section():
    d = draft("aws", placements=[], checks=None, kernel_logs=None, events=())
    assert "| gpu001 | -           | -     | -                            |" in d.body
    assert "is shared by: no placement names its instances" in d.body


def test_strict_undefined_in_a_desk_template():
    env = environment()
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("ticket_aws.md.j2").render(title="t")
