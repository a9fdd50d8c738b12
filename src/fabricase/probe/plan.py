"""The probe's plan: which hosts test against which (the pair rounds), and the bisection that narrows a slow
collective down to the slow hosts. Both are pure: they say what to run, the runner runs it and hands back the
figures, so the whole plan can be tested (and benchmarked) against a simulated fabric.

Pair rounds
-----------
The hosts go on a ring in the order given (duplicates dropped) and every ring edge is tested, so each host meets
two different partners: a host that is slow with both partners is the host, a slow result with one partner only
points at that partner or the path between them. A ring of even n splits into 2 perfect matchings, an odd ring
into 3 (the third holds the closing edge alone). Each edge runs in both directions, in different rounds, so
a round is a list of (server, client) tests on disjoint hosts: 4 rounds for even n, 6 for odd n. Two hosts have
one edge only (one partner each: a slow pair cannot say which side is slow). With `switch_of` and `per_switch`,
a round that would put more than `per_switch` tests on one switch is split, first fit, into as few rounds as
that takes; rounds that fit are left whole.

Bisection
---------
1. Round 1 runs the whole set. With an expected busbw it is judged by `judge.slow_sets`; not slow ends the
   bisection ("not-slow"). Without an expected figure one number says nothing: the bisection ends
   "inconclusive" unless `always` (--bisect) asks to go on anyway; `always` also goes on past a full set that
   was not slow.
2. Each later round splits every set still under suspicion into two halves (the first the larger) and runs all
   the halves at once; one round's sets are judged together by `judge.slow_sets` (against the expected figure,
   or against the best set of the round). Only the slow sets stay under suspicion and the others' hosts become
   known good. With an expected figure, a round in which no half is slow clears them: if nothing else is left,
   the collective is slow but no subset is ("no-subset-slow"). Without one, no set standing out means they are
   all alike: all stay under suspicion (a slow host may sit in every half; the next level tells them apart).
3. A slow set of 2 cannot be split further: each of its hosts runs paired with a different known-good host in
   the next round ("finish with pairs"), and a host whose pair is slow is named. A half of 1 host (odd splits)
   is paired the same way at once. Without an expected figure such a round also runs a control pair of two
   known-good hosts, so that pairs that are all slow still stand out against something. A host with no
   known-good host to pair with waits a round for one; if none ever comes, the hosts of slow sets are named as
   they are and the note says that they were not confirmed.
4. A host whose pair is slow is measured once more, paired with another known-good host ("confirm"), and named
   only when that pair is slow too: one slow run is what a busy CPU or a noisy neighbour does to a healthy host
   now and then, a slow host is slow every time. A host that is not slow again is known good, and the note
   says it ran slow once. A host that never finds a partner for its second run is named, and the note says so.

A run without a figure (failed, hung) is slow. Hosts are never in two sets of one round; each round halves the
sets, so there are about log2(n) + 3 rounds. Every set is a `SetRun` with an id (b1, b2, ... in the order
planned) and its parent, which `fabricase.probe.model.ProbeTest` carries as `parent`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from fabricase.probe import judge

__all__ = ["CONCLUSIONS", "ROLES", "Bisection", "BisectionOutcome", "SetRun", "disjoint_rounds", "pair_rounds",
           "partners"]

CONCLUSIONS = ("not-slow", "slow-hosts", "no-subset-slow", "inconclusive")
ROLES = ("collective", "pair", "confirm", "control")  # a halving set, a suspect paired with a known-good host, the
# same suspect paired again with another known-good host, two known-good hosts
NO_EXPECTED = "no expected busbw; pass --expect-busbw or --bisect"


def _ring_matchings(ring: list[str]) -> list[list[tuple[str, str]]]:
    n = len(ring)
    if n == 2:
        return [[(ring[0], ring[1])]]
    edges = [(ring[i], ring[(i + 1) % n]) for i in range(n)]
    if n % 2 == 0:
        return [edges[0::2], edges[1::2]]
    return [edges[0 : n - 1 : 2], edges[1 : n - 1 : 2], [edges[-1]]]


def _split_by_switch(tests: list[tuple[str, str]], switch_of: Mapping[str, str],
                     per_switch: int) -> list[list[tuple[str, str]]]:
    """First fit: each test goes into the first sub-round that still has room on all of its switches."""
    subs: list[list[tuple[str, str]]] = []
    loads: list[Counter[str]] = []
    for test in tests:
        switches = {switch_of[h] for h in test if h in switch_of}
        fits = [i for i, load in enumerate(loads) if all(load[s] < per_switch for s in switches)]
        if fits:
            i = fits[0]
        else:
            subs.append([])
            loads.append(Counter())
            i = len(subs) - 1
        subs[i].append(test)
        loads[i].update(switches)
    return subs


def pair_rounds(hosts: Sequence[str], *, switch_of: Mapping[str, str] | None = None,
                per_switch: int | None = None) -> list[list[tuple[str, str]]]:
    """The pair tests in rounds of (server, client) on disjoint hosts: each ring edge in both directions (see the
    module doc). At most `per_switch` tests of a round touch one switch when `switch_of` is given."""
    if per_switch is not None and per_switch < 1:
        raise ValueError(f"per_switch must be at least 1, not {per_switch}")
    ring = list(dict.fromkeys(hosts))
    if len(ring) < 2:
        return []
    rounds: list[list[tuple[str, str]]] = []
    for matching in _ring_matchings(ring):
        rounds.append(list(matching))
        rounds.append([(client, server) for server, client in matching])
    if switch_of is None or per_switch is None:
        return rounds
    return [sub for rnd in rounds for sub in _split_by_switch(rnd, switch_of, per_switch)]


T = TypeVar("T")


def disjoint_rounds(tests: Sequence[T], key: Callable[[T], Sequence[str]]) -> list[list[T]]:
    """`tests` in rounds where no host (key(test): its hosts) is in two tests of a round (first fit, in order):
    the pairs run a second time after the ring."""
    rounds: list[tuple[set[str], list[T]]] = []
    for t in tests:
        hosts = set(key(t))
        room = next((r for r in rounds if not r[0] & hosts), None)
        if room is None:
            rounds.append((set(), []))
            room = rounds[-1]
        room[0].update(hosts)
        room[1].append(t)
    return [r[1] for r in rounds]


def partners(rounds: Sequence[Sequence[tuple[str, str]]]) -> dict[str, set[str]]:
    """Each host's partners over all rounds."""
    out: dict[str, set[str]] = {}
    for rnd in rounds:
        for a, b in rnd:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
    return out


@dataclass(frozen=True)
class SetRun:
    """One collective run of the bisection. busbw: GB/s, None when not run yet, failed or hung; slow: as judged
    with the other sets of its round (None until the round is judged)."""

    id: str
    hosts: tuple[str, ...]
    round: int
    parent: str | None
    busbw: float | None = None
    slow: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "hosts": list(self.hosts), "round": self.round, "parent": self.parent,
                "busbw": self.busbw, "slow": self.slow}


@dataclass(frozen=True)
class BisectionOutcome:
    """Where the bisection ended. conclusion: one of CONCLUSIONS; suspects: the named hosts in the order given;
    note: one sentence saying how they were narrowed down, or why not."""

    conclusion: str
    suspects: tuple[str, ...]
    rounds: tuple[tuple[SetRun, ...], ...]
    expected_gbs: float | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"conclusion": self.conclusion, "suspects": list(self.suspects), "expected_gbs": self.expected_gbs,
                "note": self.note, "rounds": [[s.to_dict() for s in rnd] for rnd in self.rounds]}


def _figure(value: float) -> str:
    """GB/s as read: one decimal, or two significant digits under 1 (0.097 and 0.35 are not both "0.1")."""
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2g}"


def _gbs(value: float | None) -> str:
    return "no figure (failed or hung)" if value is None else f"{_figure(value)} GB/s"


def _ran(value: float | None) -> str:
    return "gave no figure (failed or hung)" if value is None else f"ran at {_figure(value)} GB/s"


def _listed(hosts: Sequence[str]) -> str:
    return ", ".join(hosts) if len(hosts) <= 6 else f"{', '.join(hosts[:6])} and {len(hosts) - 6} more"


class Bisection:
    """The bisection as a state machine: `next_round()` says which sets to run at once, `record()` takes each
    set's busbw, `outcome()` says where it stands (see the module doc for the rules)."""

    def __init__(self, hosts: Sequence[str], *, expected_gbs: float | None = None, always: bool = False,
                 fraction: float = judge.SET_FRACTION, relative: float = judge.SET_RELATIVE) -> None:
        self.hosts = tuple(dict.fromkeys(hosts))
        self.expected_gbs = expected_gbs
        self.always = always
        self._fraction = fraction
        self._relative = relative
        self._order = {h: i for i, h in enumerate(self.hosts)}
        self._rounds: list[list[SetRun]] = []
        self._recorded: set[str] = set()
        self._roles: dict[str, tuple[str, str | None]] = {}  # set id -> (role, the suspect host of a pair)
        self._to_split: list[SetRun] = []  # suspect sets of 3 or more hosts, halved next round
        self._waiting: list[tuple[str, str, bool]] = []  # (host, parent id, parent judged slow) to pair up
        self._cleared: set[str] = set()  # known-good hosts
        self._confirming: list[tuple[str, str]] = []  # (host, the id of its first slow pair) to pair again
        self._named: list[tuple[str, str]] = []  # (host, the id of its second slow pair with a known-good host)
        self._once: list[tuple[str, str]] = []  # (host, the id of its second pair, not slow): slow once only
        self._top_slow = False
        self._stood_out = False  # some set after round 1 was slow against the others or the expected figure
        self._done: tuple[str, str, tuple[str, ...]] | None = None
        if len(self.hosts) < 2:
            self._done = ("inconclusive", "a bisection needs at least two hosts", ())

    # -- the runner's side --------------------------------------------------------------------------------------

    def next_round(self) -> list[SetRun]:
        """The sets to run at once (disjoint hosts); the ones not recorded yet while a round is under way; []
        when done."""
        if self._done:
            return []
        if self._rounds:
            pending = [s for s in self._rounds[-1] if s.id not in self._recorded]
            if pending:
                return pending
            self._judge()
            if self._done:
                return []
        planned = self._plan()
        if not planned:
            self._done = self._conclude()
            return []
        self._rounds.append(planned)
        return list(planned)

    def record(self, set_id: str, busbw: float | None) -> None:
        """A set's busbw (GB/s); None for a run that failed, hung or timed out."""
        if set_id not in self._roles:
            raise ValueError(f"unknown bisection set: {set_id!r}")
        current = self._rounds[-1]
        for i, s in enumerate(current):
            if s.id == set_id:
                figure = None if busbw is None or not math.isfinite(busbw) else float(busbw)
                current[i] = replace(s, busbw=figure)
                self._recorded.add(set_id)
                return
        raise ValueError(f"bisection set {set_id} is of a round already judged")

    def role(self, set_id: str) -> str:
        """What a set is for: "collective" (a halving set), "pair" (a suspect host with a known-good one),
        "confirm" (a host whose pair was slow, with another known-good host) or "control" (two known-good hosts,
        the reference of a round without an expected figure)."""
        if set_id not in self._roles:
            raise ValueError(f"unknown bisection set: {set_id!r}")
        return self._roles[set_id][0]

    def outcome(self) -> BisectionOutcome:
        """Where the bisection stands; "inconclusive" with what is known so far when it has not finished. A round
        whose figures are all in is judged first (the same as next_round would)."""
        self.next_round()
        rounds = tuple(tuple(r) for r in self._rounds)
        if self._done:
            conclusion, note, suspects = self._done
            return BisectionOutcome(conclusion, suspects, rounds, self.expected_gbs, note)
        named = self._sorted(h for h, _ in self._named)
        so_far = f"{_listed(named)} slow paired with known-good hosts so far" if named else "no host named yet"
        note = f"the bisection stopped in round {len(rounds)} before it finished (interrupted or out of time); {so_far}"
        return BisectionOutcome("inconclusive", named, rounds, self.expected_gbs, note)

    # -- planning -----------------------------------------------------------------------------------------------

    def _sorted(self, hosts) -> tuple[str, ...]:
        return tuple(sorted(set(hosts), key=self._order.__getitem__))

    def _new(self, hosts: Sequence[str], parent: str | None, role: str, suspect: str | None = None) -> SetRun:
        run = SetRun(id=f"b{len(self._roles) + 1}", hosts=tuple(hosts), round=len(self._rounds) + 1, parent=parent)
        self._roles[run.id] = (role, suspect)
        return run

    def _plan(self) -> list[SetRun]:
        if not self._rounds:
            return [self._new(self.hosts, None, "collective")]
        planned: list[SetRun] = []
        to_split, self._to_split = self._to_split, []
        for s in to_split:
            half = (len(s.hosts) + 1) // 2
            for part in (s.hosts[:half], s.hosts[half:]):
                if len(part) >= 2:
                    planned.append(self._new(part, s.id, "collective"))
                else:
                    self._waiting.append((part[0], s.id, bool(s.slow)))
        free = sorted(self._cleared, key=self._order.__getitem__)
        pairs = self._confirm_pairs(free)
        waiting, self._waiting = self._waiting, []
        for host, parent, slow in waiting:
            if free:
                pairs.append(self._new((host, free.pop(0)), parent, "pair", host))
            else:
                self._waiting.append((host, parent, slow))
        if pairs and self.expected_gbs is None and len(free) >= 2:
            pairs.append(self._new(free[:2], None, "control"))
        return planned + pairs

    def _confirm_pairs(self, free: list[str]) -> list[SetRun]:
        """The second pairs of hosts whose first pair was slow, each with a known-good host other than its first
        partner where one is free (taken from `free`)."""
        confirming, self._confirming = self._confirming, []
        if not confirming:
            return []
        runs = self._runs()
        out = []
        for host, first in confirming:
            partner = next((h for h in free if h not in runs[first].hosts), free[0] if free else None)
            if partner is None:
                self._confirming.append((host, first))
                continue
            free.remove(partner)
            out.append(self._new((host, partner), first, "confirm", host))
        return out

    def _runs(self) -> dict[str, SetRun]:
        return {s.id: s for rnd in self._rounds for s in rnd}

    def _suspect(self, s: SetRun) -> None:
        if len(s.hosts) >= 3:
            self._to_split.append(s)
        else:
            self._waiting.extend((h, s.id, bool(s.slow)) for h in s.hosts)

    def _judge(self) -> None:
        current = self._rounds[-1]
        flags = judge.slow_sets([s.busbw for s in current], self.expected_gbs, fraction=self._fraction,
                                relative=self._relative)
        current[:] = [replace(s, slow=flag) for s, flag in zip(current, flags, strict=True)]
        if len(self._rounds) == 1:
            self._judge_top(current[0])
            return
        collectives = [s for s in current if self._roles[s.id][0] == "collective"]
        alike = self.expected_gbs is None and bool(collectives) and not any(s.slow for s in collectives)
        self._stood_out |= any(s.slow for s in current if self._roles[s.id][0] != "control")
        for s in current:
            role, host = self._roles[s.id]
            if role == "collective":
                if s.slow or alike:
                    self._suspect(s)
                else:
                    self._cleared.update(s.hosts)
            elif role == "pair" and host is not None:
                if s.slow:
                    self._confirming.append((host, s.id))
                else:
                    self._cleared.add(host)
            elif role == "confirm" and host is not None:
                if s.slow:
                    self._named.append((host, s.id))
                else:
                    self._once.append((host, s.id))
                    self._cleared.add(host)

    def _judge_top(self, top: SetRun) -> None:
        n = len(self.hosts)
        if self.expected_gbs is None and not self.always:
            self._done = ("inconclusive", f"{NO_EXPECTED} (all {n} hosts together {_ran(top.busbw)})", ())
            return
        if self.expected_gbs is not None and not top.slow and not self.always:
            self._done = ("not-slow", f"all {n} hosts together {_ran(top.busbw)}, at least "
                                      f"{self._fraction:.0%} of the expected {self.expected_gbs:g} GB/s", ())
            return
        self._top_slow = bool(top.slow) and self.expected_gbs is not None
        self._suspect(top)

    # -- the end ------------------------------------------------------------------------------------------------

    def _conclude(self) -> tuple[str, str, tuple[str, ...]]:
        n, k = len(self.hosts), len(self._rounds)
        top = self._rounds[0][0]
        against = f" against {self.expected_gbs:g} GB/s expected" if self.expected_gbs is not None else ""
        start = f"all {n} hosts together {_ran(top.busbw)}{against}"
        unpaired = self._sorted(h for h, _, slow in self._waiting if slow)
        once = self._sorted(h for h, _ in self._confirming)  # slow once, never measured again
        self._waiting, self._confirming = [], []
        if not any(s.busbw is not None for rnd in self._rounds for s in rnd):
            return ("inconclusive", f"no run of the bisection gave a figure ({k} rounds, every run failed or hung): "
                                    "that points at the launch or the tool, not at one host", ())
        runs = self._runs()
        noise = self._noise(runs)
        named = self._sorted(h for h, _ in self._named)
        if named or unpaired or once:
            how = self._twice(runs, self._named, "again")
            verb = "was" if len(how) == 1 else "were"
            found = f"paired with known-good hosts twice, {_listed(how)} {verb} slow both times" if how else ""
            single = (f"{_listed(once)} slow with a known-good host once, with none free to measure "
                      f"{'it' if len(once) == 1 else 'them'} again") if once else ""
            left = (f"no host was known good to pair {_listed(unpaired)} with, so the hosts of the slow sets are "
                    "named unconfirmed") if unpaired else ""
            detail = "; ".join(x for x in (found, single, left) if x)
            note = f"{start}; {k} rounds of halving narrowed it down: {detail}{noise}"
            return ("slow-hosts", note, self._sorted(named + unpaired + once))
        if self._top_slow or (self._stood_out and self.expected_gbs is not None):
            return ("no-subset-slow", f"{start}, but over {k} rounds no subset of them was slow: the "
                                      "fault is in what only the larger sets use (spine links, uplinks, the job's "
                                      f"size), not in one host{noise}", ())
        if self.expected_gbs is None:
            how = ("every set down to pairs ran alike" if not self._stood_out else
                   "no set that ran slow once was slow again in its parts or with known-good partners")
            return ("inconclusive", f"{start}, and with no expected busbw {how} over {k} rounds: no host stands "
                                    f"out (all are healthy, or all alike slow){noise}", ())
        return ("not-slow", f"{start}, and no subset of it was slow over {k} rounds{noise}", ())

    def _twice(self, runs: dict[str, SetRun], hosts: list[tuple[str, str]], word: str) -> list[str]:
        """ "gpu0003 (9.6 GB/s with gpu0000, again 9.5 GB/s with gpu0001)" for each (host, its second pair's
        id), in the order given: both pairs' figures and partners."""
        def with_(run: SetRun, host: str) -> str:
            return f"{_gbs(run.busbw)} with {next(h for h in run.hosts if h != host)}"

        return [f"{host} ({with_(runs[runs[set_id].parent or ''], host)}, {word} {with_(runs[set_id], host)})"
                for host, set_id in sorted(hosts, key=lambda x: self._order[x[0]])]

    def _noise(self, runs: dict[str, SetRun]) -> str:
        """What ran slow once and not again, as the end of the note ("" when nothing did)."""
        if not self._once:
            return ""
        how = self._twice(runs, self._once, "then")
        verb = "was" if len(how) == 1 else "were"
        return f"; {_listed(how)} {verb} slow once and not again, so counted healthy"
