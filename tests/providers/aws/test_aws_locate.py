"""Host -> EC2 instance -> placement and network topology: moto for DescribeInstances, Stubber for the topology and
Capacity Block status that moto lacks."""

from __future__ import annotations

import boto3
import pytest
from awsfakes import REGION

from fabricase.providers.aws_ec2 import instance_id_of, placement_of


def run_instances(moto: str, n: int, instance_type: str = "p5.48xlarge", zone: str = "us-east-1b") -> list[str]:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto)
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    reply = ec2.run_instances(ImageId=ami, MinCount=n, MaxCount=n, InstanceType=instance_type,
                              Placement={"AvailabilityZone": zone})
    return [i["InstanceId"] for i in reply["Instances"]]


def host(name: str, instance_id: str | None) -> dict:
    return {"host": name, "status": "ok", "reason": None,
            "identity": {"sys_vendor": "Amazon EC2", "board_asset_tag": instance_id}}


@pytest.mark.parametrize(("identity", "expected"), [
    ({"board_asset_tag": "i-0fab00000000c0de1"}, "i-0fab00000000c0de1"),
    ({"board_asset_tag": "i-0fab0001"}, "i-0fab0001"),  # the older 8-digit form
    ({"board_asset_tag": "To Be Filled By O.E.M."}, None),
    ({"board_asset_tag": "i-0FAB00000000C0DE1"}, None),  # ids are lower-case hex
    ({"board_asset_tag": "i-0fab00000000c0de"}, None),  # 16 digits: neither form
    ({"instance_id": "i-0123456789abcdef0", "board_asset_tag": "i-0fab0001"}, "i-0123456789abcdef0"),
    ({}, None),
    (None, None),
])
def test_instance_id_comes_from_the_identity(identity, expected):
    assert instance_id_of(identity) == expected


def test_hosts_map_to_instances_zones_and_three_network_nodes(provider, clients, moto):
    p5 = run_instances(moto, 2)
    t3 = run_instances(moto, 1, "t3.micro", "us-east-1a")
    unknown = "i-0aaaaaaaaaaaaaaa0"  # in no region moto knows
    found = sorted([*p5, *t3])
    clients.stub("ec2").add_response("describe_instance_topology", {"Instances": [
        {"InstanceId": p5[0], "InstanceType": "p5.48xlarge", "NetworkNodes": ["nn-top", "nn-mid", "nn-a"],
         "AvailabilityZone": "us-east-1b", "ZoneId": "use1-az2"},
        {"InstanceId": p5[1], "InstanceType": "p5.48xlarge", "NetworkNodes": ["nn-top", "nn-mid", "nn-b"],
         "AvailabilityZone": "us-east-1b", "ZoneId": "use1-az2"},
        # t3 is not a topology type: the API leaves it out
    ]}, {"InstanceIds": found})
    hosts = [host("gpu001", p5[0]), host("gpu002", p5[1]), host("cpu001", t3[0]), host("gone", unknown),
             host("bare", None)]
    placements = provider.locate(hosts)
    clients.assert_no_pending()
    by = {p.host: p for p in placements}
    assert [p.host for p in placements] == ["gpu001", "gpu002", "cpu001", "gone", "bare"]
    assert by["gpu001"].topology == ["network-node:nn-top", "network-node:nn-mid", "network-node:nn-a"]
    assert by["gpu002"].topology[-1] == "network-node:nn-b"
    assert (by["gpu001"].provider, by["gpu001"].instance_type, by["gpu001"].zone, by["gpu001"].region) == (
        "aws", "p5.48xlarge", "us-east-1b", REGION)
    assert by["gpu001"].extra["az_id"] == "use1-az2" and by["gpu001"].extra["state"] == "running"
    assert by["cpu001"].topology == [] and by["cpu001"].instance_type == "t3.micro"
    assert by["cpu001"].zone == "us-east-1a"
    assert by["gone"].instance_id == unknown and by["gone"].region is None and not by["gone"].topology
    assert by["bare"].instance_id is None and not by["bare"].extra


def test_four_layer_topology_and_placement_fields_from_the_records():
    inst = {"InstanceId": "i-0123456789abcdef0", "InstanceType": "p6-b200.48xlarge", "CapacityReservationId": "cr-1",
            "Placement": {"AvailabilityZone": "us-east-2a", "AvailabilityZoneId": "use2-az1", "GroupName": "pg-train",
                          "PartitionNumber": 3}, "State": {"Name": "running"},
            "NetworkInterfaces": [{"InterfaceType": t} for t in ("efa", "efa-only", "interface")]}
    topo = {"InstanceId": "i-0123456789abcdef0", "NetworkNodes": ["nn-1", "nn-2", "nn-3", "nn-4"],
            "CapacityBlockId": "cb-9"}
    p = placement_of("gpu009", "i-0123456789abcdef0", inst, topo, "us-east-2", {"cb-9": "impaired"})
    assert p.topology == [f"network-node:nn-{i}" for i in (1, 2, 3, 4)]
    assert p.placement_group == "pg-train" and p.zone == "us-east-2a"
    assert p.extra == {"az_id": "use2-az1", "partition": 3, "capacity_reservation_id": "cr-1",
                       "capacity_block_id": "cb-9", "capacity_block_interconnect": "impaired", "state": "running",
                       "efa_interfaces": 2}


def test_topology_is_asked_in_batches_of_100(provider, clients, moto):
    ids = sorted(run_instances(moto, 205))
    stub = clients.stub("ec2")
    for batch in (ids[:100], ids[100:200], ids[200:]):
        stub.add_response("describe_instance_topology", {"Instances": [
            {"InstanceId": i, "NetworkNodes": ["nn-top", "nn-mid", f"nn-{i[-4:]}"]} for i in batch]},
            {"InstanceIds": batch})
    placements = provider.locate([host(f"gpu{k:03d}", i) for k, i in enumerate(ids)])
    clients.assert_no_pending()
    assert len(placements) == 205 and all(len(p.topology) == 3 for p in placements)
    assert {p.instance_type for p in placements} == {"p5.48xlarge"}


def test_capacity_block_interconnect_status_is_read_for_blocks(provider, clients, moto):
    ids = run_instances(moto, 2)
    stub = clients.stub("ec2")
    stub.add_response("describe_instance_topology", {"Instances": [
        {"InstanceId": i, "NetworkNodes": ["nn-1", "nn-2", "nn-3"], "CapacityBlockId": "cb-0123"} for i in ids]},
        {"InstanceIds": sorted(ids)})
    stub.add_response("describe_capacity_block_status", {"CapacityBlockStatuses": [
        {"CapacityBlockId": "cb-0123", "InterconnectStatus": "impaired", "TotalCapacity": 2}]},
        {"CapacityBlockIds": ["cb-0123"]})
    placements = provider.locate([host("a", ids[0]), host("b", ids[1])])
    clients.assert_no_pending()
    assert {p.extra["capacity_block_interconnect"] for p in placements} == {"impaired"}
    assert {p.extra["capacity_block_id"] for p in placements} == {"cb-0123"}


def test_topology_denied_keeps_the_instances_and_says_why(provider, clients, moto):
    ids = run_instances(moto, 1)
    clients.stub("ec2").add_client_error("describe_instance_topology", "UnauthorizedOperation",
                                         "You are not authorized to perform this operation.", 403)
    [p] = provider.locate([host("gpu001", ids[0])])
    assert p.instance_type == "p5.48xlarge" and p.topology == []
    assert p.extra["topology_unavailable"].startswith(
        "DescribeInstanceTopology: permission denied (UnauthorizedOperation)")


def test_throttled_topology_is_retried_then_read(paths, clients, moto):
    from fabricase.providers.aws import AwsProvider

    slept: list[float] = []
    provider = AwsProvider(paths, sleep=slept.append)
    ids = run_instances(moto, 1)
    stub = clients.stub("ec2")
    for _ in range(2):
        stub.add_client_error("describe_instance_topology", "RequestLimitExceeded", "Request limit exceeded.", 503)
    stub.add_response("describe_instance_topology", {"Instances": [
        {"InstanceId": ids[0], "NetworkNodes": ["nn-1", "nn-2", "nn-3"]}]}, {"InstanceIds": ids})
    [p] = provider.locate([host("gpu001", ids[0])])
    assert len(p.topology) == 3 and len(slept) == 2
    clients.assert_no_pending()


def test_no_host_with_an_instance_id_makes_no_call(provider, clients):
    assert [p.instance_id for p in provider.locate([host("a", None), host("b", "not-an-id")])] == [None, None]
