"""A 16-host capture for the faulty-host tests, for each cloud: DMI that names the cloud, one RDMA port and a
kernel log per host, the provider's placements stored with it, and faults on exactly three hosts:

- SYMBOL: 40 symbol errors on mlx5_0 in the interval (bad link);
- XID79: Xid 79 (GPU fallen off the bus) in the kernel log, at XID_AT;
- FLAP: link_downed +2 in the interval (link flapping).

Every other host is healthy. The escalation is recorded in the tracker with the capture as its bundle."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from fabricase.capturedir import host_capture_from_stream, write_capture_meta, write_host, write_placements
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus, Placement

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402  (its capture-stream writer)

HOSTS = [f"gpu{i:04d}" for i in range(1, 17)]
SYMBOL, XID79, FLAP = "gpu0003", "gpu0007", "gpu0012"
FAULTY = {SYMBOL, XID79, FLAP}
XID_AT = datetime(2026, 11, 29, 23, 59, 58, 1, tzinfo=UTC)
SNAPSHOT_0 = datetime.fromtimestamp(1.8e9, UTC)  # fleetgen's first snapshot (host wall clock)
GCP_PROJECT, GCP_ZONE = "fc-test-project", "us-central1-b"
AZURE_SUB = "00000000-0000-4000-8000-00000000fc01"

_DMI = {
    "aws": {"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge"},
    "gcp": {"sys_vendor": "Google", "product_name": "Google Compute Engine", "bios_vendor": "Google"},
    "azure": {"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"},
}


def instance_id(cloud: str, host: str) -> str:
    k = HOSTS.index(host) + 1
    if cloud == "aws":
        return f"i-{k:017x}"
    if cloud == "gcp":
        return str(4617034821737419000 + k)
    return f"/subscriptions/{AZURE_SUB}/resourceGroups/rg-train/providers/Microsoft.Compute/virtualMachines/{host}"


def placement(cloud: str, host: str) -> Placement:
    """What locate stores for the host on each cloud (the fields each faulty-host channel reads)."""
    iid = instance_id(cloud, host)
    if cloud == "aws":
        return Placement(host=host, provider="aws", instance_id=iid, instance_type="p5.48xlarge",
                         region="us-east-1", zone="us-east-1a", source="provider:aws")
    if cloud == "gcp":
        return Placement(host=host, provider="gcp", instance_id=iid, instance_type="a3-ultragpu-8g",
                         region="us-central1", zone=GCP_ZONE, source="provider:gcp",
                         extra={"project": GCP_PROJECT, "instance_name": host})
    return Placement(host=host, provider="azure", instance_id=iid, instance_type="Standard_ND96isr_H100_v5",
                     region="eastus2", zone="2", source="provider:azure",
                     extra={"physical_host_name": f"GGBB{HOSTS.index(host):03d}"})


def _identity_items(cloud: str, host: str) -> bytes:
    files = {f"/sys/class/dmi/id/{k}": v for k, v in _DMI[cloud].items()}
    if cloud == "aws":
        files["/sys/class/dmi/id/board_asset_tag"] = instance_id(cloud, host)
    files["/proc/sys/kernel/hostname"] = host
    out = []
    for source, text in files.items():
        data = (text + "\n").encode()
        out.append(f"@@FC1 I identity file 0 0 {len(data)} 0 - - {source}\n".encode() + data + b"\n")
    return b"".join(out)


def write_fleet(root: Path, cloud: str) -> Path:
    """The 16-host capture of `cloud` at root, with its placements.json."""
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "identity", "kernel_log"])),
                       interval_s=fleetgen.INTERVAL_S)
    root.mkdir(parents=True)
    write_capture_meta(root, plan=plan, targets={"nodeset": "gpu[0001-0016]"}, hosts=HOSTS,
                       created_at="2026-11-30T00:00:00Z")
    for host in HOSTS:
        counters = {name: (10, 10) for name in (*fleetgen.COUNTERS, *fleetgen.HW)}
        counters["port_rcv_data"] = counters["port_xmit_data"] = (10**9, 2 * 10**9)
        if host == SYMBOL:
            counters["symbol_error"] = (10, 50)
        if host == FLAP:
            counters["link_downed"] = (1, 3)
        log = "2026-11-29T00:00:00.000001+0000 host kernel: Linux version 6.8.0-45-generic\n"
        if host == XID79:
            log += (f"{XID_AT:%Y-%m-%dT%H:%M:%S}.000001+0000 host kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, "
                    "name=python, GPU has fallen off the bus.\n")
        raw = fleetgen._stream([{"dev": "mlx5_0", "counters": counters, "rate": "400 Gb/sec (4X NDR)"}], None, log)
        raw = raw.replace(b"@@FC1 END\n", _identity_items(cloud, host) + b"@@FC1 END\n")
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "test"
        write_host(root, hc, raw)
    write_placements(root, [placement(cloud, h) for h in HOSTS])
    return root


def record_escalation(paths, cloud: str, capture: Path, case_id: str = "case-4711") -> str:
    """An escalation of `cloud` filed as `case_id`, whose bundle is the capture; its id."""
    from fabricase.tracker.store import Tracker

    with Tracker.open(paths) as tracker:
        esc = tracker.create(provider=cloud, title="link errors", symptom="allreduce slow", severity="major",
                             hosts=sorted(FAULTY), components=[])
        tracker.mark_filed(esc.id, provider_case_id=case_id, raw_status="opened", state="filed",
                           ticket_path=None, bundle_id=None, bundle_path=capture)
        return esc.id


def host_report(placement: Placement, findings: list, *, case: str | None = "case-4711", escalation: str = "FC-1",
                provider: str | None = None, start: datetime = XID_AT):
    """A HostReport for one host as plan_reports makes it, with one provider-owned suspect per finding (the
    unit tests of each provider's channel)."""
    from fabricase.diagnosis import Diagnosis, Suspect, finding_ids
    from fabricase.faulty import Intent, plan_reports

    suspects = [Suspect(id=f"S{k}", host=f.host, unit="nic-port", components=[f.component], verdict="bad-link",
                        verdict_text="bad link", severity=f.severity, confidence=0.9, q_value=None, owner="provider",
                        action="fix it", evidence=[], identity={}, findings=[fid], key_number=f.summary)
                for k, (f, fid) in enumerate(zip(findings, finding_ids(findings), strict=True))]
    (report,) = plan_reports(Diagnosis(suspects, [], []), [placement], Intent(escalation, case),
                             provider=provider or placement.provider, findings=findings,
                             first_errors={placement.host: start}, captured_at=start,
                             hosts=[placement.host])
    return report
