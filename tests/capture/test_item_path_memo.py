"""item_path remembers the stored path of ordinary sources (every host of a fleet names the same ones) and
gives the same answer as the plain check for every source; a hostile host's long names are never kept."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from fabricase import capture_records
from fabricase.capture_records import _item_path, item_path

SOURCES = st.one_of(
    st.text(max_size=40),
    st.builds(lambda s: "/" + s, st.text(max_size=40)),
    st.builds(lambda s: "cmd:" + s, st.text(max_size=20)),
    st.sampled_from(["/sys/class/net/eth0/statistics/rx_bytes", "cmd:nvidia-smi-xml", "/a/../etc/shadow",
                     "cmd:../x", "/x\ny", "/proc/interrupts"]),
)


@given(SOURCES, st.integers(0, 3), st.sampled_from(["file", "command", "stderr"]))
def test_the_remembered_answer_is_the_plain_one(source: str, snapshot: int, kind: str) -> None:
    assert item_path(source, snapshot, kind) == _item_path(source, snapshot, kind)
    assert item_path(source, snapshot, kind) == _item_path(source, snapshot, kind)  # asked again: remembered


def test_a_long_source_is_answered_but_not_kept() -> None:
    capture_records._remembered_item_path.cache_clear()
    long_name = "/sys/" + os.urandom(400).hex()
    assert item_path(long_name, 0, "file") == f"s0/fs{long_name}"
    assert capture_records._remembered_item_path.cache_info().currsize == 0
    assert item_path("/proc/interrupts", 1, "file") == "s1/fs/proc/interrupts"
    assert capture_records._remembered_item_path.cache_info().currsize == 1
