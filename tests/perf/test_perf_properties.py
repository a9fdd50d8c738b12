"""Property tests: any input is parsed without an exception, and every number that comes out was in the text."""

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fabricase.parsers.iperf3 import parse_iperf3
from fabricase.parsers.nccl_log import EVENT_KINDS, parse_nccl_log
from fabricase.parsers.nccl_tests import parse_busbw_table, parse_nccl_tests
from fabricase.parsers.perftest import parse_perftest

from .helpers import SYNTHETIC_NCCL_LOG, real

_WORDS = st.sampled_from(
    [" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]", "BW peak[MB/sec]",
     " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]", "RDMA_Write BW Test", " Device : ",
     "mlx5_0", " Mtu : 4096[B]", "Failed status 12", "Couldn't", "#", "$ ib_write_bw -i ", " -d ", "-i", "--ib-port=",
     "size count type redop root time algbw busbw #wrong", "float", "sum", "-1", "N/A", "[0]", "[1,3]<stdout>:",
     "# Avg bus bandwidth : ", "# Out of bounds values : ", " OK", " FAILED", "# Rank 0 Pid 1 on h device 0 [0x1] A100",
     "Test NCCL failure", "|", "GBps", "KiB", "---", "gpu1:12:13 [3] ", "NCCL INFO ", "NCCL WARN ",
     "NET/IB : Using [0]mlx5_3:1/RoCE ; OOB eth0:10.0.0.1<0>", "comm 0x1 rank 3 nranks 8 cudaDev 3 busId 3b000",
     "Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0", "Got completion from peer 10.0.0.7<37044> with status=",
     " opcode=0 len=0 vendor err ", "hca mlx5_3", "mlx5_3:1 Got async event : port error", "Call to ibv_x failed",
     "Watchdog caught collective operation timeout", "[Rank 7]", "0", "12", "129", "8388608", "1.5",
     "99999999999999999999", "1e400", "_", "\n", " ", "\t", "\ufffd", "\x00"]
)  # fmt: skip
TEXT = st.one_of(st.text(), st.lists(st.one_of(_WORDS, st.text(max_size=3))).map("".join))
FIXTURES = [
    real("superbenchmark-testdata/nccl_allreduce.log"),
    real("superbenchmark-testdata/ib_loopback_all_sizes.log"),
    SYNTHETIC_NCCL_LOG.read_text(),
]


def _numbers_in(text: str) -> set[float]:
    cleaned = re.sub(r"(?<=\d)_(?=\d)", "", text)
    tokens = re.findall(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", cleaned)
    # Integers are kept exact too: a 20-digit count is not a float.
    return {float(n) for n in tokens} | {int(n) for n in tokens if n.isdigit()}


def _in_text(value: float | None, numbers: set[float]) -> bool:
    return value is None or value in numbers or -value in numbers


@settings(max_examples=300)
@given(TEXT)
def test_perftest_values_come_from_the_text(text):
    r = parse_perftest(text)
    numbers = _numbers_in(text)
    for row in r.rows:
        assert all(_in_text(v, numbers) for v in (row.bytes, row.iterations, row.bw_peak, row.bw_avg,
                                                   row.msg_rate_mpps))  # fmt: skip
        assert row.bw_avg_gbps >= 0
    for row in r.latency:
        assert all(_in_text(v, numbers) for v in vars(row).values())
    assert r.device is None or r.device in text
    assert _in_text(r.mtu, numbers) and _in_text(r.port, numbers) and _in_text(r.completion_status, numbers)


@settings(max_examples=300)
@given(TEXT)
def test_nccl_tests_values_come_from_the_text(text):
    r = parse_nccl_tests(text)
    numbers = _numbers_in(text)
    for row in r.rows:
        assert _in_text(row.size, numbers) and _in_text(row.count, numbers) and _in_text(row.root, numbers)
        for half in (row.out_of_place, row.in_place):
            assert half is None or all(_in_text(v, numbers) for v in vars(half).values())
    assert all(_in_text(v, numbers) for v in r.avg_busbw_values)
    assert all(rank.host in text for rank in r.ranks)
    table = parse_busbw_table(text)
    assert all(_in_text(v, numbers) for row in table.rows for v in row.values.values())


@settings(max_examples=300)
@given(TEXT)
def test_nccl_log_events_come_from_the_text(text):
    log = parse_nccl_log(text, source="x")
    numbers = _numbers_in(text)
    lines = text.splitlines()
    for event in log.events:
        assert event.kind in EVENT_KINDS and 1 <= event.line_no <= len(lines)
        assert event.text == lines[event.line_no - 1].strip()[:500]
        assert all(_in_text(v, numbers) for v in (event.status, event.vendor_err, event.opcode, event.pid, event.rank))
        assert event.host is None or event.host in text
        assert event.device is None or event.device in text
    for number, rank in log.ranks.items():
        assert _in_text(number, numbers) and (rank.host is None or rank.host in text)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["start", "end", "intervals", "sum", "sum_sent", "sum_received", "bits_per_second", "bytes",
                         "retransmits", "error", "test_start", "protocol", "connected", "event", "data"]),
        children, max_size=5),
    max_leaves=30,
)  # fmt: skip


@settings(max_examples=300)
@given(_JSON)
def test_iperf3_never_raises_on_any_json(doc):
    text = json.dumps(doc)
    r = parse_iperf3(text)
    for value in (r.sent_bps, r.received_bps, r.retransmits, r.sent_bytes):
        assert value is None or (isinstance(value, int | float) and not isinstance(value, bool))


@given(TEXT)
def test_iperf3_never_raises_on_text(text):
    parse_iperf3(text)


@given(st.binary(max_size=2000))
def test_bytes_decoded_with_replacement(data):
    text = data.decode("utf-8", errors="replace")
    parse_perftest(text), parse_nccl_tests(text), parse_iperf3(text), parse_nccl_log(text), parse_busbw_table(text)


@given(st.sampled_from(FIXTURES), st.integers(min_value=0), st.integers(min_value=0))
def test_truncated_real_output(text, start, length):
    cut = text[start % len(text) :][: length % len(text)]
    for parse in (parse_perftest, parse_nccl_tests, parse_nccl_log):
        parse(cut)


def test_huge_numbers_stay_exact():
    r = parse_nccl_tests("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                         " 99999999999999999999 1 float sum -1 1 2 3 123456789012345678901234 1 2 3 0\n")  # fmt: skip
    assert r.rows[0].size == 99999999999999999999
    assert parse_perftest(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]\n"
                          " 99999999999999999999 1 1.0 2.0\n").rows[0].bytes == 99999999999999999999  # fmt: skip
