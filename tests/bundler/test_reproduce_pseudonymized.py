"""reproduce.sh from a pseudonymized capture.json (issue 15): the hosts are tokens, listed rather than folded
(random hex folds into nonsense), and an earlier fabricase's `[REDACTED:nodeset]` falls back to the host list."""

from __future__ import annotations

import random

from test_reproduce import META, collect_args


def _tokens(n: int) -> list[str]:
    rng = random.Random(15)
    return sorted(f"host-{rng.randbytes(5).hex()}" for _ in range(n))


def test_pseudonym_hosts_are_listed_not_folded(tmp_path):
    hosts = _tokens(3)
    meta = {**META, "targets": {"via": "ssh"}, "hosts": hosts}
    assert collect_args(tmp_path, meta)[1:3] == ["--hosts", ",".join(hosts)]


def test_a_dropped_nodeset_falls_back_to_the_host_list(tmp_path):
    hosts = _tokens(2)
    meta = {**META, "targets": {"nodeset": "[REDACTED:nodeset]", "hosts": hosts, "via": "ssh"}, "hosts": hosts}
    assert collect_args(tmp_path, meta)[1:3] == ["--hosts", ",".join(hosts)]
