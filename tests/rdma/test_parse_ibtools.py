"""ibstat, ibstatus, ibv_devinfo, rdma link and rdma statistic against every real capture."""

from pathlib import Path

import pytest

from fabricase.parsers.ibtools import (
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_rdma_link,
    parse_rdma_statistic,
)

REAL = Path(__file__).parents[1] / "fixtures/real"
IBSTAT = REAL / "leptonai-gpud/ibstat"
DEVINFO = REAL / "ibv_devinfo_heioy-books"
RDMA = REAL / "rdma-statistic_and_efa"


def states(report):
    return {p.device: (p.state, p.phys_state, p.rate_gbps, p.link_layer) for p in report.ports}


# file -> (ports, {device: (state, phys_state, rate, link_layer)} for the ports that are not Active/LinkUp)
IBSTAT_CASES = {
    "ibstat.47.0.a100.all.active.0.txt": (9, {}),
    "ibstat.47.0.h100.all.active.0.txt": (12, {}),
    "ibstat.47.0.h100.all.active.1.txt": (12, {}),
    "ibstat.47.0.h100.all.active.2.txt": (9, {}),
    "ibstat.47.0.h100.some.down.0.txt": (12, {d: ("DOWN", "DISABLED", 40.0, "Ethernet")
                                              for d in ("mlx5_2", "mlx5_7", "mlx5_8")}),
    "ibstat.47.0.h100.some.down.1.txt": (12, {d: ("DOWN", "DISABLED", 40.0, "Ethernet")
                                              for d in ("mlx5_11", "mlx5_5")}),
    "ibstat.47.0.h100.some.down.with.polling.1.txt": (12, {"mlx5_11": ("DOWN", "POLLING", 40.0, "Ethernet"),
                                                           "mlx5_5": ("DOWN", "DISABLED", 40.0, "Ethernet")}),
    "ibstat.39.0.a100.failed.ibpanic.exit-255.0.txt": (8, {}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(IBSTAT_CASES))
def test_real_ibstat(name):
    report = parse_ibstat((IBSTAT / name).read_text())
    count, bad = IBSTAT_CASES[name]
    assert len(report.ports) == count and len(report.devices) == count
    got = states(report)
    assert {d: v for d, v in got.items() if v[:2] != ("ACTIVE", "LINK_UP")} == bad
    for device, (_state, _phys, rate, layer) in got.items():
        assert rate is not None and layer in ("InfiniBand", "Ethernet")
        assert report.devices[device]["CA type"].startswith("MT")
    if "ibpanic" in name:
        # the output ends with ibstat's own panic line: kept as a parse error, the 8 ports before it stand
        assert len(report.errors) == 1 and "ibpanic" in report.errors[0] and "mlx5_8" in report.errors[0]
    else:
        assert report.errors == []


def test_real_ibstat_h100_rates_separate_the_frontend_nics():
    report = parse_ibstat((IBSTAT / "ibstat.47.0.h100.all.active.0.txt").read_text())
    by_rate = {}
    for p in report.ports:
        by_rate.setdefault(p.rate_gbps, set()).add(report.devices[p.device]["CA type"])
    assert by_rate == {400.0: {"MT4129"}, 100.0: {"MT4125"}}  # 8 ConnectX-7 GPU NICs, 4 ConnectX-6 Dx
    assert report.port("mlx5_0").fields["Port GUID"] == "0xa288c2fffee3142a"
    assert report.devices["mlx5_0"]["Firmware version"] == "28.39.1002"


def test_real_ibstatus_azhpc():
    report = parse_ibstatus((REAL / "azhpc-diagnostics-samples/ibstatus.out").read_text())
    assert report.errors == []
    an0, ib0 = report.port("mlx5_an0"), report.port("mlx5_ib0")
    assert (an0.state, an0.phys_state, an0.rate_gbps, an0.width, an0.speed, an0.link_layer) == (
        "ACTIVE", "LINK_UP", 40.0, 4, "QDR", "Ethernet")
    assert (ib0.rate_gbps, ib0.speed, ib0.link_layer) == (200.0, "HDR", "InfiniBand")
    assert ib0.fields["base lid"] == "0x96" and ib0.fields["sm lid"] == "0x11c"


def test_real_ibstatus_gpud():
    report = parse_ibstatus((IBSTAT / "ibstatus.39.0.a100.all.active.0.txt").read_text())
    assert report.errors == [] and len(report.ports) == 9
    assert {p.rate_gbps for p in report.ports if p.link_layer == "InfiniBand"} == {200.0}
    assert report.port("mlx5_8").rate_gbps == 40.0 and report.port("mlx5_8").link_layer == "Ethernet"
    assert all(p.state == "ACTIVE" and p.phys_state == "LINK_UP" for p in report.ports)


def test_real_ibv_devinfo_two_hcas_port2_down():
    report = parse_ibv_devinfo((DEVINFO / "ibv_devinfo_mlx4_2HCAs_port2-down.txt").read_text())
    assert report.errors == []
    assert [(p.device, p.port, p.state, p.state_code) for p in report.ports] == [
        ("mlx4_1", 1, "ACTIVE", 4), ("mlx4_1", 2, "DOWN", 1), ("mlx4_0", 1, "ACTIVE", 4), ("mlx4_0", 2, "DOWN", 1)]
    assert report.devices["mlx4_0"]["node_guid"] == "e41d:2d03:00e0:c740"
    assert report.devices["mlx4_1"]["fw_ver"] == "2.42.5000" and report.port("mlx4_1").link_layer == "InfiniBand"
    assert report.port("mlx4_1", 1).fields["port_lid"] == "22"


def test_real_ibv_devinfo_verbose_polling_port():
    report = parse_ibv_devinfo((DEVINFO / "ibv_devinfo-d_mlx4_1-i2-v_polling.txt").read_text())
    assert report.errors == [] and len(report.ports) == 1
    p = report.port("mlx4_1", 2)
    assert (p.state, p.phys_state, p.phys_state_code) == ("DOWN", "POLLING", 2)
    assert (p.width, p.speed, p.rate_gbps) == (4, "2.5 Gbps", 10.0)  # 4X x 2.5 Gbps: an untrained port
    assert p.fields["GID[  0]"] == "fe80:0000:0000:0000:7cfe:9003:00a5:95c2"
    assert report.devices["mlx4_1"]["max_qp"] == "393144"
    assert "BAD_PKEY_CNTR" not in report.devices["mlx4_1"]  # flag lists are not fields


@pytest.mark.parametrize(("name", "ports"), [
    ("ibv_devinfo-d_mlx4_1.txt", [("mlx4_1", 1, "ACTIVE"), ("mlx4_1", 2, "DOWN")]),
    ("ibv_devinfo-d_mlx4_1-i2.txt", [("mlx4_1", 2, "DOWN")]),
    ("ibv_devinfo-l.txt", []),
])  # fmt: skip
def test_real_ibv_devinfo_other_forms(name, ports):
    report = parse_ibv_devinfo((DEVINFO / name).read_text())
    assert [(p.device, p.port, p.state) for p in report.ports] == ports and report.errors == []
    if name == "ibv_devinfo-l.txt":
        assert list(report.devices) == ["mlx4_1", "mlx4_0"]


def test_real_rdma_link_2017_wrapped():
    report = parse_rdma_link((RDMA / "rdma-link_mlx5-ib_netdev-2017.txt").read_text())
    got = [(p.device, p.port, p.state, p.phys_state, p.netdev, p.rate_gbps, p.link_layer) for p in report.ports]
    assert got == [
        ("mlx5_0", 1, "ACTIVE", "LINK_UP", "ib0", 100.0, "InfiniBand"),
        ("mlx5_1", 1, "DOWN", "DISABLED", "ib1", 10.0, "InfiniBand"),
        ("mlx5_2", 1, "ACTIVE", "LINK_UP", "ib2", 56.0, "InfiniBand"),
        ("mlx5_2", 2, "DOWN", "DISABLED", "ib3", 10.0, "InfiniBand"),
    ]
    assert report.errors == ["unrecognized line: '# rdma link'"]  # the pasted prompt


def test_rdma_link_current_one_line_form():
    text = ("link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev enp4s0f0np0\n"
            "link mlx5_1/1 state DOWN physical_state POLLING\n"
            "link rocep8s0f1/1 state DOWN physical_state DISABLED netdev ens8f1np1\n")
    report = parse_rdma_link(text)
    assert [(p.device, p.state, p.phys_state, p.netdev) for p in report.ports] == [
        ("mlx5_0", "ACTIVE", "LINK_UP", "enp4s0f0np0"), ("mlx5_1", "DOWN", "POLLING", None),
        ("rocep8s0f1", "DOWN", "DISABLED", "ens8f1np1")]
    assert report.errors == []


def test_real_rdma_statistic_show_with_optional_counters():
    stats = parse_rdma_statistic((RDMA / "rdma-statistic_mlx5-roce_optional-counters_lkml-2021.txt").read_text())
    assert list(stats.links) == [("rocep8s0f0", 1)]
    counters = stats.links[("rocep8s0f0", 1)]
    assert len(counters) == 30 and all(v == 0 for v in counters.values())
    for name in ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "np_cnp_sent", "rp_cnp_handled",
                 "np_ecn_marked_roce_packets", "cc_rx_ce_pkts", "cc_rx_cnp_pkts", "rx_icrc_encapsulated"):
        assert name in counters
    # the `mode` lines and shell prompts around the example are not statistics: recorded, not guessed at
    assert any("supported" in e for e in stats.errors) and any("sudo rdma" in e for e in stats.errors)


def test_rdma_statistic_two_links_and_bad_values():
    stats = parse_rdma_statistic("link mlx5_0/1 rx_write_requests 5 out_of_sequence 2\n"
                                 "link mlx5_1/1 out_of_buffer 3 local_ack_timeout_err x np_cnp_sent 4\n"
                                 "link mlx5_2/1 dangling\n")
    assert stats.links == {("mlx5_0", 1): {"rx_write_requests": 5, "out_of_sequence": 2},
                           ("mlx5_1", 1): {"out_of_buffer": 3}}
    assert len(stats.errors) == 2
