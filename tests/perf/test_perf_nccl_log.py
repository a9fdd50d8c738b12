"""NCCL debug-log parser: the synthetic 2x8 job log, and one line of each shape NCCL versions print.

The single lines below are written for this test after NCCL's format strings (net_ib.cc WARN calls across
versions, the async-event thread, the ibv wrappers) and PyTorch's watchdog message; they are not captured logs.
"""

import pytest

from fabricase.parsers.nccl_log import NcclRank, parse_nccl_log, parse_nccl_log_lines

from .helpers import SYNTHETIC_NCCL_LOG, real

INIT = (
    "gpu01:100:100 [2] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [RO]; "
    "OOB ib0:10.1.0.1<0>\n"
    "gpu01:100:100 [2] NCCL INFO comm 0x7f00 rank 2 nranks 16 cudaDev 2 busId 3a000 - Init COMPLETE\n"
    "gpu01:100:120 [2] NCCL INFO Channel 00/0 : 2[3a000] -> 10[3a000] [send] via NET/IB/2/GDRDMA\n"
)


def test_synthetic_job_log_ranks_and_nics():
    log = parse_nccl_log(SYNTHETIC_NCCL_LOG.read_text(), source="job.log")
    assert log.source == "job.log" and log.errors == [] and log.total_lines == 200
    assert sorted(log.ranks) == list(range(16)) and log.hosts == ["gpu001", "gpu002"]
    assert log.oob == {"gpu001": "10.0.0.1", "gpu002": "10.0.0.2"} and log.transport == "IB"
    nics = [f"mlx5_{i}:1" for i in range(8)]
    assert log.ranks[11] == NcclRank(11, "gpu002", 41011, 3, "3b000", 16, nics, ["mlx5_3:1"])
    assert all(log.ranks[r].host == "gpu001" and log.ranks[r].nics_used == [f"mlx5_{r}:1"] for r in range(8))


def test_synthetic_job_log_events():
    log = parse_nccl_log(SYNTHETIC_NCCL_LOG.read_text(), source="job.log")
    kinds = [e.kind for e in log.events]
    assert kinds.count("ib-completion-error") == 14 and kinds.count("port-error") == 1
    assert kinds.count("timeout") == 2 and kinds.count("warn") == 1
    port_error = log.of_kind("port-error")[0]
    assert (port_error.host, port_error.rank, port_error.device, port_error.port, port_error.line_no) == (
        "gpu002", 11, "mlx5_3", 1, 181)  # fmt: skip
    local = [e for e in log.of_kind("ib-completion-error") if e.host == "gpu002"]
    assert len(local) == 12 and {(e.rank, e.device, e.port, e.peer, e.peer_host) for e in local} == {
        (11, "mlx5_3", 1, "10.0.0.1", "gpu001")}  # fmt: skip
    assert [(e.status, e.vendor_err) for e in local].count((12, 129)) == 10
    assert [(e.status, e.vendor_err) for e in local].count((5, 249)) == 2
    far = [e for e in log.of_kind("ib-completion-error") if e.host == "gpu001"]
    assert {(e.rank, e.device, e.peer_host, e.opcode) for e in far} == {(3, "mlx5_3", "gpu002", 129)}
    timeouts = {(e.host, e.rank) for e in log.of_kind("timeout")}
    assert timeouts == {("gpu002", 11), ("gpu001", 3)}  # host from the rank map: the watchdog line names no host
    (warn,) = log.of_kind("warn")
    assert (warn.host, warn.rank, warn.device) == ("gpu002", 8, None)  # a generic warning is not pinned on a NIC


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.0.5<33092> "
         "with error 12, opcode 0, len 0, vendor err 129 (Recv)",
         ("ib-completion-error", "node-2", None, None, "10.2.0.5", 12, 129, 0)),
        ("[2026-03-03 12:11:38] host7:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion "
         "from peer 10.9.1.63<51161> with status=4 opcode=0 len=0 vendor err 81 (Send) localGid ::ffff:10.9.2.59 "
         "remoteGids::ffff:10.9.1.63 hca mlx5_1",
         ("ib-completion-error", "host7", "mlx5_1", None, "10.9.1.63", 4, 81, 0)),
        ("ubuntu2:319733:319761 [1] transport/net_ib/p2p.cc:648 NCCL WARN NET/IB: Got completion from peer "
         "10.15.3.13<40554> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) "
         "vendor_err=129 localGid ::ffff:1.1.2.2 remoteGids::ffff:1.1.1.4 hca mlx5_1",
         ("ib-completion-error", "ubuntu2", "mlx5_1", None, "10.15.3.13", 12, 129, 129)),
        ("gpu01:100:200 [2] NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 32768, vendor err 129",
         ("ib-completion-error", "gpu01", None, None, None, 12, 129, 1)),
        ("gpu01:100:300 [2] NCCL WARN NET/IB : mlx5_2:1 Got async event : port error",
         ("port-error", "gpu01", "mlx5_2", 1, None, None, None, None)),
        ("gpu01:100:300 [2] NCCL WARN NET/IB : mlx5_2:1 Got async event : local catastrophic error",
         ("nic-fatal", "gpu01", "mlx5_2", 1, None, None, None, None)),
        ("gpu01:100:300 [2] NCCL WARN NET/IB : mlx5_2:1 Got async event : port active",
         ("async-event", "gpu01", "mlx5_2", 1, None, None, None, None)),
        ("gpu01:100:200 [2] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, "
         "on dev mlx5_4:1, curr state INIT, next state RTR",
         ("ibv-failed", "gpu01", "mlx5_4", 1, None, None, None, None)),
        ("gpu01:100:200 [2] NCCL WARN Call to ibv_create_cq failed",
         ("ibv-failed", "gpu01", None, None, None, None, None, None)),
        ("[rank5]:[E1129 23:14:07.512846861 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation "
         "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600072 milliseconds",
         ("timeout", None, None, None, None, None, None, None)),
        ("gpu01:100:200 [2] NCCL WARN Timeout waiting for connection from peer",
         ("timeout", "gpu01", None, None, None, None, None, None)),
        ("  5: gpu02:300:400 [5] enqueue.cc:100 NCCL WARN Cuda failure 'unspecified launch failure'",
         ("warn", "gpu02", None, None, None, None, None, None)),
    ],
)  # fmt: skip
def test_line_shapes(line, expected):
    (event,) = parse_nccl_log(line).events
    got = (event.kind, event.host, event.device, event.port, event.peer, event.status, event.vendor_err, event.opcode)
    assert got == expected and event.line_no == 1 and event.text == line.strip()


def test_rank_hints_without_init_lines():
    log = parse_nccl_log(
        "[rank5]:[E1129 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: x\n"
        "  7: gpu02:300:400 [5] NCCL WARN Cuda failure 'unspecified launch failure'\n"
        "[1,9]<stdout>:gpu03:300:400 [1] NCCL WARN Net : Connection closed by remote peer\n"
    )
    assert [e.rank for e in log.events] == [5, 7, 9]


def test_nic_inferred_from_the_rank_channels_and_port_from_the_nic_list():
    log = parse_nccl_log(INIT + "gpu01:100:130 [2] NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, "
                         "vendor err 129\n")  # fmt: skip
    (event,) = log.events
    assert (event.rank, event.device, event.port, event.inferred) == (2, "mlx5_2", 1, True)
    assert log.ranks[2].nics_used == ["mlx5_2:1"] and log.oob == {"gpu01": "10.1.0.1"}


def test_named_nic_gets_its_port_from_the_nic_list():
    (event,) = parse_nccl_log(INIT + "gpu01:100:130 [2] NCCL WARN NET/IB: Got completion from peer 10.1.0.2<1> with "
                              "status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_1\n").events  # fmt: skip
    assert (event.device, event.port, event.inferred) == ("mlx5_1", 1, False)


def test_several_gpus_per_process_map_by_cuda_device():
    init = "".join(
        f"gpu01:500:500 [{d}] NCCL INFO comm 0x{d} rank {d} nRanks 8 nNodes 1 localRanks 8 localRank {d} MNNVL 0\n"
        for d in range(8)
    )
    log = parse_nccl_log(init + "gpu01:500:510 [3] NCCL WARN NET/IB : mlx5_3:1 Got async event : port error\n")
    assert log.ranks[3].cuda_dev == 3 and log.ranks[3].nranks == 8 and log.events[0].rank == 3


def test_peer_named_by_host_name():
    text = (
        "gpu001:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
        "gpu002:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
        "gpu001:1:3 [0] NCCL WARN NET/IB: Got completion from peer gpu002<57713> with status=4 opcode=0 len=0 "
        "vendor err 81 (Send) hca mlx5_0\n"
    )
    (event,) = parse_nccl_log(text).events
    assert (event.peer, event.peer_host) == ("gpu002", "gpu002")


def test_streaming_a_file(tmp_path):
    with SYNTHETIC_NCCL_LOG.open(encoding="utf-8") as lines:
        log = parse_nccl_log_lines(lines, source="job.log")
    assert len(log.events) == 18 and len(log.ranks) == 16


def test_no_nccl_lines_is_a_parse_error():
    assert parse_nccl_log("hello\nworld\n").errors == ["parse: no NCCL rank or warning lines found"]
    assert parse_nccl_log(None).errors == [] and parse_nccl_log("").events == []


def test_real_nccl_2_28_single_rank_on_h200():
    log = parse_nccl_log(real("nccl-debug-logs_h200-vm/nccl_1rank_torch.log"), source="nccl_1rank_torch.log")
    assert log.ranks == {0: NcclRank(0, "vm", 480, 0, "60", 1, [], [])}
    # NET/IB found no device; NCCL used sockets: an interface and its address are not a NIC and a port.
    assert (log.transport, log.oob, log.events, log.errors) == ("Socket", {"vm": "192.0.2.2"}, [], [])
    assert log.total_lines == 97 and log.hosts == ["vm"]


def test_real_nccl_duplicate_gpu_warning():
    text = "".join(real(f"nccl-debug-logs_h200-vm/nccl_2rank_samegpu_r{r}.log") for r in (0, 1))
    log = parse_nccl_log(text)
    assert {r: (k.host, k.pid, k.nranks, k.cuda_dev) for r, k in log.ranks.items()} == {
        0: ("vm", 511, 2, 0), 1: ("vm", 512, 2, 0)}  # fmt: skip
    assert [(e.kind, e.host, e.pid, e.rank, e.device, e.line_no) for e in log.events] == [
        ("warn", "vm", 511, 0, None, 18), ("warn", "vm", 512, 1, None, 57)]  # fmt: skip
    assert log.events[0].text == ("[2026-11-29 23:39:25] vm:511:511 [0] init.cc:904 NCCL WARN Duplicate GPU detected :"
                                  " rank 0 and rank 1 both on CUDA device 60")  # fmt: skip
