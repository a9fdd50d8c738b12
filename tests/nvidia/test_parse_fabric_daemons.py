"""Fabric Manager log and state, IMEX status, dcgmi tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricase.parsers.dcgm import parse_dcgmi_diag, parse_dcgmi_discovery, parse_dcgmi_health
from fabricase.parsers.fabric_manager import parse_fabric_manager_log, parse_fabric_manager_state
from fabricase.parsers.imex import parse_imex_status

REAL = Path(__file__).parents[1] / "fixtures/real"
FM = REAL / "leptonai-gpud/fabric-manager"


def test_fabric_manager_log_hgx_with_nvswitch_errors():
    log = parse_fabric_manager_log((FM / "fabric-manager.0.log").read_text())
    assert log.total_lines == 499 and dict(log.levels) == {"INFO": 274, "ERROR": 18} and log.version == "535.161.08"
    errors = [e for e in log.events if e.kind == "nvswitch-error"]
    assert len(errors) == 18 and {e.code for e in errors} == {12028} and not any(e.fatal for e in errors)
    assert {e.nvswitch for e in errors} == {"0000:83:00.0", "0000:84:00.0", "0000:85:00.0", "0000:86:00.0"}
    assert (errors[0].physical_id, errors[0].port, errors[0].timestamp) == (0, 34, "Dec 19 2024 19:17:49")
    assert [e.kind for e in log.events].count("started") == 2


def test_fabric_manager_log_current_testdata():
    log = parse_fabric_manager_log((FM / "fabricmanager.log").read_text())
    assert (log.total_lines, dict(log.levels), len(log.events)) == (101, {"INFO": 53, "ERROR": 1}, 1)
    (event,) = log.events
    assert (event.nvswitch, event.physical_id, event.port, event.code) == ("0000:86:00.0", 3, 61, 12028)


def test_fabric_manager_unit_test_lines():
    log = parse_fabric_manager_log((FM / "fm-log-lines_from-unit-tests.txt").read_text())
    assert [e.kind for e in log.events] == ["multicast-failure", "driver-error", "nvswitch-error", "nvswitch-error",
                                            "topology-mismatch", "multicast-failure"]  # fmt: skip
    fatal = log.events[3]
    assert (fatal.code, fatal.fatal, fatal.port) == (20034, True, 33)
    assert log.levels["INFO"] == 1  # "multicast group 1 is allocated." is counted, not an event


def test_fabric_manager_state_sections():
    state = parse_fabric_manager_state("### systemctl is-active nvidia-fabricmanager\nactive\n"
                                       "### nv-fabricmanager --version\nFabric Manager version is : 535.161.08\n")
    assert (state.active, state.version, state.errors) == ("active", "535.161.08", [])
    down = parse_fabric_manager_state("### systemctl is-active nvidia-fabricmanager\nfailed\n")
    assert (down.active, down.version) == ("failed", None)
    odd = parse_fabric_manager_state("### systemctl is-active nvidia-fabricmanager\nSystem has not been booted "
                                     "with systemd as init system (PID 1). Can't operate.\n")  # fmt: skip
    assert odd.active is None and odd.errors[0].startswith("systemctl: System has not been booted")
    assert parse_fabric_manager_state("") == parse_fabric_manager_state(None)


# The documented `nvidia-imex-ctl -N` output (AWS ParallelCluster GB200 guide), three nodes, one down.
IMEX = """Connectivity Table Legend:
I - Invalid - Node wasn't reachable, no connection status available
N - Never Connected
R - Recovering - Connection was lost, but clean up has not yet been triggered.
D - Disconnected - Connection was lost, and clean up has been triggreed.
A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.
!V! - Version mismatch, communication disabled.
!M! - Node map mismatch, communication disabled.
C - Connected - Ready for operation

5/12/2025 06:08:10.580
Nodes:
Node #0   - 172.31.48.81    - READY                - Version: 570.172
Node #1   - 172.31.48.98    - READY                - Version: 570.172
Node #2   - 172.31.48.221   - UNAVAILABLE          - Version: 570.172

 Nodes From\\To  0   1   2
       0        C   C   N
       1        C   C   N
       2        I   I   I

Domain State: DEGRADED
"""


def test_imex_status():
    status = parse_imex_status(IMEX)
    assert status.errors == [] and [n.state for n in status.nodes] == ["READY", "READY", "UNAVAILABLE"]
    assert status.nodes[2].address == "172.31.48.221" and status.nodes[0].version == "570.172"
    assert status.domain_state == "DEGRADED" and [n.index for n in status.not_ready] == [2]
    assert len(status.connections) == 9 and status.broken_connections[(0, 2)] == "N"
    fixed = IMEX.replace("UNAVAILABLE", "READY").replace("N\n", "C\n").replace("I   I   I", "C   C   C")
    healthy = parse_imex_status(fixed.replace("DEGRADED", "UP"))
    assert healthy.not_ready == [] and healthy.broken_connections == {} and healthy.domain_state == "UP"
    down = parse_imex_status("IMEX daemon is not running\n")
    assert down.nodes == [] and down.errors == ["IMEX daemon is not running"]


def test_dcgmi_diag_excerpts():
    r2 = parse_dcgmi_diag((REAL / "ml-engineering-excerpts/dcgmi-diag-r2_faulty-gpu_excerpt.txt").read_text())
    assert [(r.test, r.result, r.gpus) for r in r2] == [("GPU Memory", "Pass", [1, 2, 3, 4, 5, 6, 7]),
                                                        ("GPU Memory", "Fail", [0]), ("GPU Memory", "Warning", [0])]
    assert r2[2].detail.startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds")
    (r3,) = parse_dcgmi_diag((REAL / "ml-engineering-excerpts/dcgmi-diag-r3_xid64_excerpt.txt").read_text())
    assert (r3.test, r3.result, r3.gpus) == ("Deployment", "Error", [3])
    assert r3.detail == "GPU 3 has uncorrectable memory errors and row remappings are pending"


def test_dcgmi_health_and_discovery():
    health = parse_dcgmi_health(
        "+---------------------------+------------------------------------------+\n"
        "| Health Monitor Report                                                |\n"
        "+===========================+==========================================+\n"
        "| Overall Health            | Warning                                  |\n"
        "| GPU                       |                                          |\n"
        "| -> 0                      | Warning                                  |\n"
        "|    -> Errors              |                                          |\n"
        "|       -> PCIe system      | Warning                                  |\n"
        "|                           | Detected more than 8 PCIe replays per mi |\n"
        "|                           | nute for GPU 0: 13                       |\n"
        "+---------------------------+------------------------------------------+\n")
    assert (health.overall, health.entities) == ("Warning", {"GPU 0": "Warning"})
    assert health.messages == ["GPU 0: PCIe system: Warning Detected more than 8 PCIe replays per minute for GPU 0: 13"]
    assert parse_dcgmi_health("| Group 1 | Overall Health: Healthy |\n").overall == "Healthy"
    found = parse_dcgmi_discovery(
        "2 GPUs found.\n+--------+------------------------------+\n| GPU ID | Device Information           |\n"
        "+--------+------------------------------+\n| 0      | Name: NVIDIA H100 80GB HBM3  |\n"
        "|        | PCI Bus ID: 00000000:18:00.0 |\n|        | Device UUID: GPU-abc         |\n"
        "| 1      | Name: NVIDIA H100 80GB HBM3  |\n+--------+------------------------------+\n"
        "4 NvSwitches found.\n+-----------+\n| Switch ID |\n+-----------+\n| 11        |\n| 8         |\n")
    assert found.gpus[0] == {"id": 0, "name": "NVIDIA H100 80GB HBM3", "bus_id": "0000:18:00.0", "uuid": "GPU-abc"}
    assert found.gpus[1]["bus_id"] is None and found.nvswitches == [11, 8] and found.errors == []
    assert parse_dcgmi_discovery("Error: unable to establish a connection to the specified host: localhost\n").errors


@pytest.mark.parametrize("msg", [
    "Fabric Manager version 535.104.05 is running with the following configuration options",
    "NVLink trunk link training failed on port 4", "access link 3 went down after fail-over",
    "GPU handles: failed to find the GPU handle 0x7 for multicast team 12", "NV_WARN_NOTHING_TO_DO",
    "GPUs don't match with any supported system topology", "Topology Mismatch on node", "plain info message",
    "access link ok", "failed to find the GPU handle " * 50, "training" + " x" * 500, "",
])
def test_the_union_prefilter_gives_each_message_the_kind_the_ordered_patterns_give(msg):
    from fabricase.parsers import fabric_manager as fm

    ordered = next((name for pattern, name in fm._KINDS if pattern.search(msg)), None)
    assert bool(fm._ANY_KIND.search(msg)) == (ordered is not None)
    event = fm._event("Jul 23 2024 07:53:55", "INFO", msg, 1)
    assert (event.kind if event else None) == ordered
