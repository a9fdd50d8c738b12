"""perftest parser: every real capture, plus synthetic latency and failure outputs (labelled as such)."""

import pytest

from fabricase.parsers.perftest import LatencyRow, PerftestRow, mb_per_s_to_gbps, parse_perftest

from .helpers import DATA, real

LAT_SYNTHETIC = (DATA / "ib_write_lat_mlx5_3.synthetic.txt").read_text()

# SYNTHETIC: a client whose server is not there, and one whose completions fail (perftest's own messages).
CONNECT_FAILED = """\
---------------------------------------------------------------------------------------
                    RDMA_Read BW Test
 Dual-port       : OFF          Device         : mlx5_0
---------------------------------------------------------------------------------------
Couldn't connect to 10.0.0.2:18515
Unable to open file descriptor for socket connection Unable to init the socket connection
"""
COMPLETION_FAILED = """\
                    Send BW Test
 Device         : mlx5_1
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 Completion with error at client
 Failed status 12: wr_id 0 syndrom 0x81
scnt=128, ccnt=0
"""


def test_hpe_100g_roce_server_and_client():
    r = parse_perftest(real("perftest-outputs/ib_write_bw_100G-RoCE_mlx5_server-and-client_hpe-shs.txt"))
    assert (r.test, r.kind, r.device, r.port, r.link_type) == ("RDMA_Write BW Test", "bw", "mlx5_0", 1, "Ethernet")
    assert (r.transport, r.connection, r.mtu, r.qps, r.gid_index, r.tx_depth) == ("IB", "RC", 4096, 1, 3, 128)
    assert r.bw_unit == "Gb/sec" and r.sections == 2 and r.errors == [] and r.ok
    assert r.command == "ib_write_bw -i 1 -d mlx5_0 -F -D 5 --report_gbits <system_name>n002-hsn"
    assert r.server == "<system_name>n002-hsn"
    # Server and client print the same row: kept once. Duration mode prints a 0.00 peak it did not measure.
    assert r.rows == [PerftestRow(65536, 560960, None, 98.03, 0.186974, None, 98.03)]


def test_post_list_8_byte_messages_are_message_rate_bound():
    r = parse_perftest(real("perftest-outputs/ib_write_bw_postlist_8B_RoCE_perftest-issue-273.txt"))
    assert (r.test, r.device, r.link_type, r.gid_index, r.tx_depth) == (
        "RDMA_Write Post List BW Test", "ib0", "Ethernet", 2, 256)  # fmt: skip
    assert r.port is None and r.command is None
    assert r.rows == [PerftestRow(8, 224958464, None, 0.48, 7.498617, None, 0.48)]


def test_hdr_loopback_8m_in_mib_per_second():
    r = parse_perftest(real("superbenchmark-testdata/ib_loopback_8M_size.log"))
    assert (r.device, r.link_type, r.bw_unit, r.sections, r.gid_index) == ("ib0", "IB", "MB/sec", 2, None)
    (row,) = r.rows
    assert (row.bytes, row.iterations, row.bw_peak, row.bw_avg, row.msg_rate_mpps) == (
        8388608, 20000, 24056.74, 24056.72, 0.003007)  # fmt: skip
    # perftest's MB is MiB: 24056.72 MiB/s = 201.80 Gb/s; the message rate agrees (0.003007 Mpps x 8 MiB).
    assert row.bw_avg_gbps == pytest.approx(201.802, abs=1e-3)
    assert row.msg_rate_mpps * 1e6 * row.bytes * 8 / 1e9 == pytest.approx(row.bw_avg_gbps, rel=1e-3)


def test_interleaved_server_and_client_all_sizes():
    r = parse_perftest(real("superbenchmark-testdata/ib_loopback_all_sizes.log"))
    assert [row.bytes for row in r.rows] == [2**i for i in range(1, 24)]
    assert r.rows[12] == PerftestRow(8192, 2000, 18620.51, 12782.56, 1.636168, mb_per_s_to_gbps(18620.51),
                                     mb_per_s_to_gbps(12782.56))  # fmt: skip
    assert r.largest().bw_avg == 23240.68 and r.largest().bw_avg_gbps == pytest.approx(194.957, abs=1e-3)
    assert (r.device, r.tx_depth, r.mtu, r.errors, r.warnings) == ("ib0", 128, 4096, [], [])


def test_efa_counters_are_not_perftest_output():
    r = parse_perftest(real("rdma-statistic_and_efa/efa_hw_counters_client-server_perftest-issue-113.txt"))
    assert r.rows == [] and r.latency == [] and r.device is None and r.test is None
    assert r.errors == ["parse: no perftest result table found"] and not r.ok


def test_latency_rows_and_cpu_frequency_warning():
    r = parse_perftest(LAT_SYNTHETIC)
    assert (r.test, r.kind, r.device, r.rows) == ("RDMA_Write Latency Test", "lat", "mlx5_3", [])
    assert r.latency[0] == LatencyRow(2, 1000, 1.62, 5.88, 1.66, 1.68, 0.05, 1.81, 5.88)
    assert r.latency[1].t_p99_us == 3.12 and r.errors == []
    assert r.warnings == ["Conflicting CPU frequency values detected: 2400.000000 != 1873.463000. "
                          "CPU Frequency is not max."]  # fmt: skip


def test_old_latency_table_without_percentiles():
    text = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n 2       1000    1.85    28.40  2.05\n"
    (row,) = parse_perftest(text).latency
    assert row == LatencyRow(2, 1000, 1.85, 28.40, 2.05)
    assert row.t_avg_us is None and row.t_p99_us is None


def test_connection_failure_is_recorded():
    r = parse_perftest(CONNECT_FAILED)
    assert r.test == "RDMA_Read BW Test" and r.rows == [] and not r.ok
    assert r.errors == [
        "Couldn't connect to 10.0.0.2:18515",
        "Unable to open file descriptor for socket connection Unable to init the socket connection",
    ]


def test_completion_error_status():
    r = parse_perftest(COMPLETION_FAILED)
    assert r.completion_status == 12 and r.device == "mlx5_1" and r.bw_unit == "Gb/sec"
    assert r.errors == ["Completion with error at client", "Failed status 12: wr_id 0 syndrom 0x81"]


@pytest.mark.parametrize(
    ("command", "device", "port", "server"),
    [
        ("# ib_write_bw -d mlx5_3 -i 1 -s 8388608 -D 10 -F --report_gbits gpu002", "mlx5_3", 1, "gpu002"),
        ("$ ib_read_bw --ib-dev=mlx5_0 --ib-port=2 -q 4 10.0.0.2", "mlx5_0", 2, "10.0.0.2"),
        ("$ ib_send_bw -d mlx5_1 -a -F", "mlx5_1", None, None),
    ],
)
def test_echoed_command_line(command, device, port, server):
    r = parse_perftest(
        command + "\n #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 8388608    5000             197.10             196.92               0.002934\n"
    )
    assert (r.device, r.port, r.server) == (device, port, server)
    assert r.rows[0].bw_avg_gbps == 196.92


def test_rows_without_a_table_header_are_a_parse_error():
    r = parse_perftest(" 8388608    5000             197.10             196.92               0.002934\n")
    assert r.rows == [] and r.errors[0].startswith("parse: unrecognised result row")


def test_empty_and_none():
    assert parse_perftest(None).errors == [] and parse_perftest("").rows == []


def test_newer_perftest_says_mib():
    r = parse_perftest(
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"
        " 65536      5000             8609.87            6595.36              0.105526\n"
    )
    assert r.bw_unit == "MiB/sec" and r.rows[0].bw_avg_gbps == pytest.approx(mb_per_s_to_gbps(6595.36))
