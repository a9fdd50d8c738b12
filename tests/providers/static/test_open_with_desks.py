"""Acceptance: `fabricase open --replay <capture> --provider static` with config.toml's desk = jira (and zendesk)
files one ticket at the local stand-in, with the topology from the inventory in its body and the bundle
attached; `fabricase providers list|check` against the same configuration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from desks.fakes import FakeJira, FakeZendesk

from fabricase.capturedir import host_capture_from_stream, write_capture_meta, write_host
from fabricase.cli import cli
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))

import fleetgen  # noqa: E402  (its capture-stream writer)

from .conftest import HOSTS  # noqa: E402

BAD_UNDER_LEAF_2 = {"gpu009", "gpu010", "gpu011", "gpu013", "gpu014", "gpu016"}


def write_fleet(root: Path) -> Path:
    """16 hosts, one RDMA port each, two leaf switches; six of the eight under leaf-2 show symbol errors."""
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma"])), interval_s=fleetgen.INTERVAL_S)
    root.mkdir(parents=True)
    write_capture_meta(root, plan=plan, targets={"nodeset": "gpu[001-016]"}, hosts=HOSTS,
                       created_at="2026-11-30T00:00:00Z")
    for host in HOSTS:
        counters = {name: (10, 10) for name in (*fleetgen.COUNTERS, *fleetgen.HW)}
        counters["port_rcv_data"] = counters["port_xmit_data"] = (10**9, 2 * 10**9)
        if host in BAD_UNDER_LEAF_2:
            counters["symbol_error"] = (10, 50)
        raw = fleetgen._stream([{"dev": "mlx5_0", "counters": counters, "rate": "400 Gb/sec (4X NDR)"}])
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "test"
        write_host(root, hc, raw)
    return root


def _run(*args, code=0):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result


@pytest.fixture
def fake(request):
    desk = {"jira": FakeJira, "zendesk": FakeZendesk}[request.param]()
    desk.name, desk.base_url = request.param, desk.start()
    yield desk
    desk.stop()


def _configure(home: Path, fake) -> None:
    settings = {"jira": 'service_desk_id = "10"\nrequest_type_id = "42"\n', "zendesk": ""}[fake.name]
    (home / "config.toml").write_text(f'[providers.static]\ndesk = "{fake.name}"\n\n[providers.static.{fake.name}]\n'
                                      f'base_url = "{fake.base_url}"\n{settings}')


@pytest.mark.parametrize("fake", ["jira", "zendesk"], indirect=True)
def test_open_files_one_ticket_with_the_topology_and_the_bundle(home, tmp_path, fake):
    _configure(home, fake)
    fleet = write_fleet(tmp_path / "fleet")
    opened = json.loads(_run("open", "--replay", str(fleet), "--symptom", "allreduce busbw fell 40%",
                             "--provider", "static", "--json").stdout)
    bundle = Path(opened["bundle_path"])
    if fake.name == "jira":
        [(key, request)] = fake.requests.items()
        subject, body = request["fields"]["summary"], request["fields"]["description"]
        files = fake.attachments[key]
    else:
        [(key, ticket)] = fake.tickets.items()
        subject, body, files = ticket["subject"], ticket["comments"][0]["body"], ticket["files"]
    assert opened["provider_case_id"] == str(key) and opened["state"] in ("filed", "waiting-provider")
    assert subject.startswith(opened["case_marker"] + " ")
    assert "switch:leaf-2" in body and "rack:r2" in body
    assert files == [(bundle.name, bundle.read_bytes())]

    shown = json.loads(_run("show", opened["escalation_id"], "--json").stdout)
    assert shown["provider_case_id"] == str(key)


@pytest.mark.parametrize("fake", ["jira", "zendesk"], indirect=True)
def test_providers_check_against_the_desk(home, fake):
    _configure(home, fake)
    report = json.loads(_run("providers", "check", "static", "--json").stdout)
    assert report["ok"] is True
    [static] = report["providers"]
    checks = {c["check"]: c for c in static["checks"]}
    assert checks["desk"]["detail"] == fake.name and checks["credentials"]["ok"]
    assert checks["inventory"]["detail"].startswith("16 host(s) in ")
    fake.fail("GET", r"/(myself|users/me)$", 403, times=9)
    _run("providers", "check", "static", code=1)
    assert not any(method in ("POST", "PUT") for method, _ in fake.calls)  # a check files nothing


def test_providers_check_unknown_name_and_list(home):
    result = _run("providers", "check", "oracle", code=1)
    assert result.stderr.strip() == ("fabricase: error: oracle: unknown provider 'oracle' "
                                     "(valid: aws, azure, gcp, static)")
    listed = {p["name"]: p for p in json.loads(_run("providers", "list", "--json").stdout)}
    assert set(listed) == {"static", "aws", "gcp", "azure"}
    static = listed["static"]
    assert static["desk"] == "outbox" and static["sdk"] == {"httpx": True}
    assert static["unsupported"]["sync"] == "outbox cases are updated by hand"
    assert "file-case" in static["features"] and "sync" not in static["features"]
    text = _run("providers", "list").stdout
    assert "static" in text and "httpx ok" in text and "boto3" in text
    _run("providers", "check")  # static only, outbox: every check passes
    assert json.loads(_run("providers", "--json", "check").stdout)["ok"] is True


def test_providers_help():
    for args in (["providers", "--help"], ["providers", "list", "--help"], ["providers", "check", "--help"]):
        assert _run(*args).stdout.strip()
