"""Every parse_* function of fabricase.parsers returns its record on hostile input and never raises.

The parsers are found by introspection (benchmarks/bench_parsers.py: discover), so a new one is covered here
without a change; INPUT_KINDS there says how to call those that take bytes, lines or a port's files. The inputs
are the adversarial shapes of the benchmark at small sizes: huge numbers, deep nesting, long runs of one
character, non-UTF-8, truncated and mutated real captures. benchmarks/bench_parsers.py is the long version
(10,000 inputs per parser, 1 MB shapes).
"""

from __future__ import annotations

import random
import socket
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import bench_parsers as kit  # noqa: E402

from fabricase.parsers.ethtool import parse_ethtool_stats, parse_int  # noqa: E402
from fabricase.parsers.nccl_tests import parse_nccl_tests, parse_size  # noqa: E402
from fabricase.parsers.nvidia_smi import parse_nvidia_smi, parse_nvidia_smi_xml  # noqa: E402
from fabricase.parsers.rdma import parse_counter, parse_rate  # noqa: E402

PARSERS = kit.discover()
# Small captures keep the examples quick; the benchmark mutates the big ones too.
SEEDS = [data for _, data in kit.load_fixtures() if len(data) <= 64 * 1024]


def _ids(parser: kit.Parser) -> str:
    return parser.name


def _repeat(unit: str, count: int) -> str:
    return unit * count


_UNITS = st.sampled_from(kit.RUN_CHARS + kit.PAIRS)
INPUTS = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300),
    st.builds(_repeat, _UNITS, st.integers(1, 3000)),
    st.builds(lambda p, t, n: p + t * n, st.sampled_from(kit.PREFIXES), st.sampled_from(kit.TAILS),
              st.integers(1, 2000)),
    st.builds(lambda p, n, s: p + n + s, st.sampled_from(kit.PREFIXES), st.sampled_from(kit.NUMBER_TOKENS),
              st.sampled_from(("", "\n", " ", ":", " GB/s", "G", "\n" + kit.PREFIXES[0]))),
    st.builds(lambda d: kit.XML_HEAD + '<gpu id="0">' + "<a>" * d + "</a>" * d + "</gpu></nvidia_smi_log>",
              st.integers(1, 1500)),
    st.builds(lambda d, u: u * d, st.integers(1, 1500), st.sampled_from(('{"start": ', "[", "(", "{", "<a>"))),
    st.sampled_from(list(kit.XML_ATTACKS.values())),
    st.builds(lambda seed, k: seed[: len(seed) * k // 50], st.sampled_from(SEEDS), st.integers(1, 49)),
    st.builds(lambda seed, r: kit.mutate(seed, random.Random(r)), st.sampled_from(SEEDS), st.integers(0, 2**32)),
)  # fmt: skip


def test_every_parser_is_found_and_callable():
    names = {p.name for p in PARSERS}
    assert len(PARSERS) >= 54 and {"ibtools.parse_ibstat", "nvidia_smi.parse_nvidia_smi_xml"} <= names
    assert set(kit.INPUT_KINDS) <= names, "a parser named in INPUT_KINDS no longer exists"
    assert {p.kind for p in PARSERS} <= set(kit.CALLERS)


@pytest.mark.parametrize("parser", PARSERS, ids=_ids)
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(data=INPUTS)
def test_parser_returns_its_record_on_hostile_input(parser, data):
    with kit.time_limit(10):
        value = parser(data)
    assert kit.conforms(value, kit.return_type(parser)), f"{parser.name} returned {type(value).__name__}"


SMALL_SHAPES = kit.adversarial(3000)


@pytest.mark.parametrize("parser", PARSERS, ids=_ids)
def test_parser_survives_every_shape_and_cut(parser):
    """Each small adversarial shape, and two real captures of the parser's format cut at every 1/50th."""
    seeds = kit.relevant_fixtures(parser, [(str(i), s) for i, s in enumerate(SEEDS)])[:2]
    failures = []
    for name, data in SMALL_SHAPES + kit.fixture_shapes(seeds, 3000):
        outcome = kit.run_one(parser, data, 10)
        if outcome.error is not None:
            failures.append(f"{name}: {type(outcome.error).__name__}: {str(outcome.error)[:80]}")
        elif not kit.conforms(outcome.value, kit.return_type(parser)):
            failures.append(f"{name}: returned {type(outcome.value).__name__}")
    assert not failures, f"{len(failures)} failures, first: {failures[:3]}"


# ---------------------------------------------------------------------------------------------- numbers


@pytest.mark.parametrize("text", ["9" * 400 + "G", "9" * 5000 + "GiB", "1e999", "nan", "inf", "9" * 400 + ".5M"])
def test_parse_size_is_none_or_bounded(text):
    size = parse_size(text)
    assert size is None or 0 <= size < 2**64


def test_scalar_helpers_bound_digits_before_int():
    assert parse_counter("9" * 5000) is None and parse_counter("18446744073709551615") == 2**64 - 1
    assert parse_int("9" * 5000) is None and parse_int("12") == 12
    assert parse_rate("9" * 5000 + " Gb/sec (4X NDR)") == (None, None, None)
    assert parse_rate("nan Gb/sec") == (None, None, None)


def test_a_5000_digit_counter_is_an_error_not_a_crash():
    table = parse_ethtool_stats(f"NIC statistics:\n     rx_packets: {'9' * 5000}\n     tx_packets: 7\n")
    assert table == {"tx_packets": 7} and table.errors
    result = parse_nccl_tests(f"#  Rank  0 Group  0 Pid {'9' * 5000} on h device  0 [0x1b] A100\n")
    assert result.ranks == []


# ---------------------------------------------------------------------------------------------- XML


def test_an_undefined_entity_keeps_every_gpu_and_says_so():
    report = parse_nvidia_smi(kit.XML_ATTACKS["xml-undefined-entity"])
    assert [g.index for g in report.gpus] == [0, 1] and report.gpus[1].uuid == "GPU-1"
    assert report.gpus[0].name is not None and "nbsp" in " ".join(report.errors)


def test_xml_nested_1000_deep_is_read_without_recursion_error():
    xml = kit.XML_HEAD + '<gpu id="00000000:3B:00.0"><uuid>GPU-x</uuid>' + "<a>" * 1000 + "</a>" * 1000
    report = parse_nvidia_smi_xml(xml + "</gpu></nvidia_smi_log>")
    assert [g.uuid for g in report.gpus] == ["GPU-x"]
    assert report.errors  # the depth cap is recorded


def test_an_entity_expansion_bomb_is_refused_quickly():
    start = time.perf_counter()
    report = parse_nvidia_smi_xml(kit.XML_ATTACKS["xml-entity-bomb"])
    assert time.perf_counter() - start < 1.0
    assert report.errors and all(len(g.name or "") < 10_000 for g in report.gpus)


def test_external_entities_are_never_fetched():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        for attack in ("xml-external-entity", "xml-parameter-entity"):
            xml = kit.XML_ATTACKS[attack].replace("127.0.0.1:9", f"127.0.0.1:{port}")
            report = parse_nvidia_smi_xml(xml)
            assert report.errors
        with pytest.raises(TimeoutError):
            server.accept()
