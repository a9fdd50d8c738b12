"""`fabricase_suspect`: one series per suspect (the thing to repair), labelled with its host, primary component,
verdict, owner and severity; a fleet's one fault is one series however many findings it made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricase.diagnosis import Diagnosis, HostOutcome, Suspect
from fabricase.metrics import TEXTFILE_NAME
from fabricase.metrics.exposition import capture_families, suspect_series
from fabricase.metrics.names import metric_def
from fabricase.models import Capture, Severity


def _suspect(host: str | None, components: list[str], verdict: str, owner: str, severity: Severity) -> Suspect:
    return Suspect(id=f"{host}-{components[0]}", host=host, unit="nic-port" if host else "shared",
                   components=components, verdict=verdict, verdict_text=verdict, severity=severity, confidence=None,
                   q_value=None, owner=owner, action="", evidence=[], identity={}, findings=[])


def test_one_series_per_suspect_with_its_labels_and_an_empty_host_for_a_shared_one():
    diagnosis = Diagnosis([
        _suspect("gpu001", ["rdma:mlx5_3/1", "netdev:ens4np0", "pcie:0000:4d:00.0"], "bad-link", "provider",
                 Severity.CRITICAL),
        _suspect("gpu001", ["rdma:mlx5_5/1"], "bad-link", "provider", Severity.CRITICAL),
        _suspect(None, ["switch:leaf-3"], "switch-fault", "provider", Severity.MAJOR),
        _suspect("gpu002", ["fabric-manager"], "fabric-manager-down", "operator", Severity.MAJOR),
    ], [], [HostOutcome("gpu001", "ok", suspects=2), HostOutcome("gpu002", "ok", suspects=1)])
    assert metric_def("fabricase_suspect").labels == ("host", "component", "verdict", "owner", "severity")
    # Two bad ports of one host with the same verdict stay two series: the component tells them apart.
    assert suspect_series(diagnosis).values["fabricase_suspect"] == {
        ("gpu001", "rdma:mlx5_3/1", "bad-link", "provider", "critical"): 1,
        ("gpu001", "rdma:mlx5_5/1", "bad-link", "provider", "critical"): 1,
        ("", "switch:leaf-3", "switch-fault", "provider", "major"): 1,
        ("gpu002", "fabric-manager", "fabric-manager-down", "operator", "major"): 1,
    }


def test_no_suspect_no_series():
    diagnosis = Diagnosis([], [], [HostOutcome("gpu001", "ok")])
    assert "fabricase_suspect" not in suspect_series(diagnosis).values
    capture = Capture(root=Path("."), format_version=2, created_at="2026-11-30T00:00:00Z", tool_version="t",
                      interval_s=5.0, collectors={}, targets={}, hosts=[])
    names = {f.name for f in capture_families(capture, [], [], diagnosis=diagnosis)}
    assert "fabricase_suspect" not in names


_VERDICTS = {"pfc-storm": "pfc-storm-source", "symbol-errors": "bad-link", "xid-79": "gpu-off-bus",
             "nvlink-replay": "nvlink-errors", "speed-downshift": "speed-downshift"}


@pytest.mark.parametrize("kind", sorted(_VERDICTS))
def test_export_writes_one_suspect_series_for_the_injected_fault(run, fleets, tmp_path, kind):
    capture, truth = fleets[kind]
    [target] = truth
    out = tmp_path / "tf"
    result = json.loads(run("export", str(capture), "--textfile", str(out), "--inventory",
                            str(capture / "inventory.json"), "--json").stdout)
    text = (out / TEXTFILE_NAME).read_text()
    series = [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == "fabricase_suspect"]
    assert len(series) == 1 == result["suspects"]
    [s] = series
    host, component = target.split("/", 1)
    assert s.value == 1 and s.labels["host"] == host
    assert s.labels["verdict"] == _VERDICTS[kind] and s.labels["owner"] == "provider"
    assert s.labels["severity"] in ("critical", "major")
    family = component.split(":", 1)[0]
    assert s.labels["component"].split(":", 1)[0] in {family, "gpu", "pcie"}
    assert result["verdict"].startswith("1 suspect on 1 of 32 hosts")
