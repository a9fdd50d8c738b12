"""The pure part of the GCP provider: host -> instance, Instance -> Placement, findings -> fault report, case
states, subjects and comment chunks."""

from __future__ import annotations

import pytest

from fabricase.models import EscalationState, Finding, Placement, Severity
from fabricase.providers.base import case_marker
from fabricase.providers.gcp_support import (
    CASE_STATES,
    case_state,
    case_subject,
    choose_classification,
    comment_chunks,
    comments_from,
)
from fabricase.providers.gcp_topology import (
    HOST_BEHAVIORS,
    SUBBLOCK_BEHAVIORS,
    fault_report,
    instance_ref,
    placement_from_instance,
    reservation_parts,
)


@pytest.mark.parametrize("hostname, profile, expected", [
    ("a3u-node-0.us-central1-b.c.my-proj.internal", {}, ("a3u-node-0", "us-central1-b", "my-proj")),
    ("a3u-node-0.c.my-proj.internal", {}, ("a3u-node-0", None, "my-proj")),
    ("a3u-node-0", {"zone": "europe-west4-a", "project": "p"}, ("a3u-node-0", "europe-west4-a", "p")),
    ("A3U-Node-0.us-central1-b.c.my-proj.internal", {"zone": "z-1-a"}, ("a3u-node-0", "z-1-a", "my-proj")),
    ("gpu001.cluster.example.com", {}, ("gpu001", None, None)),
])
def test_the_instance_comes_from_the_hostname_and_the_profile(hostname, profile, expected):
    ref = instance_ref({"host": "h", "identity": {"hostname": hostname}}, profile)
    assert (ref.name, ref.zone, ref.project) == expected and ref.host == "h"


def test_an_unreachable_host_is_looked_up_by_its_target_name():
    ref = instance_ref({"host": "a3u-node-7", "identity": {}}, {})
    assert (ref.name, ref.zone, ref.project) == ("a3u-node-7", None, None)


def _instance(**status):
    return {
        "id": "4617034821737419823", "name": "a3u-node-0", "status": "RUNNING",
        "zone": "https://www.googleapis.com/compute/v1/projects/p1/zones/us-central1-b",
        "machine_type": "https://www.googleapis.com/compute/v1/projects/p1/zones/us-central1-b/machineTypes/a3-ultragpu-8g",
        "resource_policies": ["https://www.googleapis.com/compute/v1/projects/p1/regions/us-central1/resourcePolicies/wp"],
        "resource_status": status,
    }


def test_placement_names_cluster_block_and_subblock_outermost_first():
    p = placement_from_instance("gpu1", _instance(
        physical_host="/blk/sb/host9",
        physical_host_topology={"cluster": "c1", "block": "blk", "subblock": "sb", "host": "host9",
                                "additional_attributes": {"accelerator_topology_ids": {"2x4": "t-7"}}},
        reservation_consumption_info={"consumed_reservation_sub_block":
                                      "projects/p2/zones/us-central1-b/reservations/r1/reservationBlocks/blk"
                                      "/reservationSubBlocks/sb"}), project="p1")
    assert p.topology == ["cluster:c1", "block:blk", "subblock:sb"]
    assert (p.instance_id, p.instance_type, p.zone, p.region, p.placement_group) == (
        "4617034821737419823", "a3-ultragpu-8g", "us-central1-b", "us-central1", "wp")
    assert p.extra["host"] == "host9" and p.extra["instance_name"] == "a3u-node-0"
    assert p.extra["reservation_sub_block"] == "sb" and p.extra["reservation_project"] == "p2"
    assert p.extra["accelerator_topology_ids"] == {"2x4": "t-7"}


def test_physical_host_alone_is_block_subblock_host():
    p = placement_from_instance("gpu1", _instance(physical_host="/b7/s3/h1"), project="p1")
    assert p.topology == ["block:b7", "subblock:s3"] and p.extra["host"] == "h1"
    bare = placement_from_instance("gpu1", _instance(), project="p1")
    assert bare.topology == [] and "host" not in bare.extra


@pytest.mark.parametrize("name, parts", [
    ("projects/p/zones/z/reservations/r", {"project": "p", "zone": "z", "reservation": "r"}),
    ("reservations/r/reservationBlocks/b", {"reservation": "r", "block": "b"}),
    ("https://x/projects/p/zones/z/reservations/r/reservationBlocks/b/reservationSubBlocks/s",
     {"project": "p", "zone": "z", "reservation": "r", "block": "b", "sub_block": "s"}),
    ("projects/p/zones/z/instances/i", None),
    ("", None),
])
def test_reservation_names(name, parts):
    assert reservation_parts(name) == parts


def _finding(kind, component, host="gpu1", severity=Severity.MAJOR):
    return Finding(kind=kind, severity=severity, host=host, component=component, summary=f"{kind} on {component}")


def _placement(machine="a3-ultragpu-8g", sub_block="sb"):
    extra = {"instance_name": "n", "project": "p"} | ({"reservation_sub_block": sub_block} if sub_block else {})
    return Placement(host="gpu1", provider="gcp", instance_type=machine, zone="z",
                     topology=["cluster:c", "block:b", "subblock:sb"], extra=extra)


def test_host_faults_map_to_the_documented_behaviors():
    report = fault_report(_placement(), [
        _finding("nvidia-xid", "gpu:3", severity=Severity.CRITICAL), _finding("gpu-memory-remap", "gpu:1"),
        _finding("rdma-symbol-errors", "rdma:mlx5_3/1"), _finding("nvlink-errors", "nvlink:0/1"),
        _finding("rdma-symbol-errors", "rdma:mlx5_0/1", host="gpu2"),  # another host's: not in this report
    ])
    assert report.channel == "host" and report.failure_component is None
    behaviors = dict(report.reasons)
    assert list(behaviors) == ["UNRECOVERABLE_GPU_ERROR", "CHIP_ERROR", "PERFORMANCE"]
    assert set(behaviors) <= set(HOST_BEHAVIORS)
    assert "rdma:mlx5_3/1" in behaviors["PERFORMANCE"] and "mlx5_0" not in behaviors["PERFORMANCE"]


def test_nvswitch_faults_of_a_rack_scale_machine_go_to_the_sub_block():
    sxid = _finding("nvswitch-sxid", "nvswitch:0000:05:00.0")
    report = fault_report(_placement(machine="a4x-highgpu-4g"), [sxid])
    assert report.channel == "sub-block" and report.failure_component == "NVLINK_SWITCH"
    assert report.reasons[0][0] == "NVSWITCH_FAULT_SWITCH_ERROR" and report.reasons[0][0] in SUBBLOCK_BEHAVIORS
    # An HGX host's NVSwitches are inside it: the host is reported.
    assert fault_report(_placement(), [sxid]).channel == "host"
    # Without a reservation sub-block there is no sub-block to report.
    assert fault_report(_placement(machine="a4x-highgpu-4g", sub_block=None), [sxid]).channel == "host"


def test_a_fault_shared_by_the_sub_block_reports_multiple_faulty_hosts():
    shared = _finding("shared-component-fault", "subblock:sb", host=None)
    report = fault_report(_placement(), [shared])
    assert (report.channel, report.failure_component) == ("sub-block", "MULTIPLE_FAULTY_HOSTS")
    assert fault_report(_placement(), [_finding("link-flap", "netdev:eth0", host="gpu9")]) is None


def test_a_long_reason_is_cut_to_one_bounded_description():
    many = [_finding("rdma-symbol-errors", f"rdma:mlx5_{i}/1") for i in range(100)]
    (behavior, description), = fault_report(_placement(), many).reasons
    assert behavior == "PERFORMANCE" and len(description) == 1000 and description.endswith("...")


def test_every_case_state_maps_and_unknown_is_still_open():
    assert {s: case_state(s) for s in CASE_STATES} == {
        "STATE_UNSPECIFIED": EscalationState.FILED, "NEW": EscalationState.FILED,
        "IN_PROGRESS_GOOGLE_SUPPORT": EscalationState.WAITING_PROVIDER,
        "ACTION_REQUIRED": EscalationState.WAITING_US, "SOLUTION_PROVIDED": EscalationState.RESOLVED,
        "CLOSED": EscalationState.CLOSED}
    assert case_state("SOMETHING_NEW").is_open and case_state(None) == EscalationState.FILED


def test_the_subject_leads_with_the_marker():
    marker = case_marker("FC-12")
    assert case_subject(marker, "[fabricase] symbol errors on 1 host") == "[fabricase FC-12] symbol errors on 1 host"
    assert case_subject(marker, "NCCL slow\n on 8 hosts") == "[fabricase FC-12] NCCL slow on 8 hosts"


def test_a_long_comment_is_split_in_order_and_nothing_is_lost():
    text = "".join(f"line {i:05d} " + "x" * 60 + "\n" for i in range(600))
    chunks = comment_chunks(text, limit=12_800)
    assert len(chunks) == 4 and all(len(c) <= 12_800 for c in chunks)
    assert chunks[0].startswith("(1/4)\n") and chunks[-1].startswith("(4/4)\n")
    assert "".join(c.split("\n", 1)[1] for c in chunks) == text
    assert comment_chunks("short") == ["short"]


def test_comments_oldest_first_and_who_wrote_them():
    got = comments_from([
        {"create_time": "2026-12-01T10:00:00Z", "body": "b", "creator": {"display_name": "G", "google_support": True}},
        {"create_time": "2026-12-01T09:00:00Z", "body": "a", "creator": {"display_name": "us"}},
    ])
    assert [(c.body, c.from_provider) for c in got] == [("a", False), ("b", True)]


def test_a_gpu_classification_is_preferred():
    found = [{"id": "1", "display_name": "Compute Engine > Instances"}, {"id": "2", "display_name": "Compute > GPU"}]
    assert choose_classification(found)["id"] == "2"
    assert choose_classification(found[:1])["id"] == "1" and choose_classification([]) is None
