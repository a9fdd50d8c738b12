"""`fabricase export --self` over a golden HGX host tree (tests/hosttrees): only this node, only the counter
collectors, only its own series (host label: its hostname), atomically written, passing promtool; and the
systemd units that run it on every node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricase.metrics import TEXTFILE_NAME
from fabricase.metrics.filters import ERROR_METRICS
from fabricase.metrics.node import counter_collectors, node_name
from hosttrees.hosts import hgx_mlx5_host
from metrics.conftest import REPO, run_promtool


@pytest.fixture
def hgx(tmp_path: Path) -> Path:
    return hgx_mlx5_host(tmp_path / "hgx", degraded=True)


def _self(run, root: Path, out: Path, *flags: str) -> tuple[dict, list]:
    result = json.loads(run("export", "--self", "--root", str(root), "--interval", "0", "--textfile", str(out),
                            "--json", *flags).stdout)
    text = (out / TEXTFILE_NAME).read_text()
    checked = run_promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0 and not (checked.stdout + checked.stderr).strip(), checked.stdout + checked.stderr
    return result, [s for f in text_string_to_metric_families(text) for s in f.samples]


def test_self_writes_only_this_nodes_counter_series(run, hgx, tmp_path):
    out = tmp_path / "textfile_collector"
    result, samples = _self(run, hgx, out)
    assert [h["host"] for h in result["hosts"]] == [node_name()] and result["hosts"][0]["status"] == "ok"
    assert {s.labels["host"] for s in samples if "host" in s.labels} == {node_name()}
    assert len(samples) == result["series"] > 1000  # 8 NICs, 8 GPUs x 18 NVLinks, PCIe
    names = {s.name for s in samples}
    # The degraded port's symbol errors are there; the kernel log (Xid 79) is not a counter collector.
    [bad] = [s for s in samples if s.name == "fabricase_rdma_symbol_errors_total" and s.value > 0]
    assert bad.labels["device"] == "mlx5_3"
    assert "fabricase_xid_events" not in names and "kernel_log" not in counter_collectors()
    assert not any(n.startswith(("fabricase_escalation", "fabricase_provider_")) for n in names)  # nothing central
    assert result["capture_dir"] is None and sorted(p.name for p in out.iterdir()) == [TEXTFILE_NAME]


def test_self_with_filters_is_smaller(run, hgx, tmp_path):
    full, _ = _self(run, hgx, tmp_path / "a")
    errors, samples = _self(run, hgx, tmp_path / "b", "--errors-only", "--no-totals")
    assert {s.name for s in samples} <= ERROR_METRICS
    assert not any(s.name.endswith("_total") for s in samples) and 0 < errors["series"] < full["series"]


def test_self_takes_no_capture(run, hgx, tmp_path):
    refused = run("export", str(tmp_path), "--self", "--textfile", str(tmp_path / "tf"), code=2)
    assert "--self captures this node" in refused.stderr
    assert "or --self for this node" in run("export", "--textfile", str(tmp_path / "tf"), code=2).stderr


def test_systemd_units_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (not required in CI)")
    units = REPO / "deploy/systemd"
    service = (units / "fabricase-export.service").read_text()
    assert "export --self" in service and "--textfile /var/lib/node_exporter/textfile_collector" in service
    assert "OnUnitActiveSec=60" in (units / "fabricase-export.timer").read_text()
    # verify checks that ExecStart's program exists: point it at a stand-in, the rest is verified as shipped.
    stand_in = tmp_path / "fabricase"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    (tmp_path / "fabricase-export.service").write_text(service.replace("/usr/local/bin/fabricase", str(stand_in)))
    shutil.copy(units / "fabricase-export.timer", tmp_path)
    checked = subprocess.run([analyze, "verify", str(tmp_path / "fabricase-export.service"),
                              str(tmp_path / "fabricase-export.timer")], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr
