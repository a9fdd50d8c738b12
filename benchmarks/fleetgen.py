"""Synthetic fleets for the evaluation harness (benchmarks/harness.py): realistic noise and injected faults,
written as real capture directories (format 2, or CAPTURE_FORMAT) that the real pipeline reads.

Each scenario is a fleet of N hosts x 8 RDMA ports (InfiniBand, 400 Gb/s), two counter snapshots 5 s apart:
- background: most ports idle or busy with no errors; a heavy-tailed minority (gamma-mixed Poisson) with a few
  symbol errors, receive errors or ACK timeouts, as real fleets always have;
- counter resets on a few ports (the second reading is lower);
- 8 GPUs x 6 NVLinks per host (`nvidia-smi nvlink -e`, both snapshots) and a kernel log;
- a dual-port ConnectX-7 on a RoCE (storage) fabric per host: `ethtool -S` of both ports in both snapshots, in
  the real mlx5 layout (the port-level counters of the captured fixture, with PFC on the RoCE priority 3), with
  RoCE traffic on busy ports, FEC-corrected bits, rare driver reloads (every counter restarts) and background
  PFC pause: most ports paused well under 1% of the interval, a few 0.5-5%;
- one injected fault, or none (a clean fleet): symbol errors on one port, a flapping link, a speed downshift,
  an RDMA ACK-timeout burst, NVLink replay errors on one link, an Xid 79 or Xid 74 on one GPU, a bad leaf
  switch (raised symbol errors on several of the 16 hosts under it), or a PFC storm from one host (its RoCE
  port sends pause frames on priority 3 for 35-100% of the interval; the other hosts under its leaf receive
  1-6% pause as the congestion spreads).
Placements (16 hosts per leaf switch) are written as the static provider's inventory in the capture's folder.

`build(scenario, folder, seed)` writes one scenario, `build_fleet16(folder)` the 16-host fleet with one fault on
each of 8 hosts; harness.py analyzes and scores them.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from fabricase.capturedir import WRITTEN_VERSION, host_capture_from_stream, write_capture_meta, write_host
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus

# The capture format fleets are written in: capturedir's default; a benchmark may set capturedir.FORMAT_VERSION (3).
CAPTURE_FORMAT = WRITTEN_VERSION
PORTS = 8
INTERVAL_S = 5.0
HOSTS_PER_LEAF = 16
COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors", "port_xmit_discards")
HW = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err")
KINDS = ("symbol-errors", "link-flap", "speed-downshift", "ack-timeouts", "nvlink-replay", "xid-79", "xid-74",
         "bad-switch", "pfc-storm")
GPUS, NVLINKS = 8, 6  # a reduced NVLink set per GPU (H100 has 18) keeps a 1,024-host scenario quick
GPU_BUSES = ("19", "3b", "4c", "5d", "9b", "bb", "cb", "db")
ETH_PORTS = ("ens1f0np0", "ens1f1np1")  # one dual-port ConnectX-7 per host on the RoCE (storage) fabric
ETH_GBPS = 200
ROCE_PRIO = 3
MLX5_STATS = Path(__file__).parents[1] / "tests/fixtures/real/ethernet/ethtool-S_isc-ethq/ethtool-S_mlx5_core.txt"
# Counters that move between the snapshots; every other line keeps the fixture's value (0 after a driver reload).
_TRAFFIC = tuple(f"{d}_{what}" for d in ("rx", "tx") for what in (
    "packets", "bytes", "vport_rdma_unicast_packets", "vport_rdma_unicast_bytes", "packets_phy", "bytes_phy",
    f"prio{ROCE_PRIO}_packets", f"prio{ROCE_PRIO}_bytes"))
_PFC = tuple(f"{d}_prio{ROCE_PRIO}_{what}" for d, what in (("rx", "pause"), ("rx", "pause_duration"), ("tx", "pause"),
                                                           ("tx", "pause_duration"), ("rx", "pause_transition")))
_STORM = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")
_PHY = ("rx_bits_phy", "rx_corrected_bits_phy")
_MARKED = f"rx_prio{ROCE_PRIO}_marked"
# mlx5 prints either the link-level (global) pause counters or, with PFC on, the per-priority ones.
_GLOBAL_PAUSE = ("rx_global_pause", "rx_global_pause_duration", "tx_global_pause", "tx_global_pause_duration",
                 "rx_global_pause_transition")


# A switch (an ASIC pipe, a line card) that hurts a minority of its ports: "minority-switch-<k>-x<e>" raises
# symbol errors by e in the 5 s interval on port 0 of k of the 16 hosts under one leaf. Both intensities, 1 (720/h)
# and 2 (1,440/h), stay below what the per-port 120/h test can see in 5 s: no host is flagged on its own.
MINORITY_COUNTS = (2, 3, 4, 6, 8)
MINORITY_ERRORS = (1, 2)
MINORITY_KINDS = tuple(f"minority-switch-{k}-x{e}" for e in MINORITY_ERRORS for k in MINORITY_COUNTS)


def minority_switch(kind: str | None) -> tuple[int, int] | None:
    """(hosts affected, symbol errors per port) of a "minority-switch-<k>-x<e>" kind (any k of 1..16), else None."""
    m = re.fullmatch(r"minority-switch-(\d+)-x(\d+)", kind or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass
class Scenario:
    name: str
    kind: str | None  # None: a clean fleet
    hosts: list[str]
    # Components that must be named: "host/rdma:mlx5_3/1", or "switch:leaf-007".
    truth: set[str] = field(default_factory=set)


def _item(snap: int, source: str, content: str) -> bytes:
    data = content.encode()
    return f"@@FC1 I rdma file {snap} 0 {len(data)} 0 - - {source}\n".encode() + data + b"\n"


def _cmd(snap: int, name: str, collector: str, content: str) -> bytes:
    data = content.encode()
    return f"@@FC1 I {collector} command {snap} 0 {len(data)} 0 1000.0 1000.1 cmd:{name}\n".encode() + data + b"\n"


def _nvlink_errors(bumped: dict[tuple[int, int], int]) -> str:
    """`nvidia-smi nvlink -e` in its real layout (see tests/hosttrees/nvidia.py)."""
    out = []
    for g in range(GPUS):
        out.append(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g:08d}-0000-0000-0000-000000000000)")
        for link in range(NVLINKS):
            out += [f"\t Link {link}: Replay Errors: {bumped.get((g, link), 0)}", f"\t Link {link}: Recovery Errors: 0",
                    f"\t Link {link}: CRC Errors: 0", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _mlx5_templates() -> tuple[str, str]:
    """`ethtool -S` of a ConnectX port as a format string over the moving counters: the fixture's port-level lines
    in its order (per-queue lines such as rx0_packets or ch3_events are left out: the analysis skips them and they
    would triple the text), PFC on the RoCE priority in place of global pause, rx_bits_phy (ConnectX-6 and later)
    and ECN marks. Returned as is, and as after a driver reload (every other counter 0)."""
    dynamic = {*_TRAFFIC, *_PFC, *_STORM, *_PHY, _MARKED}
    lines: list[tuple[str, str | None]] = []
    for line in MLX5_STATS.read_text().splitlines():
        name, sep, value = line.strip().rpartition(": ")
        if not sep or re.match(r"[a-z]+[0-9]+_", name):
            continue
        if name in _GLOBAL_PAUSE:
            if name == _GLOBAL_PAUSE[0]:
                lines += [(n, None) for n in (*_PFC, *_STORM)]
            continue
        lines.append((name, None if name in dynamic else value))
        if name == "rx_corrected_bits_phy":
            lines.append(("rx_bits_phy", None))
        elif name == "tx_prio7_packets":
            lines += [(f"rx_prio{ROCE_PRIO}_buf_discard", "0"), (f"rx_prio{ROCE_PRIO}_cong_discard", "0"),
                      (_MARKED, None)]
    head = "NIC statistics:\n"
    live = head + "".join(f"     {n}: {{{n}}}\n" if v is None else f"     {n}: {v}\n" for n, v in lines)
    reloaded = head + "".join(f"     {n}: {{{n}}}\n" if v is None else f"     {n}: 0\n" for n, v in lines)
    return live, reloaded


_MLX5_LIVE, _MLX5_RELOADED = _mlx5_templates()


def _pfc_pair(v0_us: int, share: float, us_per_frame: float) -> tuple[int, int, int, int]:
    """(pause frames, pause us) before and after an interval paused `share` of the time."""
    paused = round(share * INTERVAL_S * 1e6)
    return v0_us // 10, v0_us, v0_us // 10 + round(paused / us_per_frame), v0_us + paused


def _roce_port(rng: random.Random, *, busy: bool, rx_share: float, tx_share: float, storm_events: int | None = None,
               reload: bool = False) -> tuple[str, str]:
    """Both snapshots' `ethtool -S` of one RoCE port. Pause shares are of the 5 s interval. storm_events: None for
    a healthy port, else the pause-storm watchdog events of a NIC that cannot drain its receive buffers and pauses
    the fabric: it refreshes its XOFF every ~84 us (half a 65,535-quanta pause at 200 Gb/s) and takes almost no
    traffic in; background pause comes in short episodes of a few us."""
    storming = storm_events is not None
    up_us = round(rng.uniform(1, 60) * 86_400e6)
    history = rng.gammavariate(0.5, 0.001)  # the long-run paused share behind the since-boot values
    c0: dict[str, int] = {}
    c1: dict[str, int] = {}
    for direction in ("rx", "tx"):
        gbps = rng.uniform(20, 160) if busy else 0.0
        if direction == "rx" and storming:
            gbps = rng.uniform(0, 2)
        moved = round(gbps * 1e9 / 8 * INTERVAL_S)
        total = rng.randrange(10**12, 10**15)
        for kind in ("vport_rdma_unicast", f"prio{ROCE_PRIO}", "phy"):
            b, p = f"{direction}_{kind}_bytes", f"{direction}_{kind}_packets"
            if kind == "phy":
                b, p = f"{direction}_bytes_phy", f"{direction}_packets_phy"
            c0[b], c0[p] = total, total // 4150
            c1[b], c1[p] = total + moved, (total + moved) // 4150
        tcp = rng.randrange(10**9, 10**11)  # the netdev's own counters see only non-RDMA traffic
        c0[f"{direction}_bytes"], c0[f"{direction}_packets"] = tcp, tcp // 900
        c1[f"{direction}_bytes"], c1[f"{direction}_packets"] = tcp + 90_000, tcp // 900 + 100
    bits = rng.randrange(10**15, 10**18)
    corrected = round(bits * 10 ** rng.uniform(-9, -7))
    c0["rx_bits_phy"], c1["rx_bits_phy"] = bits, bits + round(ETH_GBPS * 1e9 * INTERVAL_S)
    c0["rx_corrected_bits_phy"] = corrected
    c1["rx_corrected_bits_phy"] = corrected + round(ETH_GBPS * 1e9 * INTERVAL_S * 10 ** rng.uniform(-9, -7))
    for direction, share, us_per_frame in (("rx", rx_share, rng.uniform(4, 16)),
                                           ("tx", tx_share, 84.0 if storming else rng.uniform(4, 16))):
        pfx = f"{direction}_prio{ROCE_PRIO}_pause"
        f0, d0, f1, d1 = _pfc_pair(round(history * up_us * (1 if direction == "rx" else 0.3)), share,
                                   us_per_frame)
        c0[pfx], c0[f"{pfx}_duration"], c1[pfx], c1[f"{pfx}_duration"] = f0, d0, f1, d1
    transitions = rng.uniform(0.3, 0.9)
    c0[f"rx_prio{ROCE_PRIO}_pause_transition"] = round(c0[f"rx_prio{ROCE_PRIO}_pause"] * transitions)
    c1[f"rx_prio{ROCE_PRIO}_pause_transition"] = round(c1[f"rx_prio{ROCE_PRIO}_pause"] * transitions)
    past = rng.randrange(1, 4) if rng.random() < 0.01 else 0  # a storm long ago, still on the counter
    c0["tx_pause_storm_warning_events"], c1["tx_pause_storm_warning_events"] = past, past + (storm_events or 0)
    c0["tx_pause_storm_error_events"] = c1["tx_pause_storm_error_events"] = 0
    c0[_MARKED] = c0[f"rx_prio{ROCE_PRIO}_packets"] // 5000
    c1[_MARKED] = c0[_MARKED] + round((c1[f"rx_prio{ROCE_PRIO}_packets"] - c0[f"rx_prio{ROCE_PRIO}_packets"]) *
                                      min(rx_share * 4, 0.5))
    if reload:  # the driver reloaded during the interval: every counter restarted from 0
        since = rng.random()
        return _MLX5_LIVE.format_map(c0), _MLX5_RELOADED.format_map({k: round((c1[k] - c0[k]) * since) for k in c1})
    return _MLX5_LIVE.format_map(c0), _MLX5_LIVE.format_map(c1)


def _roce_ports(rng: random.Random, storm_port: int | None, spread_port: int | None) -> tuple[str, str]:
    """One host's `ethtool -S` item text (`### <port>` sections) in snapshots 0 and 1. storm_port: the port
    index pausing the fabric; spread_port: a port under the storming host's leaf, paused by the congestion."""
    texts: tuple[list[str], list[str]] = ([], [])
    for i, port in enumerate(ETH_PORTS):
        busy = rng.random() < 0.7
        rx_share = rng.gammavariate(0.5, 0.0005) if busy else 0.0
        tx_share = rng.gammavariate(0.5, 0.0002) if busy else 0.0
        if busy and rng.random() < 0.03:  # the moderate minority: incast-heavy jobs, a busy storage target
            rx_share = rng.uniform(0.005, 0.05)
        if busy and rng.random() < 0.01:
            tx_share = rng.uniform(0.005, 0.04)
        storm_events = None
        if i == storm_port:
            tx_share = rng.uniform(0.35, 1.0)
            # the stall-prevention watchdog may or may not have fired within the 5 s
            storm_events = rng.choice((0, 1, 1, 2))
        elif i == spread_port and busy:  # the leaf pauses the ports whose traffic fills its buffers
            rx_share = max(rx_share, rng.uniform(0.01, 0.06))
        s0, s1 = _roce_port(rng, busy=busy or i == storm_port, rx_share=rx_share, tx_share=tx_share,
                            storm_events=storm_events, reload=rng.random() < 0.002 and i != storm_port)
        texts[0].append(f"### {port}\n{s0}")
        texts[1].append(f"### {port}\n{s1}")
    return "".join(texts[0]), "".join(texts[1])


def _stream(ports: list[dict], nvlink: tuple[dict, dict] | None = ({}, {}), kernel_log: str | None = "",
            ethtool: tuple[str, str] = ("", ""), uptimes: tuple[float, float] | None = None) -> bytes:
    """One host's capture stream; nvlink or kernel_log None: that command was not captured (an IB-only host).
    uptimes: the host's /proc/uptime at each snapshot, when not 1000 s and 5 s later (a reboot in between)."""
    out = [b"@@FC1 BEGIN 1 1\n"]
    for snap in (0, 1):
        up = uptimes[snap] if uptimes else 1000.0 + snap * INTERVAL_S
        out.append(f"@@FC1 S {snap} {1.8e9 + snap * INTERVAL_S} {up}\n".encode())
        for p in ports:
            base = f"/sys/class/infiniband/{p['dev']}/ports/1"
            for name, (v0, v1) in p["counters"].items():
                folder = "hw_counters" if name in HW else "counters"
                out.append(_item(snap, f"{base}/{folder}/{name}", f"{v1 if snap else v0}\n"))
            out.append(_item(snap, f"{base}/state", "4: ACTIVE\n"))
            out.append(_item(snap, f"{base}/phys_state", "5: LinkUp\n"))
            out.append(_item(snap, f"{base}/rate", p["rate"] + "\n"))
        if nvlink is not None:
            out.append(_cmd(snap, "nvlink-errors", "nvidia", _nvlink_errors(nvlink[snap])))
        if ethtool[snap]:
            out.append(_cmd(snap, "ethtool-stats", "ethtool", ethtool[snap]))
        out.append(f"@@FC1 E {snap} {1.8e9 + snap * INTERVAL_S} {up + 0.05}\n".encode())
    for p in ports:
        out.append(_item(0, f"/sys/class/infiniband/{p['dev']}/ports/1/link_layer", "InfiniBand\n"))
        out.append(_item(0, f"/sys/class/infiniband/{p['dev']}/hca_type", "MT4129\n"))
    if kernel_log is not None:
        out.append(_cmd(0, "kernel-log", "kernel_log", kernel_log))
    out.append(b"@@FC1 END\n")
    return b"".join(out)


def _background(rng: random.Random) -> dict[str, tuple[int, int]]:
    counters = {}
    noisy = rng.random() < 0.05  # a heavy-tailed minority of ports always shows a few errors
    for name in (*COUNTERS, *HW):
        v0 = rng.randrange(0, 50) if name not in ("link_downed",) else rng.randrange(0, 3)
        # Background rates stay below what a physical-layer problem shows (IBTA: 120 symbol errors an hour).
        rate = rng.gammavariate(0.5, 0.004) if noisy and name in ("symbol_error", "port_rcv_errors",
                                                                    "local_ack_timeout_err") else 0.0
        delta = _poisson(rng, rate * INTERVAL_S)
        counters[name] = (v0, v0 + delta)
    data0 = rng.randrange(10**9, 10**12)
    busy = rng.random() < 0.7
    counters["port_rcv_data"] = (data0, data0 + (rng.randrange(10**9, 10**10) if busy else 0))
    counters["port_xmit_data"] = (data0, data0 + (rng.randrange(10**9, 10**10) if busy else 0))
    if rng.random() < 0.002:  # a counter reset (driver reload, perfquery -x) during the interval
        counters["symbol_error"] = (counters["symbol_error"][0] + 100, 0)
    return counters


def _poisson(rng: random.Random, mu: float) -> int:
    # Knuth's method: small means only, which is all the background needs.
    if mu <= 0:
        return 0
    limit, k, p = pow(2.718281828459045, -mu), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


@dataclass(frozen=True)
class Fault:
    """One injected fault: its kind, the host it is on and the port index (the GPU index for NVLink and Xid
    faults, ETH_PORTS[port % 2] for a PFC storm)."""

    kind: str
    host: str
    port: int


def _truth(fault: Fault) -> str:
    """The component the analysis must name for a fault, as "host/component" (Scenario.truth)."""
    if fault.kind == "nvlink-replay":
        return f"{fault.host}/nvlink:{fault.port}/1"
    if fault.kind in ("xid-79", "xid-74"):
        return f"{fault.host}/pcie:0000:{GPU_BUSES[fault.port]}:00"
    if fault.kind == "pfc-storm":
        return f"{fault.host}/netdev:{ETH_PORTS[fault.port % len(ETH_PORTS)]}"
    return f"{fault.host}/rdma:mlx5_{fault.port}/1"


def _ib_fault(kind: str, counters: dict[str, tuple[int, int]]) -> str | None:
    """Apply an InfiniBand port fault to one port's counters; the port's new rate string, else None."""
    if kind == "symbol-errors":
        counters["symbol_error"] = (counters["symbol_error"][0], counters["symbol_error"][0] + 40)
    elif kind == "link-flap":
        counters["link_downed"] = (counters["link_downed"][0], counters["link_downed"][0] + 2)
    elif kind == "speed-downshift":
        return "200 Gb/sec (2X NDR)"
    elif kind == "ack-timeouts":
        v0 = counters["local_ack_timeout_err"][0]
        counters["local_ack_timeout_err"] = (v0, v0 + 60)
    return None


# Counters that restart between the snapshots, on RESTARTED_HOSTS hosts of a clean fleet: "counter-reset" (a
# driver reload, `perfquery -R`: every counter of every port starts again from 0, and the 64-bit hw_counters of
# half the ports read, before, in the top quarter of 2^32, where a reset looks like a 32-bit wrap; the RoCE ports
# reload too, their pause time since boot just under 2^32 us) or "reboot" (the same, with the host's uptime
# starting again: counters since boot read higher than before on some ports, link_downed 1 after the boot's
# link-up). The truth is no suspect at all: every rate of those ports (of those hosts, for a reboot) is unknown.
RESET_KINDS = ("counter-reset", "reboot")
RESTARTED_HOSTS = 6


def _restart(kind: str, ports: list[dict], rng: random.Random) -> tuple[tuple[str, str], tuple[float, float] | None]:
    """Restart every counter of one host's IB ports in place (RESET_KINDS); its RoCE ports' `ethtool -S` texts
    after a driver reload, and the uptimes of a reboot (else None)."""
    for i, port in enumerate(ports):
        counters = port["counters"]
        for name, (v0, _) in counters.items():
            if name in HW and i % 2 == 0:
                v0 = rng.randrange(3 * 2**30 + 2**28, 2**32 - 1000)  # a reset here reads as a plausible 32-bit wrap
            since = rng.randrange(0, 60) if kind == "reboot" else rng.randrange(0, 3)
            if name in ("port_rcv_data", "port_xmit_data"):
                since = rng.randrange(10**6, 10**8)
            elif name == "link_downed":
                v0, since = 0, 1 if kind == "reboot" else 0  # the boot's own link-up
            counters[name] = (v0, since if kind == "reboot" else min(since, max(v0 - 1, 0)))
    texts: tuple[list[str], list[str]] = ([], [])
    for port_name in ETH_PORTS:
        s0, s1 = _roce_port(rng, busy=True, rx_share=rng.uniform(0, 0.01), tx_share=rng.uniform(0, 0.005),
                            reload=True)
        for direction in ("rx", "tx"):  # 67-72 min of pause since boot: a reload looks like minutes of pause
            name = f"{direction}_prio{ROCE_PRIO}_pause_duration"
            s0 = re.sub(rf"(?m)^(\s+{name}: )\d+$", rf"\g<1>{rng.randrange(4_000_000_000, 2**32 - 10**6)}", s0)
        texts[0].append(f"### {port_name}\n{s0}")
        texts[1].append(f"### {port_name}\n{s1}")
    uptimes = (rng.uniform(1, 60) * 86_400, rng.uniform(1, INTERVAL_S - 1)) if kind == "reboot" else None
    return ("".join(texts[0]), "".join(texts[1])), uptimes


def _build_restarted(scenario: Scenario, root: Path, seed: int, *, ib_only: bool) -> None:
    """A clean fleet but for RESTARTED_HOSTS hosts whose counters restart between the snapshots (RESET_KINDS)."""
    rng = random.Random(f"{seed}:{scenario.name}")
    eth_rng = random.Random(f"{seed}:{scenario.name}:roce")
    hosts = rng.sample(scenario.hosts, min(RESTARTED_HOSTS, len(scenario.hosts)))
    _write_fleet(root, scenario.name, scenario.kind, scenario.hosts, [], set(), rng, eth_rng, ib_only=ib_only,
                 restarted=dict.fromkeys(hosts, scenario.kind))
    scenario.truth = set()


def _write_fleet(root: Path, name: str, kind: str | None, hosts: list[str], faults: list[Fault],
                 bad_under_leaf: set[str], rng: random.Random, eth_rng: random.Random, *, ib_only: bool,
                 leaf_errors: int = 8, restarted: dict[str, str] | None = None) -> None:
    """Write a capture directory of `hosts` carrying `faults` (at most one per host) and, for a bad leaf, raised
    symbol errors on port 0 of the hosts in bad_under_leaf; plus the static inventory (16 hosts per leaf)."""
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "ethtool"])), interval_s=INTERVAL_S)
    root.mkdir(parents=True)
    write_capture_meta(root, plan=plan, targets={"harness": name, "kind": kind}, hosts=hosts,
                       created_at="2026-11-30T00:00:00Z", version=CAPTURE_FORMAT)
    on_host = {f.host: f for f in faults}
    storm_leaves = {hosts.index(f.host) // HOSTS_PER_LEAF: f for f in faults if f.kind == "pfc-storm"}
    inventory = {}
    for i, host in enumerate(hosts):
        inventory[host] = {"switch": f"leaf-{i // HOSTS_PER_LEAF:03d}", "rack": f"r{i // HOSTS_PER_LEAF:03d}"}
        fault = on_host.get(host)
        ports = []
        for p in range(PORTS):
            counters = _background(rng)
            rate = "400 Gb/sec (4X NDR)"
            if fault is not None and p == fault.port:
                rate = _ib_fault(fault.kind, counters) or rate
            elif host in bad_under_leaf and p == 0:  # the port cabled to the leaf
                counters["symbol_error"] = (counters["symbol_error"][0], counters["symbol_error"][0] + leaf_errors)
            ports.append({"dev": f"mlx5_{p}", "counters": counters, "rate": rate})
        nvlink: tuple[dict, dict] = ({}, {})
        kernel_log = "2026-11-30T00:00:00.000001+0000 host kernel: Linux version 6.8.0-45-generic\n"
        if fault is not None and fault.kind == "nvlink-replay":
            nvlink = ({(fault.port, 1): 12}, {(fault.port, 1): 52})
        elif fault is not None and fault.kind in ("xid-79", "xid-74"):
            kernel_log += (f"2026-11-29T23:59:58.000001+0000 host kernel: NVRM: Xid (PCI:0000:{GPU_BUSES[fault.port]}"
                           f":00): {fault.kind[4:]}, pid=4242, name=python, Ch 00000008\n")
        storm = storm_leaves.get(i // HOSTS_PER_LEAF)
        storm_port = storm.port % len(ETH_PORTS) if storm is not None else None
        ethtool = _roce_ports(eth_rng, storm_port if storm is not None and storm.host == host else None,
                              storm_port if storm is not None and storm.host != host else None)
        uptimes = None
        if restarted and host in restarted:
            ethtool, uptimes = _restart(restarted[host], ports, eth_rng)
        raw = _stream(ports, None, None, uptimes=uptimes) if ib_only else _stream(ports, nvlink, kernel_log, ethtool,
                                                                                 uptimes)
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "harness"
        write_host(root, hc, raw, CAPTURE_FORMAT)
    (root / "inventory.json").write_text(json.dumps({"hosts": inventory}, indent=1, sort_keys=True) + "\n")


def build(scenario: Scenario, root: Path, seed: int, *, ib_only: bool = False) -> None:
    """Write the scenario's capture directory at `root`. ib_only: the 8 InfiniBand ports of each host and nothing
    else (no NVLinks, RoCE ports or kernel log), the issue's "1,024 hosts x 8 NICs" for the analysis benchmark."""
    if scenario.kind in RESET_KINDS:
        return _build_restarted(scenario, root, seed, ib_only=ib_only)
    rng = random.Random(f"{seed}:{scenario.name}")
    # Its own stream, so that the RoCE ports leave every other draw (and the other kinds' fleets) as they were.
    eth_rng = random.Random(f"{seed}:{scenario.name}:roce")
    victim_host = rng.choice(scenario.hosts)
    victim_port = rng.randrange(PORTS)
    leaf = rng.randrange(len(scenario.hosts) // HOSTS_PER_LEAF)
    under_leaf = scenario.hosts[leaf * HOSTS_PER_LEAF:(leaf + 1) * HOSTS_PER_LEAF]
    minority = minority_switch(scenario.kind)
    affected, leaf_errors = minority or ((6, 8) if scenario.kind == "bad-switch" else (0, 8))
    bad_under_leaf = set(rng.sample(under_leaf, affected)) if affected else set()
    switch_kind = scenario.kind == "bad-switch" or minority is not None
    faults = [Fault(scenario.kind, victim_host, victim_port)] if scenario.kind and not switch_kind else []
    _write_fleet(root, scenario.name, scenario.kind, scenario.hosts, faults, bad_under_leaf, rng, eth_rng,
                 ib_only=ib_only, leaf_errors=leaf_errors)
    if switch_kind:
        scenario.truth = {f"switch:leaf-{leaf:03d}"}
    else:
        scenario.truth = {_truth(f) for f in faults}


# The 16-host acceptance fleet: one fault of each host-level kind, each on its own host (a bad leaf needs several
# hosts under one switch, and its symbol errors would sit beside the symbol-errors fault, so it is left out).
FLEET16_KINDS = ("symbol-errors", "link-flap", "speed-downshift", "ack-timeouts", "nvlink-replay", "xid-79",
                 "xid-74", "pfc-storm")


def build_fleet16(root: Path, seed: int = 1) -> set[str]:
    """Write a 16-host capture directory (one leaf) at `root` in which 8 hosts each carry one different fault
    (FLEET16_KINDS) and 8 are healthy, with its inventory.json; return the truths ("host/component")."""
    hosts = [f"gpu{i:04d}" for i in range(1, 17)]
    rng = random.Random(f"{seed}:fleet16")
    eth_rng = random.Random(f"{seed}:fleet16:roce")
    faulty = rng.sample(hosts, len(FLEET16_KINDS))
    faults = [Fault(kind, host, rng.randrange(PORTS)) for kind, host in zip(FLEET16_KINDS, faulty, strict=True)]
    _write_fleet(root, "fleet16", "fleet16", hosts, faults, set(), rng, eth_rng, ib_only=False)
    return {_truth(f) for f in faults}


def scenarios(hosts: int, per_kind: int, clean: int) -> list[Scenario]:
    names = [f"gpu{i:04d}" for i in range(1, hosts + 1)]
    out = [Scenario(f"{kind}-{n}", kind, names) for kind in KINDS for n in range(per_kind)]
    return out + [Scenario(f"clean-{n}", None, names) for n in range(clean)]
