import hashlib
from pathlib import Path

import pytest

from fabricase.errors import CaptureError
from fabricase.models import CaptureItem, HostCapture, HostStatus
from fabricase.parsers.identity import DMI_FIELDS, host_identity

REAL = Path(__file__).parents[1] / "fixtures/real/local-vm_procfs-sysfs-net"


def host_with(tmp_path: Path, files: dict[str, str]) -> HostCapture:
    items = []
    for source, content in sorted(files.items()):
        path = f"s0/cmd/{source[4:]}" if source.startswith("cmd:") else f"s0/fs{source}"
        kind = "command" if source.startswith("cmd:") else "file"
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
        data = content.encode()
        items.append(CaptureItem(source, 0, kind, "identity", path, len(data), hashlib.sha256(data).hexdigest()))
    return HostCapture("gpu001", HostStatus.OK, "fake", items=items, root=tmp_path)


def test_full_identity(tmp_path):
    files = {
        "/proc/sys/kernel/hostname": "gpu001\n",
        "/proc/sys/kernel/osrelease": "6.8.0-1013-nvidia\n",
        "/proc/version": "Linux version 6.8.0-1013-nvidia (buildd@lcy02) #14-Ubuntu SMP\n",
        "/etc/os-release": 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n',
        "cmd:uname": "Linux gpu001 6.8.0-1013-nvidia #14-Ubuntu SMP Thu Sep 5 2024 x86_64 x86_64 x86_64 GNU/Linux\n",
        "/sys/class/dmi/id/sys_vendor": "Dell Inc.\n",
        "/sys/class/dmi/id/product_name": "PowerEdge XE9680\n",
        "/sys/class/dmi/id/board_asset_tag": "To Be Filled By O.E.M.\n",
        "/sys/class/dmi/id/bios_version": "1.6.10\n",
    }
    identity = host_identity(host_with(tmp_path, files))
    assert identity == {
        "host": "gpu001",
        "hostname": "gpu001",
        "kernel": "6.8.0-1013-nvidia",
        "kernel_version": "Linux version 6.8.0-1013-nvidia (buildd@lcy02) #14-Ubuntu SMP",
        "machine": "x86_64",
        "os": "Ubuntu 22.04.4 LTS",
        "os_id": "ubuntu",
        "os_version_id": "22.04",
        "sys_vendor": "Dell Inc.",
        "product_name": "PowerEdge XE9680",
        "product_version": None,
        "board_vendor": None,
        "board_name": None,
        "board_asset_tag": "To Be Filled By O.E.M.",  # verbatim, placeholders included
        "bios_vendor": None,
        "bios_version": "1.6.10",
        "chassis_asset_tag": None,
        "physical_host_name": None,  # only an Azure VM's Hyper-V KVP pool names it
    }


def test_identity_falls_back_to_uname_and_real_os_release(tmp_path):
    files = {
        "cmd:uname": (REAL / "uname-a.txt").read_text(),
        "/etc/os-release": (REAL / "etc/os-release").read_text(),
    }
    identity = host_identity(host_with(tmp_path, files))
    assert (identity["hostname"], identity["kernel"], identity["os"]) == (
        "vm",
        "6.18.44-fc-v857",
        "Debian GNU/Linux 12 (bookworm)",
    )


def test_identity_of_an_empty_capture_is_all_none(tmp_path):
    identity = host_identity(host_with(tmp_path, {}))
    assert identity["host"] == "gpu001"
    assert all(identity[k] is None for k in identity if k != "host")
    assert set(DMI_FIELDS) <= set(identity)


def test_os_name_without_pretty_name(tmp_path):
    identity = host_identity(host_with(tmp_path, {"/etc/os-release": "NAME=Rocky\nVERSION=9.3\n"}))
    assert identity["os"] == "Rocky 9.3"


def test_missing_item_file_is_a_capture_error(tmp_path):
    hc = host_with(tmp_path, {"/etc/os-release": "ID=x\n"})
    (tmp_path / hc.items[0].path).unlink()
    with pytest.raises(CaptureError, match="os-release") as info:
        host_identity(hc)
    assert info.value.where == "gpu001:s0/fs/etc/os-release"
