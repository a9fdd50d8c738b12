"""The rdma collector's declaration, and the real H100 sysfs copy run through the real capture script."""

from __future__ import annotations

import shutil
from pathlib import Path

from rdma_analysis import analyze

from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.collectors.rdma import RdmaCollector
from fabricase.models import Severity
from hosttrees import write_file

REAL = Path(__file__).parents[1] / "fixtures/real"
IB = "/sys/class/infiniband"


def test_declaration():
    assert RdmaCollector.requires_any == ("/sys/class/infiniband",)
    counters = {spec.pattern for spec in RdmaCollector.files if spec.counter}
    assert f"{IB}/*/ports/*/counters/*" in counters and f"{IB}/*/ports/*/hw_counters/*" in counters
    assert {f"{IB}/*/ports/*/{a}" for a in ("state", "phys_state", "rate")} <= counters
    assert f"{IB}/*/ports/*/link_layer" not in counters
    commands = {c.name: c for c in RdmaCollector.commands}
    assert set(commands) == {"rdma-statistic", "rdma-link", "ibstat", "ibv-devinfo"}
    assert commands["rdma-statistic"].counter and not commands["ibstat"].counter
    for c in commands.values():
        assert c.shell.startswith("command -v ") and "|| exit 0;" in c.shell  # absent tool: rc 0, no output
    script = compile_script(CapturePlan(collectors=(RdmaCollector,)))
    assert script.count("if [ -e \"$_fc_root\"/sys/class/infiniband ]; then") == 3  # s0, s1, once-only


def test_only_the_first_four_gids(tmp_path, capture_rdma):
    root = tmp_path / "host"
    base = f"{IB}/mlx5_0/ports/1"
    write_file(root, f"{base}/state", "4: ACTIVE\n")
    for i in range(13):
        write_file(root, f"{base}/gid_attrs/ndevs/{i}", "eth0\n")
        write_file(root, f"{base}/gids/{i}", "fe80:0000:0000:0000:0000:0000:0000:0001\n")
    hc = capture_rdma(root)
    ndevs = sorted(it.source.rsplit("/", 1)[1] for it in hc.matching(f"{base}/gid_attrs/ndevs/*"))
    assert ndevs == ["0", "1", "2", "3"]
    assert len(hc.matching(f"{base}/gids/*")) == 4


def test_real_h100_sysfs_through_the_script(tmp_path, capture_rdma):
    root = tmp_path / "host"
    shutil.copytree(REAL / "leptonai-gpud/sysfs/sys-class-infiniband-h100.0", root / "sys/class/infiniband")
    hc = capture_rdma(root)
    samples, findings = analyze(hc)
    ports = sorted({c for c, _ in samples})
    assert len(ports) == 9 and "rdma:mlx5_bond_0/1" in ports
    assert all(samples[(p, "link.state")].note == "ACTIVE" for p in ports)
    assert samples[("rdma:mlx5_9/1", "link.speed_gbps")].value == 400.0
    assert samples[("rdma:mlx5_bond_0/1", "link.width")].value == 2
    assert samples[("rdma:mlx5_0/1", "rx.errors")].delta == 0  # nothing moved in a copied tree
    # Only context: the 4-bit excessive_buffer_overrun_errors reads 15 (its maximum) on every port. The bond's
    # 200 Gb/s is not a downshift: it is the only Ethernet port.
    assert {(f.kind, f.severity) for f in findings} == {("rdma-counter-saturated", Severity.INFO)}
    assert len(findings) == 9
    assert findings[0].summary == ("mlx5_0/1: excessive_buffer_overrun_errors=15 at the counter maximum; "
                                   "increases are no longer visible")
