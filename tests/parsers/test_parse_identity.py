from pathlib import Path

import pytest

from fabricase.parsers.identity import parse_os_release, parse_uname

REAL = Path(__file__).parents[1] / "fixtures/real/local-vm_procfs-sysfs-net"


def test_real_os_release():
    fields = parse_os_release((REAL / "etc/os-release").read_text())
    assert fields["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert fields["ID"] == "debian"
    assert fields["VERSION_ID"] == "12"


def test_os_release_quoting_comments_and_junk():
    text = (
        '# comment\n\nNAME=\'Rocky Linux\'\nVERSION="9.3 (Blue \\"Onyx\\")"\nID=rocky\nnot a line\n'
        'BROKEN="unterminated\n1BAD=x\n'
    )
    assert parse_os_release(text) == {"NAME": "Rocky Linux", "VERSION": '9.3 (Blue "Onyx")', "ID": "rocky"}
    assert parse_os_release(None) == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Linux vm 6.18.44-fc-v857 #1 SMP PREEMPT_DYNAMIC @0 x86_64 GNU/Linux\n",
            ("Linux", "vm", "6.18.44-fc-v857", "#1 SMP PREEMPT_DYNAMIC @0", "x86_64", "GNU/Linux"),
        ),
        (
            "Linux gpu001 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024 x86_64 x86_64 x86_64 "
            "GNU/Linux",
            (
                "Linux", "gpu001", "5.15.0-105-generic", "#115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024",
                "x86_64", "GNU/Linux",
            ),
        ),
        (
            "Linux gb200-n1 6.8.0-1013-nvidia-64k #14-Ubuntu SMP PREEMPT_DYNAMIC Thu Sep 5 2024 aarch64 aarch64 "
            "aarch64 GNU/Linux",
            (
                "Linux", "gb200-n1", "6.8.0-1013-nvidia-64k", "#14-Ubuntu SMP PREEMPT_DYNAMIC Thu Sep 5 2024",
                "aarch64", "GNU/Linux",
            ),
        ),
        ("Linux host", ("Linux", "host", None, None, None, None)),
        ("", (None, None, None, None, None, None)),
    ],
)  # fmt: skip
def test_parse_uname(text, expected):
    names = ("kernel_name", "nodename", "kernel_release", "kernel_version", "machine", "operating_system")
    assert parse_uname(text) == dict(zip(names, expected, strict=True))


def test_real_uname():
    assert parse_uname((REAL / "uname-a.txt").read_text())["kernel_release"] == "6.18.44-fc-v857"
