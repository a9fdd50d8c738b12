"""An Azure VM's physical host name travels from the Hyper-V KVP pool (binary) through the capture script, read
verbatim, to the host's identity."""

from __future__ import annotations

from fabricase.capturedir import load_capture
from fabricase.parsers.identity import host_identity


def _record(key: str, value: str) -> bytes:
    return key.encode().ljust(512, b"\0") + value.encode().ljust(2048, b"\0")


def test_physical_host_name_is_read_from_the_kvp_pool(run, tmp_path, host_tree):
    pool = host_tree / "var/lib/hyperv/.kvp_pool_3"
    pool.parent.mkdir(parents=True)
    pool.write_bytes(_record("VirtualMachineName", "nd-2") + _record("PhysicalHostName", "GGBB90904478"))
    dmi = host_tree / "sys/class/dmi/id"
    dmi.mkdir(parents=True, exist_ok=True)
    (dmi / "sys_vendor").write_text("Microsoft Corporation\n")
    out = tmp_path / "cap"
    run("collect", "--hosts", "localhost", "-o", str(out), "--interval", "0", "--root", str(host_tree))
    [hc] = load_capture(out).hosts
    item = hc.item("/var/lib/hyperv/.kvp_pool_3")
    assert item is not None and item.bytes == 2 * 2560  # every NUL byte kept
    identity = host_identity(hc)
    assert identity["physical_host_name"] == "GGBB90904478" and identity["sys_vendor"] == "Microsoft Corporation"


def test_no_pool_no_physical_host(run, tmp_path, host_tree):
    out = tmp_path / "cap"
    run("collect", "--hosts", "localhost", "-o", str(out), "--interval", "0", "--root", str(host_tree))
    [hc] = load_capture(out).hosts
    assert host_identity(hc)["physical_host_name"] is None
