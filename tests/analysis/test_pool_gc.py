"""The analysis's garbage-collector setting (analysis.pool.fewer_collections) and what crosses the pool's pipe."""

from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest

from fabricase.analysis.pool import _YOUNG_THRESHOLD, fewer_collections, map_hosts
from fabricase.models import CaptureItem, HostCapture, HostStatus, MetricSample


def test_collections_are_rarer_inside_and_restored_after_even_on_error():
    before = gc.get_threshold()
    seen = []

    def fn(hc):
        seen.append(gc.get_threshold()[0])
        raise KeyError(hc.host)

    with pytest.raises(KeyError):
        map_hosts([HostCapture("h1", HostStatus.OK, "replay")], fn)
    assert seen == [max(before[0], _YOUNG_THRESHOLD)]
    assert gc.get_threshold() == before
    with fewer_collections():
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before


def test_samples_and_items_pickle_whole_and_have_no_instance_dict():
    sample = MetricSample("gpu1", "rdma:mlx5_0/1", "symbol_errors", 3.0, "count", "/sys/x", 2.0, 0.4, "wrap")
    back = pickle.loads(pickle.dumps(sample))
    assert back == sample and dataclasses.asdict(back) == dataclasses.asdict(sample)
    item = CaptureItem("/sys/x", 1, "file", "rdma", "stream.fc1", 2, "ab" * 32, offset=7)
    assert pickle.loads(pickle.dumps(item)) == item
    for obj in (sample, item):
        assert not hasattr(obj, "__dict__")  # slots: a fleet holds millions of them
        with pytest.raises(AttributeError):
            obj.not_a_field = 1


def _freeze_count(hc: HostCapture) -> int:
    return gc.get_freeze_count()


def test_pool_children_leave_the_parents_heap_to_the_collector_frozen(monkeypatch):
    # A forked child's full collections walked the whole inherited heap (the capture, the CLI's objects) and, by
    # touching every object's header, copied its pages: bench_fleet's analysis took twice as long. The parent's
    # objects are frozen (gc.freeze) while the pool runs, and thawed after.
    from fabricase.analysis import pool

    monkeypatch.setenv(pool.WORKERS_ENV, "2")
    hosts = [HostCapture(f"h{i}", HostStatus.OK, "replay") for i in range(pool.MIN_POOL_HOSTS)]
    if pool.pool_workers(len(hosts)) < 2:
        pytest.skip("no fork here, or another thread runs: the pool stays serial")
    counts = [o.value for o in map_hosts(hosts, _freeze_count)]
    assert len(counts) == len(hosts) and min(counts) > 1000
    assert gc.get_freeze_count() == 0


def test_the_fleet_steps_samples_share_their_component_and_source_names_across_hosts(tmp_path, monkeypatch):
    # About a thousand samples per host are kept until the fleet step; each host's names were its own copies
    # (10,000 HGX hosts: hundreds of MiB of equal strings). In the pool too, where pickle shares them per chunk.
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import fleetgen

    from fabricase.analysis import analyze
    from fabricase.analysis.pool import WORKERS_ENV, _bounds, pool_workers
    from fabricase.capturedir import load_capture

    hosts = [f"gpu{i:03d}" for i in range(1, 129)]  # full hosts: NVLinks, RoCE ports, kernel logs
    fleetgen.build(fleetgen.Scenario("clean", None, hosts), tmp_path / "cap", seed=3, ib_only=False)
    monkeypatch.setenv(WORKERS_ENV, "2")
    if pool_workers(len(hosts)) < 2:
        pytest.skip("no fork here, or another thread runs: the pool stays serial")
    samples: dict = {}
    analyze(load_capture(tmp_path / "cap"), samples_out=samples)
    chunks = len(_bounds(len(hosts), 2))
    kept = [s for host in hosts for s in samples[host]]
    for field in ("component", "source"):
        values = {getattr(s, field) for s in kept}
        copies = {id(getattr(s, field)) for s in kept}
        assert len(kept) > 100 * len(values)
        assert len(copies) <= chunks * len(values) < len(hosts) * len(values) / 4, field  # one per chunk at most
