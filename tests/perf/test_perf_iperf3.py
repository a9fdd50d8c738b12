"""iperf3 JSON parser: a real run on loopback (when iperf3 is installed), the synthetic doc example, edge cases."""

import json
import os
import shutil

import pytest

from fabricase.parsers.iperf3 import Iperf3Interval, parse_iperf3
from fabricase.perf.runners import iperf3_command, run_server_client
from loopback import free_port

from .helpers import SYNTHETIC_IPERF3


def test_real_iperf3_on_loopback():
    if shutil.which("iperf3") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("iperf3 is not installed: add Debian's iperf3 package to .ci/run")
        pytest.skip("iperf3 is not installed (Debian package iperf3)")
    port = free_port()
    server, client = run_server_client(
        iperf3_command(None, port=port, json=False), iperf3_command("127.0.0.1", duration=1, port=port),
        timeout_s=30, start_delay_s=1.0,
    )  # fmt: skip
    assert client.ok, (client.error, client.stderr)
    r = parse_iperf3(client.stdout)
    assert r.ok and r.errors == [] and r.error is None
    assert r.protocol == "TCP" and r.num_streams == 1 and r.duration_s == 1.0 and r.reverse is False
    assert r.server == "127.0.0.1" and r.connected[0]["remote_port"] == port
    assert r.version.startswith("iperf 3.")
    assert r.sent_bps > 1e8 and r.received_bps > 1e8 and r.received_bytes > 0  # loopback: well over 100 Mb/s
    assert r.retransmits is not None and r.retransmits >= 0 and r.cpu_host_pct is not None
    assert len(r.intervals) >= 1 and r.intervals[0].bits_per_second > 0


def test_synthetic_doc_example():
    r = parse_iperf3(SYNTHETIC_IPERF3.read_text())
    assert (r.version, r.protocol, r.num_streams, r.duration_s, r.server, r.tcp_mss) == (
        "iperf 3.12", "TCP", 1, 2.0, "10.0.0.2", 8948)  # fmt: skip
    assert r.connected == [{"local_host": "10.0.0.1", "local_port": 40412, "remote_host": "10.0.0.2",
                            "remote_port": 5201}]  # fmt: skip
    assert r.intervals[1] == Iperf3Interval(1.000041, 2.000038, 1176502272, 9412046416.2, 593)
    assert (r.sent_bps, r.received_bps, r.retransmits) == (9411839354.1, 9407929447.0, 1204)
    assert (r.sent_bytes, r.received_bytes, r.cpu_host_pct, r.cpu_remote_pct) == (2353004544, 2352349184, 21.4, 35.2)
    assert r.ok


def test_iperf3_error_document():
    r = parse_iperf3(
        '{"start": {"connected": [], "connecting_to": {"host": "10.0.0.9", "port": 5201}}, '
        '"intervals": [], "end": {}, "error": "unable to connect to server: Connection refused"}'
    )
    assert r.error == "unable to connect to server: Connection refused" and r.server == "10.0.0.9"
    assert r.sent_bps is None and r.retransmits is None and not r.ok


def test_udp_end_sum():
    doc = {
        "start": {"test_start": {"protocol": "UDP", "num_streams": 1}},
        "intervals": [],
        "end": {"sum": {"bits_per_second": 1.0e9, "bytes": 125000000, "jitter_ms": 0.012, "lost_percent": 0.5}},
    }
    r = parse_iperf3(json.dumps(doc))
    assert (r.protocol, r.sent_bps, r.sent_bytes, r.udp_jitter_ms, r.udp_lost_percent) == (
        "UDP", 1.0e9, 125000000, 0.012, 0.5)  # fmt: skip
    assert r.retransmits is None and r.received_bps is None


def test_json_stream_and_leading_noise():
    lines = [
        {"event": "start", "data": {"version": "iperf 3.17", "test_start": {"protocol": "TCP", "num_streams": 2}}},
        {"event": "interval", "data": {"sum": {"start": 0, "end": 1, "bytes": 10, "bits_per_second": 80.0}}},
        {"event": "end", "data": {"sum_sent": {"bits_per_second": 80.0, "bytes": 10, "retransmits": 0},
                                  "sum_received": {"bits_per_second": 79.0, "bytes": 10}}},
    ]  # fmt: skip
    r = parse_iperf3("iperf3: warning\n" + "\n".join(json.dumps(x) for x in lines))
    assert (r.version, r.num_streams, len(r.intervals), r.received_bps, r.retransmits) == ("iperf 3.17", 2, 1, 79.0, 0)


@pytest.mark.parametrize(
    ("text", "error"),
    [("not json", "parse: no JSON object found"), ('{"start": ', "parse: not valid JSON at character 0"),
     ("[1, 2]", "parse: no JSON object found")],
)  # fmt: skip
def test_unparseable(text, error):
    r = parse_iperf3(text)
    assert r.errors[0].startswith(error) and r.sent_bps is None


def test_booleans_and_strings_are_not_numbers():
    r = parse_iperf3('{"end": {"sum_sent": {"bits_per_second": true, "retransmits": "3", "bytes": 1e400}}}')
    assert (r.sent_bps, r.retransmits, r.sent_bytes) == (None, None, None)
