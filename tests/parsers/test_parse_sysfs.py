from pathlib import Path

import pytest

from fabricase.parsers.sysfs import parse_sysfs_int, parse_sysfs_speed, parse_sysfs_str

NET = Path(__file__).parents[1] / "fixtures/real/local-vm_procfs-sysfs-net/sys/class/net"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12345\n", 12345),
        ("0\n", 0),
        ("-1\n", -1),
        ("  42  ", 42),
        ("18446744073709551615\n", 2**64 - 1),
        ("0x1003\n", 0x1003),
        ("", None),
        ("\n", None),
        (None, None),
        ("up\n", None),
        ("12 34", None),
        ("1.5", None),
        ("١٢", None),  # Arabic-Indic digits: int() would accept them, no kernel writes them
        ("0x", None),
    ],
)
def test_parse_sysfs_int(text, expected):
    assert parse_sysfs_int(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("up\n", "up"), ("  Dell Inc.  \n", "Dell Inc."), ("", None), ("\n\n", None), (None, None)],
)
def test_parse_sysfs_str(text, expected):
    assert parse_sysfs_str(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100000\n", 100000), ("-1\n", None), ("65535\n", None), ("4294967295\n", None), ("", None), ("0\n", 0)],
)
def test_parse_sysfs_speed(text, expected):
    assert parse_sysfs_speed(text) == expected


def test_real_sysfs_net_files():
    eth0 = NET / "eth0"
    assert parse_sysfs_speed((eth0 / "speed").read_text()) is None  # virtio reports -1
    assert parse_sysfs_int((eth0 / "mtu").read_text()) == 1400
    assert parse_sysfs_str((eth0 / "operstate").read_text()) == "up"
    assert parse_sysfs_int((eth0 / "carrier_changes").read_text()) == 2
    assert parse_sysfs_str((NET / "lo/operstate").read_text()) == "unknown"
    # reads the kernel refused (EINVAL) are stored as empty files: not exposed, never 0
    assert parse_sysfs_int((NET / "ifb0/speed").read_text()) is None
    assert parse_sysfs_int((NET / "ifb0/carrier").read_text()) is None
    for counter in sorted((eth0 / "statistics").iterdir()):
        assert isinstance(parse_sysfs_int(counter.read_text()), int), counter.name
