"""The summary form's parts on their own: the fleet summary's statistics against a direct computation, the
host selection's determinism and per-class sampling, and verify's check of the manifest's summary record."""

from __future__ import annotations

import json
import random
import statistics

import numpy as np
from bundle_helpers import manifest_for, regular, write_tar

from fabricase.bundler.fleet_summary import fleet_summary
from fabricase.bundler.select import PEERS_PER_CLASS, select_hosts
from fabricase.bundler.verify import verify_bundle
from fabricase.models import Finding, HostCapture, HostStatus, MetricSample, Placement, Severity


def _fleet(n: int, seed: int) -> dict[str, list[MetricSample]]:
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        host = f"node{i:03d}"
        out[host] = [MetricSample(host, f"rdma:mlx5_{p}/1", "symbol_error", None, "count",
                                  delta=float(rng.choice([0, 0, 0, rng.randrange(1, 500)])))
                     for p in range(4)]
        out[host].append(MetricSample(host, "netdev:eth0", "speed", float(rng.choice([100, 200])), "Gb/s"))
        out[host].append(MetricSample(host, "netdev:eth0", "rx_missed", None, "count"))  # not exposed
    return out


def test_fleet_summary_matches_a_direct_computation() -> None:
    samples = _fleet(50, seed=3)
    classes = {h: ("a" if int(h[4:]) % 2 else "b") for h in samples}
    doc = fleet_summary(samples, classes)
    assert doc["classes"] == {"a": 25, "b": 25}
    assert "rx_missed" not in doc["counters"]  # missing is not 0: never counted
    for label in ("a", "b"):
        rows = [(h, s.delta) for h, ss in samples.items() if classes[h] == label for s in ss
                if s.metric == "symbol_error"]
        values = [v for _, v in rows]
        got = doc["counters"]["symbol_error"]["classes"][label]["delta"]
        assert got["samples"] == len(values) and got["hosts"] == 25
        assert got["hosts_nonzero"] == len({h for h, v in rows if v})
        assert (got["min"], got["max"], got["sum"]) == (min(values), max(values), sum(values))
        assert got["p50"] == statistics.median(values)
        assert got["p90"] == float(np.quantile(sorted(values), 0.9))
        speed = doc["counters"]["speed"]["classes"][label]["value"]
        assert speed["samples"] == 25 and doc["counters"]["speed"]["unit"] == "Gb/s"


def _hosts(names: list[str], down: set[str] = frozenset()) -> list[HostCapture]:
    return [HostCapture(h, HostStatus.UNREACHABLE if h in down else HostStatus.OK, "fake") for h in names]


def test_selection_is_deterministic_and_samples_each_class() -> None:
    samples = _fleet(60, seed=5)
    names = list(samples)
    placements = [Placement(host=h, provider="aws", instance_type="p5.48xlarge" if i < 40 else "p4d.24xlarge")
                  for i, h in enumerate(names)]
    bad = Finding("rdma-symbol-errors", Severity.MAJOR, "node007", "rdma:mlx5_1/1", "errors", [])
    minor = Finding("rdma-symbol-errors", Severity.MINOR, "node008", "rdma:mlx5_1/1", "a few", [])
    hosts = _hosts(names, down={"node050"})
    a = select_hosts(hosts, [bad, minor], None, samples, placements=placements)
    b = select_hosts(list(reversed(hosts)), [minor, bad], None, samples, placements=placements)
    assert set(a.included) == set(b.included) and a.suspects == ["node007"]
    assert "node050" not in a.peers and "node008" not in a.suspects
    per_class: dict[str, int] = {}
    for h in a.peers:
        per_class[a.classes[h]] = per_class.get(a.classes[h], 0) + 1
    assert set(per_class.values()) == {PEERS_PER_CLASS} and len(per_class) == 2
    assert sorted(a.included + a.left_out) == sorted(names)
    shifted = select_hosts(hosts[1:], [bad], None, samples, placements=placements)
    # dropping one host changes at most that host's own place: the rest of the choice is by name, not position
    assert len(set(shifted.peers) ^ set(a.peers)) <= 2


def test_verify_names_a_manifest_summary_that_capture_json_does_not_carry(tmp_path) -> None:
    capture_json = json.dumps({"format": "fabricase-capture", "format_version": 2, "hosts": []}).encode()
    members = {"capture/capture.json": capture_json}
    manifest = manifest_for(members, capture_format_version=2, capture={"collectors": {}, "commands": {}},
                            summary={"form": "summary", "hosts_included": 1, "hosts_targeted": 9})
    path = write_tar(tmp_path / "b.tar.gz", [regular("MANIFEST.json", manifest),
                                             regular("capture/capture.json", capture_json)])
    report = verify_bundle(path)
    assert not report.ok
    assert any(p.startswith("summary:") for p in report.problems), report.problems
