import os
from collections import Counter
from pathlib import Path

import pytest

from fabricase.parsers.kernel_log import KernelEvent, parse_kernel_line, parse_kernel_log

KLOG = Path(__file__).parents[1] / "fixtures/real/kernel-log"
SHARED = Path(os.environ.get("FABRICASE_SHARED_FIXTURES", Path(__file__).parents[3] / "shared/fixtures/real"))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "2026-11-29T23:00:00.123456+0000 gpu001 kernel: mlx5_core 0000:3b:00.0 eth2: Link down",
            KernelEvent("2026-11-29T23:00:00.123456+0000", "mlx5_core 0000:3b:00.0 eth2: Link down", "link-down",
                        "0000:3b:00.0", "eth2"),
        ),
        (
            "2026-11-29T23:00:00,123456+00:00 e1000e: eth0 NIC Link is Down",
            KernelEvent("2026-11-29T23:00:00,123456+00:00", "e1000e: eth0 NIC Link is Down", "link-down", None, "eth0"),
        ),
        ("[   12.345] eth0: Link is Down", KernelEvent("12.345", "eth0: Link is Down", "link-down", None, "eth0")),
        (
            "Nov  3 23:00:00 gpu001 kernel: igb 0000:01:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex",
            KernelEvent("Nov  3 23:00:00", "igb 0000:01:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex",
                        "link-up", "0000:01:00.0", "eno1"),
        ),
        ("mlx4_en: ens1: Link Down", KernelEvent(None, "mlx4_en: ens1: Link Down", "link-down", None, "ens1")),
        (
            "2026-11-29T23:00:01.000001+0000 gpu001 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen"
            " off the bus.",
            KernelEvent("2026-11-29T23:00:01.000001+0000", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen"
                        " off the bus.", "nvidia-xid", "0000:3b:00", None, 79),
        ),
        (
            "6,3964,206764307,-;pcieport 0000:00:1c.1: AER: Corrected error received: 0000:00:1c.1",
            KernelEvent("206.764307", "pcieport 0000:00:1c.1: AER: Corrected error received: 0000:00:1c.1",
                        "pcie-aer", "0000:00:1c.1"),
        ),
        # not network links, not errors, not classified
        ("[    2.875476] ata3: SATA link down (SStatus 0 SControl 300)", None),
        ("[    5.000000] pcieport 0000:00:1c.0: pciehp: Slot(1): Link Up", None),
        ("[    1.000000] pcieport 0000:00:1c.0: AER: enabled with IRQ 122", None),
        ("[    9.000000] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready", None),
        ("[    9.000000] acpi PNP0A08:29: _OSC: platform does not support [SHPCHotplug AER DPC]", None),
        ("", None),
    ],
)  # fmt: skip
def test_parse_kernel_line(line, expected):
    assert parse_kernel_line(line) == expected


def test_parse_kernel_log_counts_lines_and_keeps_classified():
    text = "-- Logs begin at Sun 2026-11-29 --\n[ 1.0] boring\n[ 2.0] eth3: Link is Down\n[ 3.0] eth3: Link is Up\n"
    log = parse_kernel_log(text)
    assert log.total_lines == 4
    assert [(e.kind, e.interface, e.line) for e in log] == [("link-down", "eth3", 3), ("link-up", "eth3", 4)]
    assert len(log) == 2 and log[0].timestamp == "2.0"
    assert log.of_kind("link-up") == [log[1]]
    assert parse_kernel_log(None).total_lines == 0


# (file, total lines, {kind: count}) for every copied real sample
REAL_SAMPLES = [
    ("nvsentinel-tests/nvrm-xid-lines.txt", 19, {"nvidia-xid": 16}),
    ("nvsentinel-tests/nvswitch-sxid-lines.txt", 8, {"nvswitch-sxid": 8}),
    ("nvsentinel-tests/mlx5_core-lines.txt", 8, {"nic-fatal": 3, "nic-warning": 5}),
    ("issues/nvrm-xid-144-145-149-94_gpud-pr-1160-1174.txt", 6, {"nvidia-xid": 6}),
    ("issues/nvrm-xid-145-149-45_gb200_open-gpu-kernel-modules-issue-1150.txt", 7, {"nvidia-xid": 7}),
    ("issues/pcie-aer_correctable_new-format_dasharo-coreboot-pr815.txt", 14, {"pcie-aer": 2}),
    ("issues/pcie-aer_corrected_older-format_archfan-coreboot-issue2.txt", 12, {"pcie-aer": 3}),
    ("leptonai-gpud/dmesg-with-xid-119.log", 43, {"nvidia-xid": 5}),
    ("leptonai-gpud/kmsg.1.log", 47, {}),
    ("leptonai-gpud/pstore-dmesg.txt", 415, {"link-up": 1, "nic-warning": 1}),
    ("leptonai-gpud/dmesg.decode.iso.log.1.lines2250-2362", 113, {"link-down": 3, "link-up": 2}),
]


@pytest.mark.parametrize(("name", "lines", "kinds"), REAL_SAMPLES)
def test_real_kernel_logs(name, lines, kinds):
    log = parse_kernel_log((KLOG / name).read_text())
    assert log.total_lines == lines
    counted: dict[str, int] = {}
    for event in log:
        counted[event.kind] = counted.get(event.kind, 0) + 1
    assert counted == kinds


def test_real_xid_details():
    log = parse_kernel_log(
        (KLOG / "issues/nvrm-xid-145-149-45_gb200_open-gpu-kernel-modules-issue-1150.txt").read_text()
    )
    assert [(e.device, e.code) for e in log][:2] == [("0000:dc:00", 45), ("0000:ed:00", 45)]
    # "kernel: " syslog prefix stripped, no timestamp invented
    assert log[0].timestamp is None and log[0].message.startswith("NVRM: Xid")
    xid119 = parse_kernel_log((KLOG / "leptonai-gpud/dmesg-with-xid-119.log").read_text())[0]
    assert (xid119.timestamp, xid119.device, xid119.code) == ("Sun Feb 23 16:24:18 2025", "0000:9b:00", 119)


def test_real_link_events_keep_device_and_interface():
    log = parse_kernel_log((KLOG / "leptonai-gpud/dmesg.decode.iso.log.1.lines2250-2362").read_text())
    assert [(e.kind, e.device, e.interface) for e in log] == [
        ("link-down", "0000:9d:00.1", "enp157s0f1np1"),
        ("link-down", "0000:9d:00.0", "enp157s0f0np0"),
        ("link-down", "0000:1b:00.1", "enp27s0f1np1"),
        ("link-up", "0000:1b:00.0", "bootnet"),
        ("link-up", "0000:02:00.0", "eno8303"),
    ]
    assert log[0].timestamp == "2025-01-17T15:37:28,650514+00:00"


def test_real_aer_source_device():
    log = parse_kernel_log((KLOG / "issues/pcie-aer_correctable_new-format_dasharo-coreboot-pr815.txt").read_text())
    assert {e.device for e in log} == {"0000:06:00.0"}  # the device that sent the error, not the root port
    assert log[0].timestamp == "Fri Aug 29 20:09:52 2025"


def test_every_real_kernel_log_parses():
    """Every real kernel-log capture in tests/fixtures/real: counted lines, no invented messages."""
    files = [p for p in sorted(KLOG.rglob("*")) if p.is_file() and p.name != "SOURCE.txt"]
    files += sorted((KLOG.parent / "ml-engineering-excerpts").glob("dmesg_*"))
    assert len(files) >= 16
    for path in files:
        text = path.read_text(errors="replace")
        log = parse_kernel_log(text)
        assert log.total_lines == len(text.splitlines())
        for event in log:
            assert event.message in text


def test_real_whole_dmesg_files():
    """leptonai's full dmesg captures: 629 Xid 13 and 7 Xid 43 on one GPU; three NIC ports going down."""
    xids = parse_kernel_log((KLOG / "leptonai-gpud/dmesg.decode.iso.log.0").read_text())
    assert Counter((e.code, e.device) for e in xids if e.kind == "nvidia-xid") == {
        (13, "0000:38:00"): 629, (43, "0000:38:00"): 7}
    links = parse_kernel_log((KLOG / "leptonai-gpud/dmesg.decode.iso.log.1").read_text())
    downs = [(e.interface, e.device) for e in links if e.kind == "link-down"]
    assert downs == [("enp157s0f1np1", "0000:9d:00.1"), ("enp157s0f0np0", "0000:9d:00.0"),
                     ("enp27s0f1np1", "0000:1b:00.1")]
