"""Golden end-to-end: an 8-GPU HGX host tree through the real capture script, then the GPU and kernel rules."""

from __future__ import annotations

import pytest

from fabricase.analysis import gpu, kernel
from fabricase.collectors import COLLECTORS
from fabricase.collectors.nvidia import NvidiaCollector
from fabricase.models import HostStatus, Severity
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from hosttrees.nvidia import BUSES, add_hgx_gpus


@pytest.fixture
def capture_tree(tmp_path, monkeypatch):
    monkeypatch.setitem(COLLECTORS, "nvidia", NvidiaCollector)

    def run(degraded=None, **kw):
        root = add_hgx_gpus(tmp_path / "root", degraded=degraded, **kw)
        opts = CollectOptions(interval_s=0.2, root=str(root), collectors=("nvidia", "kernel_log"))
        capture = collect(Targets(hosts=("localhost",), nodeset="localhost"), opts, tmp_path / "cap")
        hc = capture.hosts[0]
        assert hc.status == HostStatus.OK, hc.reason
        samples = gpu.gpu_samples(hc)
        findings = [f for rule in gpu.RULES + kernel.RULES for f in rule(hc, samples)]
        return hc, samples, findings

    return run


def _sample(samples, component, metric):
    return next(s for s in samples if s.component == component and s.metric == metric)


@pytest.mark.parametrize(("variant", "name"), [("h100", "NVIDIA H100 80GB HBM3"), ("h200", "NVIDIA H200")])
def test_healthy_hgx_host_has_no_findings(capture_tree, variant, name):
    hc, samples, findings = capture_tree(variant=variant)
    assert findings == []
    assert {s.note for s in samples if s.metric == "gpu.name"} == {name}
    # what was captured and normalized
    assert hc.item("cmd:nvlink-errors", 1) is not None and hc.item("cmd:nvidia-smi-xml") is not None
    assert {s.component for s in samples if s.metric == "gpu.pci_address"} == {f"gpu:{i}" for i in range(8)}
    assert _sample(samples, "gpu:7", "gpu.pci_address").note == f"0000:{BUSES[7]}:00.0"
    assert _sample(samples, "gpu:0", "fabric.state").note == "Completed"
    assert _sample(samples, "gpu:0", "pcie.link_width").value == 16
    assert len([s for s in samples if s.metric == "nvlink.link_state" and s.value == 1]) == 8 * 18
    assert _sample(samples, "nvlink:0/17", "nvlink.link_speed_gbps").value == 26.562
    crc = _sample(samples, "nvlink:0/0", "nvlink.crc_flit_errors")
    assert (crc.value, crc.delta) == (2, 0)  # a lifetime count is not an increase
    assert _sample(samples, "fabric-manager", "fabric_manager.state").note == "active"
    assert _sample(samples, "fabric-manager", "fabric_manager.log_errors").value == 0
    assert len([s for s in samples if s.metric == "nvswitch.present"]) == 4


def test_degraded_hgx_host_names_the_gpu_link_and_counter(capture_tree):
    _, samples, findings = capture_tree(degraded=True)
    got = {(f.kind, f.component): f for f in findings}
    assert set(got) == {
        ("nvlink-inactive", "nvlink:3/5"),
        ("nvlink-errors", "nvlink:2/1"),
        ("gpu-fabric-unhealthy", "gpu:4"),
        ("nvidia-xid", "gpu:6"),
    }
    inactive = got[("nvlink-inactive", "nvlink:3/5")]
    assert inactive.severity == Severity.MAJOR
    assert inactive.summary == "GPU 3 NVLink 5 inactive while 17 of 18 links are active at 26.562 GB/s"
    errors = got[("nvlink-errors", "nvlink:2/1")]
    assert errors.severity == Severity.MAJOR
    assert [(e.metric, e.value, e.source, e.snapshot) for e in errors.evidence] == [
        ("nvlink.replay_errors.delta", 40, "cmd:nvlink-errors", 1),
        ("nvlink.crc_flit_errors.delta", 6, "cmd:nvlink-errors", 1),
    ]
    assert errors.summary.startswith("GPU 2 NVLink 1: nvlink.replay_errors +40")
    fabric = got[("gpu-fabric-unhealthy", "gpu:4")]
    assert fabric.severity == Severity.CRITICAL and fabric.summary == "GPU 4: fabric state In Progress"
    xid = got[("nvidia-xid", "gpu:6")]
    assert xid.severity == Severity.CRITICAL
    assert xid.summary.startswith("GPU 6 (0000:cb:00): Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS x1")


def test_fabric_manager_down_on_an_nvswitch_host(capture_tree):
    _, _, findings = capture_tree(degraded={"fm-down"})
    assert [(f.kind, f.severity, f.component, f.summary) for f in findings] == [
        ("fabric-manager-down", Severity.CRITICAL, "fabric-manager",
         "nvidia-fabricmanager is failed on a host with 4 NVSwitches"),
    ]


def test_collector_is_skipped_without_a_gpu_driver(tmp_path, monkeypatch):
    monkeypatch.setitem(COLLECTORS, "nvidia", NvidiaCollector)
    root = tmp_path / "root"
    (root / "sys").mkdir(parents=True)
    opts = CollectOptions(interval_s=0, root=str(root), collectors=("nvidia",))
    hc = collect(Targets(hosts=("localhost",), nodeset="localhost"), opts, tmp_path / "cap").hosts[0]
    assert [it for it in hc.items if it.collector == "nvidia"] == []
    assert gpu.gpu_samples(hc) == [] and [f for rule in gpu.RULES for f in rule(hc, [])] == []
