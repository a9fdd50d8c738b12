"""Acceptance: `fabricase open --replay <Azure VM capture> --provider azure` against the local ARM server files
one ticket with the VMs' fault domains in its body and the bundle attached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure_capture import write_azure_capture
from azure_fakes import FakeCredential, write_config
from click.testing import CliRunner

from fabricase.cli import cli

HOSTS = {"gpu001": "GGBB90904476", "gpu002": "GGBB90904477", "gpu003": "GGBB90904478", "gpu004": "GGBB90904479"}


@pytest.fixture
def opened(tmp_path, arm, tls, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("FABRICASE_HOME", str(home))
    monkeypatch.delenv("FABRICASE_DB", raising=False)
    monkeypatch.setattr("fabricase.providers.azure.credential_factory", FakeCredential)
    write_config(home, arm, tls[0])
    for i, host in enumerate(HOSTS):
        arm.add_vm(f"nd-{i}", computer=host, fault_domain=i % 2, update_domain=i,
                   subgroup="5a1c0b9e-0000-4000-8000-000000000001")
    capture = write_azure_capture(tmp_path / "capture", HOSTS, flapping="gpu003")
    result = CliRunner().invoke(cli, ["open", "--replay", str(capture), "--symptom", "allreduce busbw fell",
                                      "--provider", "azure", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_open_files_one_ticket_with_the_topology_and_the_bundle(opened, arm):
    (name,) = arm.state.tickets
    ticket = arm.state.tickets[name]["properties"]
    description = ticket["description"]
    assert "gpu003" in description and "fault domain 0" in description
    assert "/virtualMachines/nd-2" in description and "interconnect subgroup 5a1c0b9e" in description
    assert ticket["technicalTicketDetails"]["resourceId"].endswith("/virtualMachines/nd-2")
    bundle = Path(opened["bundle_path"])
    assert arm.file_bytes(name, bundle.name) == bundle.read_bytes()
    assert len(arm.calls("PUT", "/supportTickets/")) == 1


def test_open_names_the_physical_host(opened, arm):
    (ticket,) = arm.state.tickets.values()
    assert "physical host GGBB90904478" in ticket["properties"]["description"]
