"""Issue 15: `--pseudonymize` must hide host names in folded form too (`gpu[0004,0011]`), in every member and
text: the ticket, summary.md, summary.json, the HTML report, reproduce.sh and capture.json. A folded set that
names a capture's host becomes its hosts' tokens, the same ones the hosts have everywhere else."""

from __future__ import annotations

import json
import random
import re
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from ClusterShell.NodeSet import NodeSet

from fabricase.cli import cli
from fabricase.redact import Redactor

KEY = random.Random(15).randbytes(32)
HOSTS = [f"gpu{i:04d}" for i in range(1, 17)]


# Found on its own terms, not with the redactor's pattern: any name with a bracketed range list in it.
_FOLDED = re.compile(r"[A-Za-z0-9_.-]*\[[0-9][0-9,/-]*\][A-Za-z0-9_-]*")


def _folded_hosts(text: str, hosts: set[str]) -> list[str]:
    """Every folded set in `text` that still names one of `hosts`."""
    found = []
    for m in _FOLDED.finditer(text):
        try:
            names = list(NodeSet(m.group(0).strip(".-"))) if len(m.group(0)) < 200 else []
        except Exception:  # noqa: BLE001 - not a node set: nothing to look at
            continue
        if hosts & {n.lower() for n in names}:
            found.append(m.group(0))
    return found


def test_a_folded_set_becomes_its_hosts_tokens():
    r = Redactor(pseudonymize=True, key=KEY, hosts=HOSTS)
    t4, t11 = r.host_pseudonym("gpu0004"), r.host_pseudonym("gpu0011")
    assert r.redact_text("ticket.md", "Hosts with suspects: gpu[0004,0011].") == f"Hosts with suspects: {t4},{t11}."
    assert r.redact_text("reproduce.sh", "fabricase collect --hosts 'gpu[0004,0011]'") == \
        f"fabricase collect --hosts '{t4},{t11}'"
    # JSON and HTML quote it; an FQDN and a suffixed name keep what the host rule keeps of them.
    assert r.redact_text("summary.json", '{"hosts": "gpu00[04,11]"}') == f'{{"hosts": "{t4},{t11}"}}'
    assert r.redact_text("report.html", "<td>gpu[0004]</td>") == f"<td>{t4}</td>"
    assert r.redact_text("a", "gpu[0004,0011].cluster.example.com") == f"{t4},{t11}"
    assert r.redact_text("a", "gpu[0004]-ib0") == f"{t4}-ib0"
    assert r.redact_text("a", "rack[1]-x gpu[0004] gpu0004") == f"rack[1]-x {t4} {t4}"
    assert r.report()["totals"]["nodeset"] == 7


def test_sets_that_name_no_host_are_left_and_huge_ones_go():
    from fabricase.redact.pseudonyms import NODESET_LIST_MAX

    r = Redactor(pseudonymize=True, key=KEY, hosts=HOSTS)
    for text in ("sshd[1234]: session opened", "gpu[1-2] (unpadded: other names)", "kernel: [12345.678] x",
                 "GPU[0] Xid 79", "gpu[0100-0120]"):
        assert r.redact_text("kern.log", text) == text
    # Too many to list (and one of them ours): a marker. A billion is counted, never expanded.
    assert r.redact_text("a", f"gpu[0001-{NODESET_LIST_MAX + 1:04d}]") == "[REDACTED:nodeset]"
    assert r.redact_text("a", "gpu[1-999999999] gpu[0001-0002]").startswith("[REDACTED:nodeset] host-")
    assert r.redact_text("a", "gpu" + "[1]" * 2000 + " x") == "[REDACTED:nodeset] x"  # too long to read
    # A name beside the capture's hosts is of the same cluster: a token too, so the set is hidden whole.
    out = r.redact_text("a", "gpu[0016-0017]")
    assert out.count("host-") == 2 and "gpu" not in out


def test_without_pseudonymize_folded_sets_stay():
    assert Redactor(hosts=HOSTS).redact_text("a", "gpu[0004,0011]") == "gpu[0004,0011]"


def _members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}


@pytest.mark.parametrize("command", ["open", "bundle"])
def test_pseudonymized_filing_has_no_host_in_folded_form(corpus, tmp_path, monkeypatch, command):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    capture = tmp_path / "capture"
    shutil.copytree(corpus.root, capture)
    if command == "open":
        args = ["open", "--replay", str(capture), "--symptom", "NCCL hang on rank 3", "--pseudonymize"]
    else:
        args = ["bundle", str(capture), "-o", str(tmp_path / "b.tar.gz"), "--pseudonymize"]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    texts = _members(Path(out["bundle_path"]))
    if command == "open":
        case = Path(out["ticket_path"]).parent
        texts |= {p.name: p.read_bytes() for p in case.iterdir() if p.is_file() and not p.name.endswith(".tar.gz")}
    hosts = {h.lower() for h in corpus.hosts}
    # The plain bundle folds its hosts in these members: the pseudonymized one must not.
    leaks = {name: _folded_hosts(data.decode("utf-8", "replace"), hosts) for name, data in texts.items()}
    assert not {name: found for name, found in leaks.items() if found}
    assert not [name for name, data in texts.items() if any(h.encode() in data for h in hosts)]
    assert json.loads(texts["redaction.json"])["totals"].get("nodeset", 0) >= 3


def test_the_html_report_folds_hosts_and_the_bundle_member_does_not():
    """The report groups hosts by leaf and rack in folded form; report.html, as bundled, names none of them."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
    from report_helpers import fleet, leaf_placements

    from fabricase.report import html_report

    capture, samples = fleet(48, ports=2, hot={(5, 1): 40.0, (37, 0): 25.0})
    names = [hc.host for hc in capture.hosts]
    html = html_report(capture, [], leaf_placements(names), samples).decode()
    assert _folded_hosts(html, set(names))  # the plain report folds them
    redactor = Redactor(pseudonymize=True, key=KEY, hosts=names)
    out = redactor.redact("report.html", html.encode()).decode()
    assert _folded_hosts(out, set(names)) == []
    assert not [h for h in names if h in out]
