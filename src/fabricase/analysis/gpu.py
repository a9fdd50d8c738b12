"""GPU fabric metrics of one host (nvidia-smi, NVLink, NVSwitch, Fabric Manager, IMEX, DCGM) and the rules
over them. Components: gpu:<index>, nvlink:<gpu>/<link>, nvswitch:<pci address>, fabric-manager, imex, host."""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections import defaultdict

from fabricase.analysis._items import HostItems, by_family, per_samples
from fabricase.analysis.rates import counter_delta
from fabricase.models import Evidence, Finding, HostCapture, MetricSample, Severity
from fabricase.parsers.dcgm import parse_dcgmi_health
from fabricase.parsers.fabric_manager import FabricManagerState, parse_daemon_log, parse_fabric_manager_state
from fabricase.parsers.imex import parse_imex_status
from fabricase.parsers.nvidia_smi import NvidiaSmiReport, normalize_pci, parse_nvidia_smi_q, parse_nvidia_smi_xml
from fabricase.parsers.nvlink import NvlinkReport, pair_error_counters, parse_nvlink_status

__all__ = [
    "NVLINK_STATUS", "NVSWITCH_PROCFS", "RULES", "SMI_TEXT", "SMI_XML", "dcgm_health", "fabric_manager_down",
    "gpu_fabric_unhealthy", "gpu_memory_remap", "gpu_pcie_downgraded", "gpu_samples", "imex_unhealthy",
    "nvidia_smi_report", "nvlink_errors", "nvlink_inactive", "nvswitch_fm_errors", "samples",
]  # fmt: skip

SMI_XML, SMI_TEXT = "cmd:nvidia-smi-xml", "cmd:nvidia-smi-q"
NVLINK_STATUS, NVLINK_ERRORS = "cmd:nvlink-status", "cmd:nvlink-errors"
NVSWITCH_PROCFS = "/proc/driver/nvidia-nvswitch/devices/"
_FABRIC_OK = {"state": "Completed", "status": "Success"}
_HEALTH_OK = {"n/a", "healthy", "false", "no", "none", "full", "not degraded", ""}


# ---------------------------------------------------------------------------------------------- samples


def nvidia_smi_report(items: HostItems) -> tuple[NvidiaSmiReport | None, str | None]:
    """The XML report when it has GPUs, else the text one; a GPU whose XML lacks the Fabric section (older
    XML schemas) takes it from the text. Returns (report, source item). Parsed once per host (the GPU samples,
    the kernel log's GPU names and the diagnosis's hardware all read it); the report is shared: callers must
    not change it."""
    return items.memo("nvidia_smi_report", lambda: _nvidia_smi_report(items))


def _nvidia_smi_report(items: HostItems) -> tuple[NvidiaSmiReport | None, str | None]:
    xml_text = items.text(SMI_XML)
    xml = parse_nvidia_smi_xml(xml_text) if xml_text else None
    if xml and xml.gpus and all(g.fabric is not None for g in xml.gpus):
        return xml, SMI_XML  # the text says nothing more that analysis uses: skip parsing it
    q_text = items.text(SMI_TEXT)
    text = parse_nvidia_smi_q(q_text) if q_text else None
    if xml and xml.gpus:
        for gpu in xml.gpus:
            twin = text.gpu_at(gpu.bus_id) if text else None
            if gpu.fabric is None and twin is not None:
                gpu.fabric = twin.fabric
        return xml, SMI_XML
    if text and text.gpus:
        return text, SMI_TEXT
    return None, None


def _gpu_samples(hc: HostCapture, report: NvidiaSmiReport, source: str) -> list[MetricSample]:
    out = []
    for gpu in report.gpus:
        comp = f"gpu:{gpu.index}"

        def add(metric, value, unit, note=None, comp=comp):
            out.append(MetricSample(hc.host, comp, metric, value, unit, source, note=note))

        add("gpu.pci_address", None, "address", gpu.bus_id)
        add("gpu.name", None, "name", gpu.name)
        add("gpu.performance_state", None, "state", gpu.performance_state)
        for metric, value, unit in (
            ("pcie.link_gen", gpu.pcie_gen_current, "gen"), ("pcie.link_gen_max", gpu.pcie_gen_max, "gen"),
            ("pcie.link_width", gpu.pcie_width_current, "lanes"),
            ("pcie.link_width_max", gpu.pcie_width_max, "lanes"), ("pcie.replays", gpu.pcie_replays, "replays"),
            ("gpu.remapped_rows_correctable", gpu.remapped_rows_correctable, "rows"),
            ("gpu.remapped_rows_uncorrectable", gpu.remapped_rows_uncorrectable, "rows"),
            ("gpu.remapped_rows_pending", _bit(gpu.remapped_rows_pending), "flag"),
            ("gpu.remapped_rows_failure", _bit(gpu.remapped_rows_failure), "flag"),
            ("gpu.retired_pages_pending", _bit(gpu.retired_pages_pending), "flag"),
            ("gpu.temperature", gpu.temperature_c, "C"), ("gpu.power_draw", gpu.power_draw_w, "W"),
        ):  # fmt: skip
            add(metric, value, unit)
        for name, value in sorted(gpu.ecc.items()):
            add(f"ecc.{name}", value, "errors")
        if gpu.fabric is not None:
            add("fabric.state", None, "state", gpu.fabric.state)
            add("fabric.status", None, "state", gpu.fabric.status)
            add("fabric.clique_id", gpu.fabric.clique_id, "id")
            add("fabric.cluster_uuid", None, "id", gpu.fabric.cluster_uuid)
            for name, value in sorted(gpu.fabric.health.items()):
                add(f"fabric.health.{name}", None, "state", value)
    return out


def _bit(flag: bool | None) -> int | None:
    return None if flag is None else int(flag)


def _nvlink_samples(hc: HostCapture, items: HostItems) -> list[MetricSample]:
    out = []
    status_text = items.text(NVLINK_STATUS)
    status = parse_nvlink_status(status_text) if status_text else NvlinkReport()  # most hosts: none or no GPUs
    for gpu in status.gpus.values():
        if gpu.links or gpu.all_inactive:
            active = sum(link.state == "active" for link in gpu.links.values())
            out.append(MetricSample(hc.host, f"gpu:{gpu.index}", "nvlink.links_active", active, "links",
                                    NVLINK_STATUS, note="all inactive" if gpu.all_inactive else None))  # fmt: skip
        for link in gpu.links.values():
            comp = f"nvlink:{gpu.index}/{link.link}"
            up = None if link.state is None else int(link.state == "active")
            out.append(MetricSample(hc.host, comp, "nvlink.link_state", up, "flag", NVLINK_STATUS, note=link.state))
            if link.speed_gbps is not None:
                out.append(MetricSample(hc.host, comp, "nvlink.link_speed_gbps", link.speed_gbps, "GB/s",
                                        NVLINK_STATUS))  # fmt: skip
    return out + _error_samples(hc, items.text(NVLINK_ERRORS, 0), items.text(NVLINK_ERRORS, 1))


def _error_samples(hc: HostCapture, text0: str | None, text1: str | None) -> list[MetricSample]:
    """The `nvlink -e` counters of both snapshots, by GPU, link and counter name, with delta and rate. A host has a
    few hundred and they seldom move: when every counter is in both snapshots and none went down, the samples are
    made in bulk (map over the plan's columns), without one counter_delta call each."""
    plan, values0, values1 = pair_error_counters(text0, text1)
    if not plan.components:
        return []
    interval, host = hc.interval_s, hc.host
    valid = interval is not None and math.isfinite(interval) and interval > 0
    if plan.complete and plan.components:
        v0s, v1s = [values0[p] for p in plan.at0], [values1[p] for p in plan.at1]
        if all(map(operator.ge, v1s, v0s)):  # counter_delta's common case
            deltas = list(map(operator.sub, v1s, v0s))
            rates = [d / interval for d in deltas] if valid else itertools.repeat(None)  # type: ignore[operator]
            return list(map(MetricSample, itertools.repeat(host), plan.components, plan.metrics, v1s,
                            itertools.repeat("errors"), itertools.repeat(NVLINK_ERRORS), deltas, rates,
                            itertools.repeat(None)))  # fmt: skip
    out = []
    for comp, metric, p0, p1 in zip(plan.components, plan.metrics, plan.at0, plan.at1, strict=True):
        v0 = values0[p0] if p0 >= 0 else None
        v1 = values1[p1] if p1 >= 0 else None
        if v0 is not None and v1 is not None and v1 >= v0:  # counter_delta's common case, inlined
            delta = v1 - v0
            out.append(MetricSample(host, comp, metric, v1, "errors", NVLINK_ERRORS, delta,
                                    delta / interval if valid else None, None))  # type: ignore[operator]
            continue
        d = counter_delta(v0, v1, interval)
        out.append(MetricSample(host, comp, metric, v0 if v1 is None else v1, "errors", NVLINK_ERRORS, d.delta,
                                d.rate, d.note))  # fmt: skip
    return out


def _daemon_samples(hc: HostCapture, items: HostItems) -> list[MetricSample]:
    out = []
    for source in items.sources(NVSWITCH_PROCFS):
        address = normalize_pci(source[len(NVSWITCH_PROCFS) :].split("/", 1)[0])
        bios = (items.text(source) or "").partition(":")[2].strip() or None
        out.append(MetricSample(hc.host, f"nvswitch:{address}", "nvswitch.present", 1, "flag", source, note=bios))
    state_text = items.text("cmd:fabric-manager")
    state = parse_fabric_manager_state(state_text) if state_text else FabricManagerState()
    if state.active is not None:  # no systemctl (a container, a minimal VM): the state is unknown, not "down"
        out.append(MetricSample(hc.host, "fabric-manager", "fabric_manager.state", None, "state",
                                "cmd:fabric-manager", note=state.active))  # fmt: skip
    if state.version:
        out.append(MetricSample(hc.host, "fabric-manager", "fabric_manager.version", None, "version",
                                "cmd:fabric-manager", note=state.version))  # fmt: skip
    log_text = items.text("cmd:fabric-manager-log")
    if log_text:
        log = parse_daemon_log(log_text)
        out.append(MetricSample(hc.host, "fabric-manager", "fabric_manager.log_errors", log.levels.get("ERROR", 0),
                                "entries", "cmd:fabric-manager-log"))  # fmt: skip
        per_switch: dict[tuple[str, str], int] = defaultdict(int)
        for event in log.events:
            if event.kind == "nvswitch-error" and event.nvswitch:
                per_switch[(event.nvswitch, "fatal" if event.fatal else "nonfatal")] += 1
        for (switch, fatality), count in sorted(per_switch.items()):
            out.append(MetricSample(hc.host, f"nvswitch:{switch}", f"nvswitch.fm_{fatality}_errors", count,
                                    "entries", "cmd:fabric-manager-log"))  # fmt: skip
    imex_text = items.text("cmd:imex-status")
    if imex_text and imex_text.strip():
        imex = parse_imex_status(imex_text)
        for metric, value, unit, note in (
            ("imex.domain_state", None, "state", imex.domain_state or (imex.errors[0] if imex.errors else None)),
            ("imex.nodes", len(imex.nodes), "nodes", None),
            ("imex.nodes_ready", len(imex.nodes) - len(imex.not_ready), "nodes", None),
            ("imex.connections_broken", len(imex.broken_connections), "connections", None),
        ):  # fmt: skip
            out.append(MetricSample(hc.host, "imex", metric, value, unit, "cmd:imex-status", note=note))
    health_text = items.text("cmd:dcgm-health")
    if health_text and health_text.strip():
        health = parse_dcgmi_health(health_text)
        out.append(MetricSample(hc.host, "host", "dcgm.health", None, "state", "cmd:dcgm-health", note=health.overall))
        for entity, word in sorted(health.entities.items()):
            kind, _, number = entity.partition(" ")
            comp = f"gpu:{number}" if kind == "GPU" else f"nvswitch:{number}"
            out.append(MetricSample(hc.host, comp, "dcgm.health", None, "state", "cmd:dcgm-health", note=word))
    return out


def gpu_samples(hc: HostCapture) -> list[MetricSample]:
    """Every GPU-fabric metric captured for the host. NVLink error counters carry delta/rate/note like netdev
    counters; states carry value None (or a 0/1 flag) and the state word in note."""
    items = HostItems(hc)
    report, source = nvidia_smi_report(items)
    out = _gpu_samples(hc, report, source) if report and source else []
    out += _nvlink_samples(hc, items) + _daemon_samples(hc, items)
    if not out:  # a host without GPUs: the rules need not look again (_group_mine)
        hc.cache[_NO_GPU_SAMPLES] = len(hc.items)
    return out


_NO_GPU_SAMPLES = "gpu_samples_none"  # host cache key: gpu_samples found nothing for this many items


samples = gpu_samples


# ---------------------------------------------------------------------------------------------- rules


def _mine(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    """component -> metric -> sample, from the samples given (or computed here when none are GPU samples)."""
    return per_samples(hc, "gpu_components", samples, lambda: _group_mine(hc, samples))


_FAMILIES = ("gpu:", "nvlink:", "nvswitch:", "fabric-manager", "imex")


def _group_mine(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    """By component family (shared with the other domains), not one test per sample of the host: a host has
    thousands of samples and a few hundred of them are GPU samples. Only this module names dcgm. and imex.
    metrics, on its own families and on `host` (the host-wide DCGM verdict)."""
    families = by_family(hc, samples)
    ours = [s for family in _FAMILIES for s in families.get(family, ())]
    ours += [s for s in families.get("host", ()) if s.metric.startswith(("dcgm.", "imex."))]
    grouped: dict[str, dict[str, MetricSample]] = defaultdict(dict)
    if not ours and hc.cache.get(_NO_GPU_SAMPLES) == len(hc.items):
        return {}
    for sample in ours or gpu_samples(hc):
        grouped[sample.component][sample.metric] = sample
    return dict(grouped)


@functools.lru_cache(maxsize=4096)
def _key(component: str) -> tuple:
    """Numeric order for gpu:10 after gpu:9 and nvlink:2/10 after nvlink:2/9 (parts never compare int to str)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in component.replace("/", ":").split(":"))


@functools.lru_cache(maxsize=256)
def _ordered(components: tuple[str, ...], prefix: str | None) -> tuple[str, ...]:
    """The components with the prefix (every one but `host` when None) in _key order, once per layout of a host's
    components: the rules of a fleet's hosts sort the same names again and again."""
    if prefix is None:
        return tuple(sorted((c for c in components if c != "host"), key=_key))
    return tuple(sorted((c for c in components if c.startswith(prefix)), key=_key))


def _interval(hc: HostCapture) -> str:
    return f"in {hc.interval_s:g} s" if hc.interval_s else "between snapshots"


def nvlink_inactive(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """An NVLink that is inactive while the GPU's other links are up; a GPU whose links are all down while
    other GPUs' links are up."""
    grouped = _mine(hc, samples)
    links: dict[str, dict[int, MetricSample]] = defaultdict(dict)
    for comp, metrics in grouped.items():
        if comp.startswith("nvlink:") and "nvlink.link_state" in metrics:
            gpu, link = comp[7:].split("/")
            links[gpu][int(link)] = metrics["nvlink.link_state"]
    counts = {c[4:]: m["nvlink.links_active"] for c, m in grouped.items() if "nvlink.links_active" in m}
    host_has_nvlink = any(s.value for s in counts.values())
    findings = []
    for gpu in sorted(set(links) | set(counts), key=int):
        states = links.get(gpu, {})
        down = sorted(n for n, s in states.items() if s.note == "inactive")
        up = [s for s in states.values() if s.note == "active"]
        if down and up:
            speed = grouped.get(f"nvlink:{gpu}/{next(n for n, s in states.items() if s.note == 'active')}", {})
            rate = speed.get("nvlink.link_speed_gbps")
            for link in down:
                summary = (f"GPU {gpu} NVLink {link} inactive while {len(up)} of {len(states)} links are active"
                           + (f" at {rate.value:g} GB/s" if rate else ""))  # fmt: skip
                evidence = [Evidence("nvlink.link_state", "inactive", "state", "active", NVLINK_STATUS, 0),
                            Evidence("nvlink.links_active", len(up), "links", len(states), NVLINK_STATUS, 0)]
                findings.append(Finding("nvlink-inactive", Severity.MAJOR, hc.host, f"nvlink:{gpu}/{link}",
                                        summary, evidence, 0.9))  # fmt: skip
        elif host_has_nvlink and gpu in counts and not counts[gpu].value:
            total = len(states) or None
            why = counts[gpu].note or f"{total} links inactive"
            summary = f"GPU {gpu}: no active NVLink ({why}) while other GPUs' links are up"
            evidence = [Evidence("nvlink.links_active", 0, "links", total, NVLINK_STATUS, 0)]
            findings.append(Finding("nvlink-inactive", Severity.MAJOR, hc.host, f"gpu:{gpu}", summary, evidence, 0.9))
    return findings


_LINK_ERRORS = ("nvlink.replay_errors", "nvlink.recovery_errors", "nvlink.crc_flit_errors", "nvlink.crc_data_errors",
                "nvlink.ecc_data_errors")  # fmt: skip


def nvlink_errors(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """NVLink error counters (nvidia-smi nvlink -e) that increased during the interval; one finding per link.
    Major when replays or recoveries grew (the link retransmits or retrains), minor for CRC counts alone."""
    findings = []
    grouped = _mine(hc, samples)
    for comp in _ordered(tuple(grouped), "nvlink:"):
        metrics = grouped[comp]
        grown = [s for m in _LINK_ERRORS if (s := metrics.get(m)) is not None and (s.delta or 0) > 0]
        if not grown:
            continue
        names = {s.metric for s in grown}
        severity = Severity.MAJOR if names & {"nvlink.replay_errors", "nvlink.recovery_errors"} else Severity.MINOR
        gpu, link = comp[7:].split("/")
        parts = ", ".join(f"{s.metric} +{s.delta:g}" + (f" ({s.rate:.3g}/s)" if s.rate is not None else "")
                          for s in grown)  # fmt: skip
        summary = f"GPU {gpu} NVLink {link}: {parts} {_interval(hc)}"
        evidence = [Evidence(f"{s.metric}.delta", s.delta, "errors", 0, s.source, 1) for s in grown]
        confidence = 0.8 if any(s.note == "wrap" for s in grown) else 0.95
        findings.append(Finding("nvlink-errors", severity, hc.host, comp, summary, evidence, confidence))
    return findings


def gpu_fabric_unhealthy(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """A GPU with a Fabric section whose registration is not Completed/Success (critical: the GPU cannot use
    NVLink through the switches), or whose fabric health reports a problem (major)."""
    findings = []
    grouped = _mine(hc, samples)
    for comp in _ordered(tuple(grouped), "gpu:"):
        metrics = grouped[comp]
        state, status = metrics.get("fabric.state"), metrics.get("fabric.status")
        if state is None and status is None:
            continue
        bad = [s for s, key in ((state, "state"), (status, "status"))
               if s is not None and s.note is not None and s.note != _FABRIC_OK[key]]  # fmt: skip
        if state is not None and state.note != "Completed" and status not in bad:
            bad = [state]  # status means nothing until registration completes
        health = [s for m, s in sorted(metrics.items())
                  if m.startswith("fabric.health.") and (s.note or "").lower() not in _HEALTH_OK]  # fmt: skip
        if not bad and not health:
            continue
        severity = Severity.CRITICAL if bad else Severity.MAJOR
        described = ", ".join(f"{s.metric.removeprefix('fabric.')} {s.note}" for s in bad + health)
        evidence = [Evidence(s.metric, s.note, "state", _FABRIC_OK.get(s.metric[7:]), s.source, 0) for s in bad]
        evidence += [Evidence(s.metric, s.note, "state", None, s.source, 0) for s in health]
        summary = f"GPU {comp[4:]}: fabric {described}"
        findings.append(Finding("gpu-fabric-unhealthy", severity, hc.host, comp, summary, evidence, 0.9))
    return findings


def fabric_manager_down(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """NVSwitches are present (the driver registered them) but nvidia-fabricmanager is not active."""
    grouped = _mine(hc, samples)
    state = grouped.get("fabric-manager", {}).get("fabric_manager.state")
    if state is None or state.note in (None, "active"):  # the usual case, told before looking at the switches
        return []
    switches = sorted(c for c, m in grouped.items() if c.startswith("nvswitch:") and "nvswitch.present" in m)
    if not switches:
        return []
    evidence = [Evidence("fabric_manager.state", state.note, "state", "active", state.source, 0),
                Evidence("nvswitch.count", len(switches), "devices", None, NVSWITCH_PROCFS, 0)]
    summary = f"nvidia-fabricmanager is {state.note} on a host with {len(switches)} NVSwitches"
    return [Finding("fabric-manager-down", Severity.CRITICAL, hc.host, "fabric-manager", summary, evidence, 0.9)]


_FM_ERRORS = ("nvswitch.fm_fatal_errors", "nvswitch.fm_nonfatal_errors")


def nvswitch_fm_errors(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """NVSwitch errors the Fabric Manager logged, per switch: major when one was fatal, else minor. The log
    tail reaches back weeks, hence the low confidence; the kernel's SXid lines carry the same codes."""
    findings = []
    grouped = _mine(hc, samples)
    for comp in sorted(c for c, m in grouped.items() if _FM_ERRORS[0] in m or _FM_ERRORS[1] in m):
        metrics = grouped[comp]
        counts = [metrics[m] for m in _FM_ERRORS if m in metrics]
        fatal = any(s.metric == "nvswitch.fm_fatal_errors" for s in counts)
        listed = ", ".join(f"{s.value:g} {s.metric.split('_')[1]}" for s in counts)
        summary = f"NVSwitch {comp[9:]}: Fabric Manager log has {listed} NVSwitch error entries"
        evidence = [Evidence(s.metric, s.value, "entries", 0, s.source, 0) for s in counts]
        findings.append(Finding("nvswitch-fm-errors", Severity.MAJOR if fatal else Severity.MINOR, hc.host, comp,
                                summary, evidence, 0.6))  # fmt: skip
    return findings


def imex_unhealthy(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """nvidia-imex-ctl -N answered but the domain is not UP, a node is not READY or a connection is not C."""
    metrics = _mine(hc, samples).get("imex", {})
    domain = metrics.get("imex.domain_state")
    if domain is None:
        return []
    nodes, ready, broken = (metrics.get(m) for m in ("imex.nodes", "imex.nodes_ready", "imex.connections_broken"))
    problems = []
    if domain.note != "UP":
        problems.append(f"domain {domain.note or 'state unknown'}")
    if nodes and ready and ready.value is not None and nodes.value is not None and ready.value < nodes.value:
        problems.append(f"{nodes.value - ready.value:g} of {nodes.value:g} nodes not READY")
    if broken and broken.value:
        problems.append(f"{broken.value:g} connections not C (connected)")
    if not problems:
        return []
    evidence = [Evidence("imex.domain_state", domain.note, "state", "UP", domain.source, 0)]
    evidence += [Evidence(s.metric, s.value, s.unit, nodes.value if s is ready else 0, s.source, 0)
                 for s in (ready, broken) if s is not None and nodes is not None]  # fmt: skip
    confidence = 0.9 if nodes and nodes.value else 0.7  # no node list: the daemon may simply not be set up
    summary = "IMEX: " + ", ".join(problems)
    return [Finding("imex-unhealthy", Severity.MAJOR, hc.host, "imex", summary, evidence, confidence)]


def gpu_pcie_downgraded(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """A GPU whose PCIe link trained narrower than its maximum, or at a lower generation while busy (P0):
    idle GPUs lower their link speed on purpose, so a lower generation outside P0 is not reported."""
    findings = []
    grouped = _mine(hc, samples)
    for comp in _ordered(tuple(grouped), "gpu:"):
        m = grouped[comp]
        evidence, parts, confidence = [], [], 0.9
        for cur, top, unit, label in (("pcie.link_width", "pcie.link_width_max", "lanes", "x"),
                                      ("pcie.link_gen", "pcie.link_gen_max", "gen", "Gen")):  # fmt: skip
            now, best = m.get(cur), m.get(top)
            if not now or not best or now.value is None or best.value is None or now.value >= best.value:
                continue
            if cur == "pcie.link_gen":
                pstate = m.get("gpu.performance_state")
                if pstate is None or pstate.note != "P0":
                    continue
                confidence = 0.9 if parts else 0.6  # a busy GPU can still be between power states
            parts.append(f"{label}{now.value:g} of {label}{best.value:g}")
            evidence.append(Evidence(cur, now.value, unit, best.value, now.source, 0))
        if parts:
            summary = f"GPU {comp[4:]}: PCIe link {', '.join(parts)}"
            findings.append(Finding("gpu-pcie-downgraded", Severity.MAJOR, hc.host, comp, summary, evidence,
                                    confidence))  # fmt: skip
    return findings


def gpu_memory_remap(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Row remapping or page retirement pending (minor: a GPU reset applies it) or a remap failure (major: the
    GPU has run out of spare rows)."""
    findings = []
    grouped = _mine(hc, samples)
    for comp in _ordered(tuple(grouped), "gpu:"):
        m = grouped[comp]
        flagged = [m[k] for k in ("gpu.remapped_rows_failure", "gpu.remapped_rows_pending", "gpu.retired_pages_pending")
                   if k in m and m[k].value]  # fmt: skip
        if not flagged:
            continue
        failure = flagged[0].metric == "gpu.remapped_rows_failure"
        evidence = [Evidence(s.metric, s.value, "flag", 0, s.source, 0) for s in flagged]
        unc = m.get("gpu.remapped_rows_uncorrectable")
        if unc is not None and unc.value is not None:
            evidence.append(Evidence(unc.metric, unc.value, "rows", None, unc.source, 0))
        words = ", ".join(s.metric.removeprefix("gpu.").replace("_", " ") for s in flagged)
        summary = f"GPU {comp[4:]}: {words}" + (f" ({unc.value:g} uncorrectable)" if unc and unc.value else "")
        findings.append(Finding("gpu-memory-remap", Severity.MAJOR if failure else Severity.MINOR, hc.host, comp,
                                summary, evidence, 0.9))  # fmt: skip
    return findings


def dcgm_health(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """DCGM health watches (dcgmi health -c) report Warning (minor) or Failure (major) for a GPU or switch;
    the host-wide verdict is reported only when no single GPU or switch is named."""
    findings = []
    grouped = _mine(hc, samples)
    named = [c for c in _ordered(tuple(grouped), None) if "dcgm.health" in grouped[c]]
    for comp in [*named, "host"]:
        sample = grouped.get(comp, {}).get("dcgm.health")
        if sample is None or sample.note in (None, "Healthy") or (comp == "host" and findings):
            continue
        severity = Severity.MAJOR if sample.note in ("Failure", "Failed") else Severity.MINOR
        evidence = [Evidence("dcgm.health", sample.note, "state", "Healthy", sample.source, 0)]
        findings.append(Finding("dcgm-health", severity, hc.host, comp, f"{comp}: DCGM health {sample.note}",
                                evidence, 0.8))  # fmt: skip
    return findings


RULES = [nvlink_inactive, nvlink_errors, gpu_fabric_unhealthy, fabric_manager_down, nvswitch_fm_errors,
         imex_unhealthy, gpu_pcie_downgraded, gpu_memory_remap, dcgm_health]  # fmt: skip
