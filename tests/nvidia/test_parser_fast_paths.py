"""The GPU parsers' fast paths read what their general paths read: the Fabric Manager log's literal prefilter
never hides an entry that one of the kind patterns matches, and a whole nvidia-smi XML document parsed in one
call gives the report the event-by-event reading gives."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fabricase.parsers import fabric_manager, nvidia_smi
from fabricase.parsers.fabric_manager import parse_daemon_log
from fabricase.parsers.nvidia_smi import parse_nvidia_smi_xml

REAL = Path(__file__).parents[1] / "fixtures/real"

_PHRASES = st.sampled_from([
    "Topology Mismatch", "don't match with any supported system topology", "failed to find the GPU handle ",
    " multicast team", "is running with the following configuration options", "NVSwitch driver failed",
    "nv_warn_nothing_to_do", "TRAINING", "Trunk Link", "access link", " fail", " down", "K", "\u212a", "\u017f",
    "\u0130", " ",
])  # fmt: skip
MESSAGES = st.lists(st.one_of(_PHRASES, st.text(max_size=4))).map("".join)


@settings(max_examples=500)
@given(MESSAGES)
@example("tr\u0130ning")
@example("\u212aind of trunk link")
@example("TRUNK LINK")
def test_the_kind_prefilter_never_hides_a_match(msg: str) -> None:
    matched = any(pattern.search(msg) for pattern, _ in fabric_manager._KINDS)
    if matched:
        assert fabric_manager._may_have_kind(msg), msg


def test_the_prefilter_keeps_each_kind_of_a_real_shaped_log() -> None:
    lines = [
        "[Jul 23 2024 07:53:55] [ERROR] [tid 841] Detected topology mismatch on the system",
        "[Jul 23 2024 07:53:56] [INFO] [tid 841] Fabric Manager version 550.54.15 is running with the following "
        "configuration options",
        "[Jul 23 2024 07:53:57] [WARNING] [tid 841] failed to find the GPU handle 5 for multicast team setup",
        "[Jul 23 2024 07:53:58] [INFO] [tid 841] NVSwitch Driver failed to open",
        "[Jul 23 2024 07:53:59] [INFO] [tid 841] Access link 3 went DOWN",
        "[Jul 23 2024 07:54:00] [INFO] [tid 841] Trunk Link 7 training",
        "[Jul 23 2024 07:54:01] [INFO] [tid 841] multicast group 1 is allocated.",
    ]
    kinds = [e.kind for e in parse_daemon_log("\n".join(lines)).events]
    assert kinds == ["topology-mismatch", "started", "multicast-failure", "driver-error", "link-error", "link-error"]


def _pull_report(text: str, monkeypatch: pytest.MonkeyPatch) -> nvidia_smi.NvidiaSmiReport:
    """The report read event by event (the path a document that does not parse takes)."""
    def no_whole_parse(_text: str) -> ET.Element:
        raise ET.ParseError("forced")

    with monkeypatch.context() as m:
        m.setattr(nvidia_smi.ET, "fromstring", no_whole_parse)
        m.setattr(nvidia_smi.native, "xml_tops", None)  # and not the C extension's whole parse either
        return parse_nvidia_smi_xml(text)


XML_REPORTS = sorted(p for p in REAL.rglob("*.xml") if b"<nvidia_smi_log" in p.read_bytes())


@pytest.mark.parametrize("path", XML_REPORTS, ids=lambda p: p.name)
def test_a_whole_document_reads_as_the_event_reading_does(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = path.read_text(errors="surrogateescape")
    fast = parse_nvidia_smi_xml(text)
    assert fast.gpus or fast.errors
    assert fast == _pull_report(text, monkeypatch)


def test_a_cut_document_keeps_the_gpus_before_the_cut() -> None:
    text = XML_REPORTS[0].read_text()
    whole = parse_nvidia_smi_xml(text)
    cut = parse_nvidia_smi_xml(text[: text.rindex("</gpu>") + len("</gpu>")])
    assert [g.bus_id for g in cut.gpus] == [g.bus_id for g in whole.gpus]
    assert any(e.startswith("XML: ") for e in cut.errors)
