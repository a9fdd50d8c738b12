"""Acceptance: `fabricase open --replay <capture of GCE hosts> --provider gcp` against the local Compute Engine and
Cloud Support files one case whose body names the bad host's block and sub-block, with the bundle attached."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from gcp_fake import PROJECT, ZONE, instance, write_profile

from fabricase.capturedir import host_capture_from_stream, write_capture_meta, write_host
from fabricase.cli import cli
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))

import fleetgen  # noqa: E402  (its capture-stream writer)

HOSTS = [f"a3u-node-{i}" for i in range(8)]
BAD = "a3u-node-5"


def _identity_items(host: str) -> bytes:
    files = {
        "/sys/class/dmi/id/sys_vendor": "Google", "/sys/class/dmi/id/product_name": "Google Compute Engine",
        "/sys/class/dmi/id/bios_vendor": "Google", "/proc/sys/kernel/hostname": host,
    }
    out = []
    for source, text in files.items():
        data = (text + "\n").encode()
        out.append(f"@@FC1 I identity file 0 0 {len(data)} 0 - - {source}\n".encode() + data + b"\n")
    return b"".join(out)


def write_gce_capture(root: Path) -> Path:
    """Eight A3 Ultra VMs, two sub-blocks of one block; symbol errors on one RDMA port of BAD."""
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "identity"])), interval_s=fleetgen.INTERVAL_S)
    root.mkdir(parents=True)
    write_capture_meta(root, plan=plan, targets={"nodeset": "a3u-node-[0-7]"}, hosts=HOSTS,
                       created_at="2026-11-30T00:00:00Z")
    for host in HOSTS:
        counters = {name: (10, 10) for name in (*fleetgen.COUNTERS, *fleetgen.HW)}
        counters["port_rcv_data"] = counters["port_xmit_data"] = (10**9, 2 * 10**9)
        if host == BAD:
            counters["symbol_error"] = (10, 90)
        raw = fleetgen._stream([{"dev": "mlx5_0", "counters": counters, "rate": "400 Gb/sec (4X NDR)"}])
        raw = raw.replace(b"@@FC1 END\n", _identity_items(host) + b"@@FC1 END\n")
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "test"
        write_host(root, hc, raw)
    return root


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("FABRICASE_HOME", str(h))
    monkeypatch.delenv("FABRICASE_DEBUG", raising=False)
    monkeypatch.delenv("FABRICASE_DB", raising=False)
    return h


def _open(*args: str):
    result = CliRunner().invoke(cli, ["open", *args], catch_exceptions=False)
    return result


def test_open_replay_files_one_case_with_the_topology_and_the_bundle(home, google, adc, tmp_path):
    for i, host in enumerate(HOSTS):
        google.add(instance(host, block="blk-a", subblock="sb-1" if i < 4 else "sb-2", host=f"h{i:02d}"))
    write_profile(home, google.base, zone=ZONE)
    capture = write_gce_capture(tmp_path / "capture")
    result = _open("--replay", str(capture), "--symptom", "allreduce busbw fell from 360 to 210 GB/s",
                   "--provider", "gcp", "--json")
    assert result.exit_code == 0, result.output
    opened = json.loads(result.stdout)
    assert any(f["host"] == BAD and f["component"] == "rdma:mlx5_0/1" for f in opened["findings"])
    assert len(google.cases) == 1
    (name, case), = google.cases.items()
    assert opened["provider_case_id"] == name and opened["state"] == "filed"
    assert case["displayName"].startswith(opened["case_marker"])
    body = case["description"]
    row = next(line for line in body.splitlines() if BAD in line and "blk-a" in line)
    assert "sb-2" in row and "h05" in row  # block, sub-block and physical host of the bad VM
    assert f"Project: {PROJECT}" in body and f"Zone: {ZONE}" in body
    bundle = Path(opened["bundle_path"])
    assert google.uploads[(name, bundle.name)] == bundle.read_bytes()
    # Filing touched Compute Engine once per VM (the zone is configured), and nothing reached the metadata server.
    assert len(google.seen("GET", r"/zones/us-central1-b/instances/a3u-node-\d$")) == len(HOSTS)


def test_open_with_gcp_down_says_so_in_one_line_and_records_nothing_filed(home, google, adc, tmp_path):
    for host in HOSTS:
        google.add(instance(host))
    write_profile(home, google.base, zone=ZONE)
    google.fail("GET", r"/cases:search$", 403, "Cloud Support API has not been used in project", times=99)
    capture = write_gce_capture(tmp_path / "capture")
    result = _open("--replay", str(capture), "--symptom", "busbw fell", "--provider", "gcp")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "gcp: cloudsupport.cases.search: permission denied (403)" in result.stderr
    assert google.cases == {}
    listed = CliRunner().invoke(cli, ["list", "--json", "--state", "all"], catch_exceptions=False)
    tracked = json.loads(listed.stdout)
    assert len(tracked) == 1 and tracked[0]["state"] == "draft" and tracked[0]["provider_case_id"] is None
