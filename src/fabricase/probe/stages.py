"""The probe's stages, each a function of the running Probe that plans its rounds and hands them to it: rdma
(ib_*_bw ring pairs, rail to rail), tcp (iperf3 pairs), nccl (all_reduce_perf and the bisection), gpu (dcgmi diag).
See fabricase.probe.run for the order and the guard rails.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from fabricase.perf.runners import ib_write_bw_command, iperf3_command, nccl_tests_argv
from fabricase.probe import judge
from fabricase.probe.exec import Outcome
from fabricase.probe.facts import HostFacts, common_rails
from fabricase.probe.model import ProbeTest
from fabricase.probe.plan import Bisection, disjoint_rounds, pair_rounds

if TYPE_CHECKING:
    from fabricase.probe.run import Probe

__all__ = ["STAGES"]


def _rails(probe: Probe) -> list[tuple[int, dict[str, tuple[str, int, int | None]]]]:
    """Rail index -> host -> (device, port, GID index) for every rail all probed hosts have."""
    opts = probe.opts
    if opts.devices:
        port = opts.ib_port or 1
        return [(i, {h: (dev, port, opts.gid_index) for h in probe.hosts}) for i, dev in enumerate(opts.devices)]
    facts: list[HostFacts] = [probe.facts[h] for h in probe.hosts]
    out = []
    for i in range(common_rails(facts)):
        out.append((i, {f.host: (f.rails[i].device, opts.ib_port or f.rails[i].port,
                                 opts.gid_index if opts.gid_index is not None else f.rails[i].gid_index)
                        for f in facts}))  # fmt: skip
    return out


def _port_rate(probe: Probe, rail: int) -> tuple[float | None, str | None]:
    if probe.opts.expect_pair_gbps is not None:
        return probe.opts.expect_pair_gbps, f"90% of the given {probe.opts.expect_pair_gbps:g} Gb/s"
    rates = {f.rails[rail].rate_gbps for f in probe.facts.values() if len(f.rails) > rail}
    rates.discard(None)
    if len(rates) == 1:
        rate = rates.pop()
        return rate, f"90% of the {rate:g} Gb/s port rate (capture)"
    return None, None


def _run_pair_rounds(probe: Probe, rounds: list[list[tuple[str, str]]],
                     test: Callable[[int, str, str], ProbeTest], expected_key: str) -> bool:
    """Run planned pair rounds in order (`test(n, server, client)` builds the n-th test of a round), then each
    pair that gave a slow figure once more (its `parent` the first test): one slow run is what a busy CPU or a
    noisy neighbour does to a healthy pair now and then, and the analysis calls a pair slow only when it is slow
    every time. False when the probe stopped before all of them ran (the rest is counted as not started)."""
    ran: list[tuple[ProbeTest, Outcome | None]] = []
    for n_round, pairs in enumerate(rounds):
        if probe.halted(probe.opts.duration_s + 5):
            probe.not_started(sum(len(r) for r in rounds[n_round:]))
            return False
        probe.round += 1
        tests = [test(n, server, client) for n, (server, client) in enumerate(pairs)]
        outcomes = probe.run_pairs(tests)
        ran += [(t, outcomes.get(t.id)) for t in tests]
    again = disjoint_rounds(_slow_figures(ran, probe.expected.get(expected_key)), key=lambda t: t.hosts)
    for n_round, firsts in enumerate(again):
        if probe.halted(probe.opts.duration_s + 5):
            probe.not_started(sum(len(r) for r in again[n_round:]))
            return False
        probe.round += 1
        probe.run_pairs([replace(test(n, *first.hosts), parent=first.id) for n, first in enumerate(firsts)])
    return True


def _pair_gbps(test: ProbeTest, out: Outcome | None) -> float | None:
    """The figure of a pair test that ran to its end (Gb/s), read as the analysis reads it; None otherwise."""
    from fabricase.analysis.probe import figure_of

    if out is None or out.status != "ok":
        return None
    return figure_of(test, out.stdout.decode("utf-8", "replace"))[0]


def _slow_figures(ran: list[tuple[ProbeTest, Outcome | None]], expected: object) -> list[ProbeTest]:
    """The tests that run once more (judge.again_pairs: their figure was slow as the analysis judges it)."""
    values = [_pair_gbps(t, out) for t, out in ran]
    rate = float(expected) if isinstance(expected, (int, float)) and not isinstance(expected, bool) else None
    flags = judge.again_pairs(values, rate, len({h for t, _ in ran for h in t.hosts}))
    return [t for (t, _), again in zip(ran, flags, strict=True) if again]


def _stage_rdma(probe: Probe) -> None:
    rails = _rails(probe)
    if not rails:
        probe.notes["rdma"] = "no RDMA rail on every host (capture) and none given (--rdma-device)"
        return
    rounds = pair_rounds(probe.hosts, switch_of=probe.opts.switch_of or None, per_switch=probe.opts.per_switch)
    opts = probe.opts
    for tool in opts.rdma_tools:
        for rail, devices in rails:
            rate, basis = _port_rate(probe, rail)
            if rate is not None:
                probe.expected.setdefault("pair_gbps", rate)
                probe.expected.setdefault("pair_basis", basis)

            def test(n: int, server: str, client: str, tool=tool, rail=rail, devices=devices) -> ProbeTest:
                (sdev, sport, sgid), (cdev, cport, cgid) = devices[server], devices[client]
                common = dict(size=opts.message_bytes, duration=opts.duration_s, binary=tool, qps=opts.qps,
                              tcp_port=opts.rdma_port + n)
                server_argv = ib_write_bw_command(sdev, sport, None, gid_index=sgid, **common)
                client_argv = ib_write_bw_command(cdev, cport, probe.exec.address(server), gid_index=cgid, **common)
                return ProbeTest(probe.next_id(tool), tool, "pairs", probe.round, (server, client), rail=rail,
                                 devices=(sdev, cdev), argv=tuple(client_argv), server_argv=tuple(server_argv))

            if not _run_pair_rounds(probe, rounds, test, "pair_gbps"):
                return


def _stage_tcp(probe: Probe) -> None:
    opts = probe.opts
    if opts.expect_tcp_gbps is not None:
        probe.expected["tcp_gbps"] = opts.expect_tcp_gbps
        probe.expected["tcp_basis"] = f"90% of the given {opts.expect_tcp_gbps:g} Gb/s"
    rounds = pair_rounds(probe.hosts, switch_of=opts.switch_of or None, per_switch=opts.per_switch)

    def test(n: int, server: str, client: str) -> ProbeTest:
        port = opts.iperf_port + n
        return ProbeTest(probe.next_id("iperf3"), "iperf3", "tcp", probe.round, (server, client),
                         argv=tuple(iperf3_command(probe.exec.address(server), duration=opts.duration_s, port=port)),
                         server_argv=tuple(iperf3_command(None, port=port)))

    _run_pair_rounds(probe, rounds, test, "tcp_gbps")


def _busbw(out: Outcome | None) -> float | None:
    from fabricase.parsers.nccl_tests import parse_nccl_tests

    if out is None or out.status != "ok":
        return None
    row = parse_nccl_tests(out.stdout.decode("utf-8", "replace")).largest()
    return row.busbw if row is not None else None


def _gpus(probe: Probe) -> int:
    if probe.opts.gpus_per_host:
        return probe.opts.gpus_per_host
    counts = {probe.facts[h].gpus for h in probe.hosts}
    counts.discard(None)
    return min(counts) if counts else 1


def _busbw_baseline(probe: Probe) -> tuple[float | None, str | None]:
    """The busbw a run is held against: --expect-busbw, else the all_reduce floor of 8 SXM GPUs per host of one
    model (analysis.perf.ALLREDUCE_BUSBW_GBS, docs/perf-and-nccl.md) when the capture shows them, else none."""
    from fabricase.analysis.perf import ALLREDUCE_BUSBW_GBS

    given = probe.opts.expect_busbw
    if given is not None:
        return given, f"90% of the given {given:g} GB/s"
    facts = [probe.facts[h] for h in probe.hosts]
    models = {f.gpu_model for f in facts}
    if _gpus(probe) != 8 or len(models) != 1 or (model := models.pop()) is None or "PCIE" in model.upper():
        return None, None
    for name, (floor, why) in ALLREDUCE_BUSBW_GBS.items():
        if re.search(rf"(?<![A-Za-z0-9]){name}(?![0-9])", model):
            return floor, f"90% of the {floor:g} GB/s floor of {model} x8 ({why})"
    return None, None


def _stage_nccl(probe: Probe) -> None:
    opts = probe.opts
    if len(probe.hosts) < 2:
        probe.notes["nccl"] = "nccl-tests across hosts needs at least 2 hosts"
        return
    expected, basis = _busbw_baseline(probe)
    if expected is not None:
        probe.expected["busbw_gbs"], probe.expected["busbw_basis"] = expected, basis
    test_argv = tuple(nccl_tests_argv("all_reduce_perf", min_bytes=opts.nccl_min_bytes, max_bytes=opts.nccl_max_bytes,
                                      iters=opts.nccl_iters, warmup_iters=opts.nccl_warmup, gpus=_gpus(probe)))
    bisection = Bisection(probe.hosts, expected_gbs=expected, always=opts.bisect)
    ids: dict[str, str] = {}  # SetRun id -> test id
    while sets := bisection.next_round():
        if probe.halted(60):
            probe.skip([ProbeTest(f"{s.id}-unrun", "all_reduce_perf", "bisect", probe.round + 1, s.hosts)
                        for s in sets])
            return
        probe.round += 1
        tests = []
        for s in sets:
            test_id = probe.next_id("all_reduce_perf")
            ids[s.id] = test_id
            role = bisection.role(s.id)
            stage = ("collective" if s.parent is None else "bisect") if role == "collective" else f"bisect-{role}"
            tests.append(ProbeTest(test_id, "all_reduce_perf", stage, probe.round, s.hosts,
                                   parent=ids.get(s.parent) if s.parent else None, argv=test_argv))
        outcomes = probe.run_collectives(tests, env={"NCCL_DEBUG": "INFO"})
        for s, t in zip(sets, tests, strict=True):
            bisection.record(s.id, _busbw(outcomes.get(t.id)))
        if probe.stopped:
            break
    outcome = bisection.outcome()
    probe.notes["bisection"] = {"conclusion": outcome.conclusion, "suspects": list(outcome.suspects),
                                   "note": outcome.note}


_DCGM = 'command -v dcgmi >/dev/null 2>&1 || { echo "dcgmi: not installed" >&2; exit 0; }; exec dcgmi diag -r "$1"'


def _stage_gpu(probe: Probe) -> None:
    if probe.halted(60):
        return
    probe.round += 1
    level = str(probe.opts.dcgm_level)
    tests = [ProbeTest(probe.next_id("dcgmi"), "dcgmi", "gpu", probe.round, (h,),
                       argv=("sh", "-c", _DCGM, "fabricase", level)) for h in probe.hosts]
    probe.run_each(tests)


STAGES: dict[str, Callable[[Probe], None]] = {
    "rdma": _stage_rdma, "tcp": _stage_tcp, "nccl": _stage_nccl, "gpu": _stage_gpu,
}
