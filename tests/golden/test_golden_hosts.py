"""Golden hosts end to end: recorded host trees run through the real capture script, the capture directory,
every parser and every rule. A healthy host gives no findings; a degraded one names each fault exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase.analysis import analyze, host_samples
from fabricase.cli import cli
from fabricase.collectors import COLLECTORS
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from hosttrees.hosts import bnxt_host, efa_host, hgx_mlx5_host


def _capture(tmp_path: Path, build, **kw):
    root = build(tmp_path / "root", **kw)
    return collect(Targets(hosts=("localhost",)), CollectOptions(interval_s=0, root=str(root)), tmp_path / "cap")


@pytest.mark.parametrize("build", [hgx_mlx5_host, efa_host, bnxt_host], ids=["hgx-mlx5", "efa", "bnxt"])
def test_healthy_hosts_have_no_findings(tmp_path, build):
    capture = _capture(tmp_path, build)
    hc = capture.hosts[0]
    assert str(hc.status) == "ok"
    # Every item that failed says why; on a healthy recorded host only optional tools are absent.
    failed = {it.source for it in hc.items if it.kind != "stderr" and it.error}
    assert all(s.startswith("cmd:") for s in failed), failed
    assert analyze(capture) == []


def test_degraded_hgx_host_names_every_fault(tmp_path):
    capture = _capture(tmp_path, hgx_mlx5_host, degraded=True)
    got = {(str(f.severity), f.component, f.kind) for f in analyze(capture)}
    assert got == {
        ("critical", "gpu:4", "gpu-fabric-unhealthy"),
        ("critical", "gpu:6", "nvidia-xid"),
        ("major", "netdev:eth3", "netdev-errors"),
        ("major", "netdev:eth3", "phy-errors"),
        ("major", "nvlink:2/1", "nvlink-errors"),
        ("major", "nvlink:3/5", "nvlink-inactive"),
        ("major", "pcie:0000:9c:00.0", "pcie-downgraded"),
        ("major", "rdma:mlx5_3/1", "rdma-link-flap"),
        ("major", "rdma:mlx5_3/1", "rdma-symbol-errors"),
        # 8 ports, 8 netdevs and 144 NVLinks are enough peers even on one host: the bad ones stand out.
        ("critical", "rdma:mlx5_3/1", "fleet-outlier"),
        ("critical", "netdev:eth3", "fleet-outlier"),
        ("critical", "nvlink:2/1", "fleet-outlier"),
    }
    by_kind = {f.kind: f for f in analyze(capture)}
    evidence = {(e.metric, e.source): e.value for e in by_kind["rdma-symbol-errors"].evidence}
    source = "/sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error"
    assert evidence[("phy.symbol_errors_uncorrected.delta", source)] == 40
    assert evidence[("phy.symbol_errors_uncorrected.p_limit", source)] < 1e-100  # 40 in well under a second
    flap = {e.source: e.value for e in by_kind["rdma-link-flap"].evidence}
    assert flap["/sys/class/infiniband/mlx5_3/ports/1/counters/link_downed"] == 2


def test_every_domain_yields_samples_on_the_hgx_host(tmp_path):
    hc = _capture(tmp_path, hgx_mlx5_host).hosts[0]
    components = {s.component.split(":")[0] for s in host_samples(hc)}
    assert {"netdev", "rdma", "pcie", "gpu", "nvlink"} <= components
    # Every default collector ran and left at least one item on this host.
    ran = {it.collector for it in hc.items}
    assert {n for n, c in COLLECTORS.items() if not c.opt_in} <= ran


def test_efa_and_bnxt_share_the_normalized_schema(tmp_path):
    def rdma_metrics(build, folder):
        return {s.metric for s in host_samples(_capture(tmp_path / folder, build).hosts[0])
                if s.component.startswith("rdma:")}

    efa, bnxt = rdma_metrics(efa_host, "e"), rdma_metrics(bnxt_host, "b")
    for metric in ("link.state", "link.speed_gbps", "rx.bytes", "tx.bytes", "rx.packets", "tx.packets"):
        assert metric in efa and metric in bnxt, metric


def test_cli_analyze_of_a_replayed_degraded_host_names_the_port_and_counter(tmp_path, monkeypatch):
    """The acceptance path: collect a degraded golden host, then `fabricase analyze DIR --json` offline."""
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    root = hgx_mlx5_host(tmp_path / "root", degraded=True)
    runner = CliRunner()
    cap = tmp_path / "D"
    result = runner.invoke(cli, ["collect", "--hosts", "localhost", "--interval", "0", "--root", str(root), "-o",
                                 str(cap)])
    assert result.exit_code == 0, result.output
    out = json.loads(runner.invoke(cli, ["analyze", str(cap), "--json"]).stdout)
    symbol = next(f for f in out["findings"] if f["kind"] == "rdma-symbol-errors")
    assert symbol["component"] == "rdma:mlx5_3/1"
    assert any("symbol_error" in (e["source"] or "") for e in symbol["evidence"])
    # The suspect names the port by its RDMA name and netdev, and the counter behind it.
    [suspect] = [s for s in out["suspects"] if "rdma:mlx5_3/1" in s["components"]]
    assert suspect["findings"][0].startswith("rdma-symbol-errors@localhost/rdma:mlx5_3/1") or any(
        fid.startswith("rdma-symbol-errors@") for fid in suspect["findings"])
    human = runner.invoke(cli, ["analyze", str(cap)]).stdout
    assert "mlx5_3/1" in human and "symbol_error" in human


def test_every_kind_the_golden_hosts_raise_is_documented(tmp_path):
    import re

    doc = (Path(__file__).parents[2] / "docs" / "findings.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", doc, re.M))
    kinds = {f.kind for f in analyze(_capture(tmp_path, hgx_mlx5_host, degraded=True))}
    assert kinds and kinds <= documented, kinds - documented


def test_a_gpu_hosts_nvidia_smi_report_is_parsed_once_per_analysis(tmp_path, monkeypatch):
    # The GPU samples, the kernel log's GPU names and the diagnosis's hardware each parsed the XML report again:
    # a fifth of an HGX host's analysis. They share one parse now (HostItems.memo).
    from fabricase.analysis import gpu
    from fabricase.pipeline import diagnose_capture

    capture = _capture(tmp_path, hgx_mlx5_host, degraded=True)
    calls = []
    real = gpu.parse_nvidia_smi_xml
    monkeypatch.setattr(gpu, "parse_nvidia_smi_xml", lambda text: calls.append(1) or real(text))
    analysis = diagnose_capture(capture)
    assert len(calls) == 1 and analysis.hardware[capture.hosts[0].host] is not None
    assert any(f.kind == "gpu-fabric-unhealthy" for f in analysis.findings)
