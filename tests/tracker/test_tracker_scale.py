"""The tracker at fleet scale: the duplicate check of `open` over 300,000 hosts, instances and components, on
SQLite and PostgreSQL. A plain IN list binds one parameter a value: SQLite refuses more than 32,766 of them and
PostgreSQL's protocol more than 65,535, so these checks failed before covering() took one parameter a list."""

from __future__ import annotations

from fabricase.models import Severity

N = 300_000  # over both limits: PostgreSQL 65,535 binds; SQLite 32,766 by default (250,000 in Debian's build)


def _fleet(prefix: str) -> list[str]:
    return [f"{prefix}{i:06d}" for i in range(N)]


def test_covering_a_fleet_of_300000_hosts_finds_the_escalation_that_covers_one(tracker):
    esc = tracker.create(provider="aws", title="gpu050000 mlx5_3 symbol errors", symptom="slow",
                         severity=Severity.MAJOR, hosts=["gpu050000", "gpu099999"],
                         components=[("gpu050000", "rdma:mlx5_3/1"), (None, "switch:leaf-77")],
                         instances={"gpu050000": "i-0a1b2c3d4e5f00001"})
    other = tracker.create(provider="gcp", title="elsewhere", symptom="slow", severity=Severity.MINOR,
                           hosts=["other-1"], components=[])
    hosts, instances = _fleet("gpu"), [f"i-{i:017x}" for i in range(N)]
    instances[7] = "i-0a1b2c3d4e5f00001"
    components = [f"switch:leaf-{i}" for i in range(N)]
    found = tracker.covering(provider="aws", hosts=hosts, instances=instances, components=components)
    assert [c.escalation_id for c in found] == [esc.id]
    assert set(found[0].matched) == {"host gpu050000", "host gpu099999", "instance i-0a1b2c3d4e5f00001",
                                     "switch:leaf-77"}
    assert [c.escalation_id for c in tracker.covering(provider=None, hosts=[*hosts, "other-1"])] == [esc.id,
                                                                                                      other.id]
    assert tracker.covering(provider="aws", hosts=_fleet("cpu")) == []
    assert tracker.covering(provider="aws") == []
