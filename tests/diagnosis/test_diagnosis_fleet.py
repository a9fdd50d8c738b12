"""The diagnosis of whole fleets: a clean fleet has no suspect, the 16-host acceptance fleet has exactly its 8
faults, background lines count what rose at fleet-normal rates, and suspects carry the identity their owner
needs (placement first, then what the host itself says)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from suspect_builders import MINOR, finding, gpu_hardware, nic_port_hardware, outcomes, xid

from fabricase.capturedir import load_capture
from fabricase.diagnosis import HostHardware, diagnose
from fabricase.models import MetricSample, Placement
from fabricase.pipeline import diagnose_capture
from fabricase.placements import inventory_placements, topology_of

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402
import harness  # noqa: E402


def _diagnose(folder: Path, hosts: list[str]):
    placements = inventory_placements(folder / "inventory.json", hosts)
    return diagnose_capture(load_capture(folder, verify=False), topology=topology_of(placements),
                            placements=placements)


def test_a_clean_fleet_of_128_hosts_has_no_suspect(tmp_path):
    scenario = next(s for s in fleetgen.scenarios(128, 0, 1) if s.kind is None)
    fleetgen.build(scenario, tmp_path / "clean", seed=3)
    d = _diagnose(tmp_path / "clean", scenario.hosts).diagnosis
    assert d.suspects == []
    assert d.verdict_line == "no suspect on 128 hosts; 128 hosts healthy"
    assert all(h.suspects == 0 for h in d.hosts)


@pytest.mark.skipif(not hasattr(harness, "build_fleet16"), reason="fleetgen.build_fleet16 not there yet")
def test_the_16_host_fleet_has_one_suspect_per_injected_fault(tmp_path):
    truth = fleetgen.build_fleet16(tmp_path / "f16", seed=1)
    d = _diagnose(tmp_path / "f16", [f"gpu{i:04d}" for i in range(1, 17)]).diagnosis
    hits = [harness.suspect_names(s.to_dict()) & truth for s in d.suspects]
    assert all(hits), [s.name for s, h in zip(d.suspects, hits, strict=True) if not h]
    assert sorted(t for h in hits for t in h) == sorted(truth)  # each fault named by exactly one suspect
    assert d.verdict_line == "8 suspects on 8 of 16 hosts; 8 hosts healthy"


def _sample(host: str, component: str, metric: str, delta: float, rate: float | None = None) -> MetricSample:
    return MetricSample(host, component, metric, delta, "packets", delta=delta,
                        rate=delta / 10 if rate is None else rate)


def test_background_lines_count_what_rose_outside_any_suspect():
    samples = {
        "gpu001": [_sample("gpu001", "rdma:mlx5_3/1", "rdma.out_of_sequence", 1),  # under the suspect below
                   _sample("gpu001", "rdma:mlx5_0/1", "rdma.out_of_sequence", 2),
                   _sample("gpu001", "rdma:mlx5_0/1", "rdma.rx_bytes", 9e9)],  # traffic: not an error counter
        "gpu002": [_sample("gpu002", "rdma:mlx5_0/1", "rdma.out_of_sequence", 4),
                   _sample("gpu002", "rdma:mlx5_3/1", "rdma.out_of_sequence", 0),
                   _sample("gpu002", "netdev:eth0", "rx_crc_errors", 1)],
        "gpu003": [_sample("gpu003", "rdma:mlx5_0/1", "rdma.out_of_sequence", 6),
                   _sample("gpu003", "rdma:mlx5_3/1", "rdma.out_of_sequence", 0)],
    }
    findings = [finding("rdma-symbol-errors", "rdma:mlx5_3/1"),
                finding("rdma-transport-errors", "rdma:mlx5_0/1", "gpu002", MINOR),
                finding("rdma-transport-errors", "rdma:mlx5_0/1", "gpu003", MINOR)]
    d = diagnose(findings, hosts=outcomes("gpu001", "gpu002", "gpu003"), samples=samples,
                 hardware={"gpu001": nic_port_hardware()})
    [oos, crc] = d.background
    assert (oos.metric, oos.family, oos.rose_on, oos.compared) == ("rdma.out_of_sequence", "rdma", 3, 6)
    assert oos.median_rate == 0.4  # 0.2, 0.4 and 0.6 /s
    assert oos.findings == ["rdma-transport-errors@gpu002/rdma:mlx5_0/1", "rdma-transport-errors@gpu003/rdma:mlx5_0/1"]
    assert oos.text == "out_of_sequence rose on 3 of 6 ports at fleet-normal rates (median 0.4/s)"
    assert (crc.metric, crc.rose_on, crc.compared, crc.median_rate) == ("rx_crc_errors", 1, 1, 0.1)
    assert d.minor == []
    assert len(d.suspects) == 1


def test_an_even_number_of_rates_takes_the_middle_two():
    samples = {f"gpu00{i}": [_sample(f"gpu00{i}", "rdma:mlx5_0/1", "rdma.out_of_sequence", 1, rate)]
               for i, rate in enumerate((0.1, 0.2, 0.4, 0.8), 1)}
    [line] = diagnose([], hosts=outcomes(*samples), samples=samples).background
    assert line.median_rate == pytest.approx(0.3)


def test_identity_takes_the_placements_instance_id_then_the_hosts_own():
    hw = gpu_hardware(nic_port_hardware())
    hw.identity = {"instance_id": "i-0fab00000000c0de1", "provider": "aws", "hostname": "gpu001"}
    findings = [finding("rdma-symbol-errors", "rdma:mlx5_3/1"), xid(79)]
    no_placement = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": hw}).suspects
    placed = diagnose(findings, hosts=outcomes("gpu001"), hardware={"gpu001": hw}, placements=[Placement(
        "gpu001", "aws", instance_id="i-0123456789abcdef0", instance_type="p5.48xlarge", zone="us-east-1a",
        topology=["nn-1", "nn-2"])]).suspects
    port = next(s for s in no_placement if s.unit == "nic-port")
    assert {k: port.identity.get(k) for k in ("pci", "node_guid", "netdev", "mac", "instance_id")} == {
        "pci": "0000:4d:00.0", "node_guid": "0xa088c20300da6303", "netdev": "ens4np0", "mac": "0c:42:a1:00:00:04",
        "instance_id": "i-0fab00000000c0de1"}
    gpu = next(s for s in no_placement if s.unit == "gpu")
    assert {k: gpu.identity.get(k) for k in ("pci", "serial", "uuid")} == {
        "pci": "0000:9b:00.0", "serial": "1650124030003", "uuid": "GPU-5e1f0003-0000"}
    port = next(s for s in placed if s.unit == "nic-port")
    assert port.identity["instance_id"] == "i-0123456789abcdef0"  # the provider's own view wins
    assert port.identity["topology"] == "nn-1 > nn-2" and port.identity["zone"] == "us-east-1a"
    assert "rdma" not in port.identity


def test_an_infiniband_ports_identity_has_its_port_guid():
    hw = nic_port_hardware(port="mlx5_0/1", netdev="ib0", pci="0000:18:00.0")
    hw.ports["mlx5_0/1"]["port_guid"] = "0xa088c20300da6300"
    [s] = diagnose([finding("rdma-symbol-errors", "rdma:mlx5_0/1")], hosts=outcomes("gpu001"),
                   hardware={"gpu001": hw}).suspects
    assert s.identity["port_guid"] == "0xa088c20300da6300"


def test_a_shared_suspect_lists_the_instance_ids_below_it():
    shared = finding("shared-component-fault", "switch:leaf-3", None)
    hosts = [finding("rdma-symbol-errors", "rdma:mlx5_0/1", h, related=["switch:leaf-3"]) for h in ("a1", "a2")]
    hardware = {"a2": HostHardware("a2", identity={"instance_id": "i-0000000000000000a"})}
    [s] = diagnose([shared, *hosts], hosts=outcomes("a1", "a2"), hardware=hardware,
                   placements=[Placement("a1", "aws", instance_id="i-0000000000000000b")]).suspects
    assert s.identity == {"instance_ids": "a1=i-0000000000000000b, a2=i-0000000000000000a"}


def test_to_dict_is_json_ready():
    import json

    d = diagnose([xid(79)], hosts=outcomes("gpu001"))
    data = json.loads(json.dumps(d.to_dict()))
    [s] = data["suspects"]
    assert s["severity"] == "critical" and s["name"] == "gpu001 GPU at 0000:9b:00.0"
    assert set(s) >= {"id", "host", "unit", "components", "verdict", "verdict_text", "severity", "confidence",
                      "q_value", "owner", "action", "evidence", "identity", "findings", "key_number", "hosts"}


def test_a_host_not_captured_is_not_counted_among_the_captured():
    """The only host unreachable: its host-unreachable suspect is not "1 of 0 hosts"."""
    from fabricase.diagnosis import diagnose
    from fabricase.diagnosis.models import HostOutcome
    from fabricase.models import Evidence, Finding, Severity

    down = Finding("host-unreachable", Severity.MAJOR, "gpu002", "host", "gpu002: unreachable",
                   [Evidence("host_status", "unreachable", "state", "ok")])
    hosts = [HostOutcome("gpu001", "ok"), HostOutcome("gpu002", "unreachable", "no route")]
    d = diagnose([down], hosts=hosts)
    assert len(d.suspects) == 1
    assert d.verdict_line == "no suspect on 1 host; 1 host healthy; 1 host not captured"
    alone = diagnose([down], hosts=hosts[1:])
    assert alone.verdict_line == "no suspect on 0 hosts; 0 hosts healthy; 1 host not captured"
