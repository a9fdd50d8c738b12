"""The fuzz corpus of bench_capture_fuzz.py: a small real-looking capture (build_capture), a consistent rewrite of
one of its items (rewrite_item), and the mutations that damage a copy of it in one random way each (mutate):
files deleted, cut, garbled or swapped for a directory, a FIFO or a symlink out of the capture; JSON of the wrong
type at every level; index entries that lie about the stream; host names with `..` or control characters;
hostile item contents consistent with the index. bench_capture_fuzz.py runs them; tests/capture and
tests/analysis use build_capture and rewrite_item directly.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import fleetgen  # noqa: E402

from fabricase.capturedir import (  # noqa: E402
    add_inputs,
    host_capture_from_stream,
    write_capture_meta,
    write_host,
    write_placements,
)
from fabricase.collectors import select_collectors  # noqa: E402
from fabricase.collectors.framing import FramedItem, parse_stream  # noqa: E402
from fabricase.collectors.plan import CapturePlan  # noqa: E402
from fabricase.models import HostStatus, Placement  # noqa: E402

__all__ = ["HOSTS", "NCCL_LOG", "build_capture", "mutate", "rewrite_item"]

HOSTS = ("gpu001", "gpu002", "gpu003")
NCCL_LOG = (
    "gpu001:4242:4242 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB\n"
    "gpu002:4243:4250 [1] NCCL WARN NET/IB : Got completion from peer 10.0.0.3<53281> with status=12 "
    "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.2 remoteGids::ffff:10.0.0.3 hca mlx5_1\n"
)


def build_capture(root: Path, seed: int = 1) -> Path:
    """A three-host capture (format 2): two InfiniBand ports, NVLink, `ethtool -S` and a kernel log per host,
    symbol errors on gpu002's mlx5_1 and an Xid 79 on gpu003, an NCCL log as an input and placements.json."""
    rng = random.Random(seed)
    plan = _plan()
    root.mkdir(parents=True)
    # Format 2 on purpose: the mutations edit index.json as JSON (format 3's binary index has its own
    # mutation test, tests/capture/test_index_format3.py).
    write_capture_meta(root, plan=plan, targets={"hosts": ",".join(HOSTS)}, hosts=list(HOSTS),
                       created_at="2026-11-30T00:00:00Z", version=2)
    for host in HOSTS:
        ports = []
        for p in range(2):
            counters = fleetgen._background(rng)
            if host == "gpu002" and p == 1:
                fleetgen._ib_fault("symbol-errors", counters)
            ports.append({"dev": f"mlx5_{p}", "counters": counters, "rate": "400 Gb/sec (4X NDR)"})
        log = "2026-11-30T00:00:00.000001+0000 host kernel: Linux version 6.8.0-45-generic\n"
        if host == "gpu003":
            log += ("2026-11-29T23:59:58.000001+0000 host kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, "
                    "name=python, Ch 00000008\n")
        raw = fleetgen._stream(ports, ({}, {}), log, fleetgen._roce_ports(rng, None, None))
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "fake"
        write_host(root, hc, raw, version=2)
    log = root.parent / f"{root.name}-slurm-1.out"
    log.write_text(NCCL_LOG)
    add_inputs(root, "nccl-log", [log])
    log.unlink()
    write_placements(root, [Placement(host=h, provider="static", topology=[f"switch:leaf-{i // 2}"])
                            for i, h in enumerate(HOSTS)])
    return root


def _plan() -> CapturePlan:
    return CapturePlan(collectors=tuple(select_collectors(["rdma", "ethtool", "nvidia", "kernel_log"])),
                       interval_s=fleetgen.INTERVAL_S)


def rewrite_item(root: Path, host: str, pick: Callable[[FramedItem], bool],
                 content: bytes | Callable[[bytes], bytes]) -> str:
    """Give the first item of `host` that `pick` accepts another content (or content(old)), consistently: the
    stream is re-framed and the index rewritten (offsets, sizes, sha256), as if the host had sent it. Returns
    the item's source."""
    hdir = root / "hosts" / host
    parsed = parse_stream((hdir / "stream.fc1").read_bytes())
    target = next(fi for fi in parsed.items if pick(fi))
    target.content = content(target.content) if callable(content) else content
    out = [b"@@FC1 BEGIN 1 1\n"]
    for n, mark in sorted(parsed.snapshots.items()):
        out.append(f"@@FC1 S {n} {mark.epoch_start} {mark.uptime_start}\n".encode())
        for fi in (fi for fi in parsed.items if fi.snapshot == n):
            rc = "-" if fi.rc is None else fi.rc
            out.append(f"@@FC1 I {fi.collector} {fi.kind} {n} {rc} {len(fi.content)} {int(fi.truncated)} - - "
                       f"{fi.source}\n".encode() + fi.content + b"\n")
        out.append(f"@@FC1 E {n} {mark.epoch_end} {mark.uptime_end}\n".encode())
    raw = b"".join(out) + b"@@FC1 END\n"
    meta = json.loads((hdir / "host.json").read_bytes())
    hc = host_capture_from_stream(host, parse_stream(raw), _plan())
    hc.status, hc.transport = HostStatus(meta["status"]), meta["transport"]
    version = json.loads((root / "capture.json").read_bytes())["format_version"]  # the capture's own format
    write_host(root, hc, raw, version=version)
    return target.source


# -- mutations ---------------------------------------------------------------------------------------------

_JSON_FILES = ("capture.json", "placements.json", "hosts/{h}/host.json", "hosts/{h}/index.json")
_HOSTILE: tuple[Any, ...] = (
    None, [], {}, "", "x", "../../../etc/passwd", "\x1b]0;owned\x07[/x]\r\x08", -1, 0, 1, -(2**63), 2**64,
    10**400, 1e308, -1e308, float("inf"), float("nan"), True, False, 3.5, "1", "0x10", [1, 2], {"a": 1},
)
_HOST_NAMES = ("..", "../gpu002", "gpu001/../gpu002", "", ".", "a\x1b[2Jb", "a\nb", "gpu\x00", "/etc", "x" * 300,
               "gpu001 ", "[/x]")


def _paths(doc: Any, at: tuple = ()) -> Iterator[tuple]:
    """Every JSON path in doc, the root included."""
    yield at
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*at, key))
    elif isinstance(doc, list):
        for n, value in enumerate(doc):
            yield from _paths(value, (*at, n))


def _set(doc: Any, at: tuple, value: Any) -> Any:
    if not at:
        return value
    parent = doc
    for key in at[:-1]:
        parent = parent[key]
    parent[at[-1]] = value
    return doc


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _json_value(root: Path, rel: str, rng: random.Random) -> str:
    doc = json.loads((root / rel).read_bytes())
    at = rng.choice(list(_paths(doc)))
    value = rng.choice(_HOSTILE)
    (root / rel).write_bytes(_dump(_set(doc, at, value)))
    return f"{rel} {list(at)[:4]} = {value!r:.40}"


def _json_key(root: Path, rel: str, rng: random.Random) -> str:
    """Drop a key, or add an unknown one, in some object of the document."""
    doc = json.loads((root / rel).read_bytes())
    objects = [at for at in _paths(doc) if isinstance(_get(doc, at), dict) and _get(doc, at)]
    if not objects:
        return _json_value(root, rel, rng)
    at = rng.choice(objects)
    obj = _get(doc, at)
    if rng.random() < 0.7:
        key = rng.choice(sorted(obj))
        del obj[key]
        what = f"without {key!r}"
    else:
        obj["unknown_" + str(rng.randrange(100))] = rng.choice(_HOSTILE)
        what = "with an unknown key"
    (root / rel).write_bytes(_dump(doc))
    return f"{rel} {list(at)[:4]} {what}"


def _get(doc: Any, at: tuple) -> Any:
    for key in at:
        doc = doc[key]
    return doc


def _index_item(root: Path, host: str, rng: random.Random) -> str:
    """Index entries that lie about the stream: offsets, sizes, digests, paths, duplicates."""
    rel = f"hosts/{host}/index.json"
    doc = json.loads((root / rel).read_bytes())
    items = doc["items"]
    n = rng.randrange(len(items))
    item = items[n]
    size = (root / f"hosts/{host}/stream.fc1").stat().st_size
    choice = rng.randrange(10)
    if choice == 0:
        item["offset"] = size + rng.randrange(1, 10_000)
    elif choice == 1:
        item["offset"] = -rng.randrange(1, 1000)
    elif choice == 2:
        item["bytes"] = rng.choice((-1, size, 2**40, 10**30))
    elif choice == 3:
        item["sha256"] = ("0" if item["sha256"][0] != "0" else "1") + item["sha256"][1:]
    elif choice == 4:
        items.insert(rng.randrange(len(items) + 1), dict(item))
    elif choice == 5:
        item["path"] = rng.choice(("../../capture.json", "/etc/passwd", "s0/fs/../../../host.json", "index.json",
                                   "", "stream.fc1/x"))
    elif choice == 6:
        item["offset"] = None
    elif choice == 7:
        item["kind"] = rng.choice(("dir", "", None, 7))
    elif choice == 8:
        item["source"] = rng.choice(("", "../x", "cmd:../x", "/a\nb", None, "cmd:"))
    else:
        item["snapshot"] = rng.choice((-1, 10**12, "0", None, 1.5))
    (root / rel).write_bytes(_dump(doc))
    return f"{rel} item {n}: lie #{choice}"


def _raw(root: Path, rel: str, rng: random.Random) -> str:
    """Byte-level damage to any file."""
    path = root / rel
    data = path.read_bytes()
    choice = rng.randrange(7)
    if choice == 0:
        path.unlink()
        return f"{rel} deleted"
    if choice == 1:
        path.write_bytes(data[: rng.randrange(len(data) + 1)])
        return f"{rel} truncated"
    if choice == 2:
        damaged = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            if damaged:
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path.write_bytes(bytes(damaged))
        return f"{rel} corrupted"
    if choice == 3:
        at = rng.randrange(len(data) + 1)
        path.write_bytes(data[:at] + rng.choice((b"\xff\xfe", b"\xc3", b"\x00", b"\xed\xa0\x80")) + data[at:])
        return f"{rel} with non-UTF-8 bytes"
    if choice == 4:
        path.unlink()
        path.mkdir()
        return f"{rel} replaced by a directory"
    if choice == 5:
        depth = rng.choice((10_000, 100_000))
        path.write_bytes(rng.choice((b"[", b'{"a":')) * depth)
        return f"{rel} nested {depth} deep"
    path.write_bytes(b"")
    return f"{rel} emptied"


def _special(root: Path, rel: str, rng: random.Random, outside: Path) -> str:
    """Files that are not plain files inside the capture: symlinks out of it, FIFOs."""
    path = root / rel
    choice = rng.randrange(3)
    if choice == 0:
        copy = outside / f"{rng.randrange(10**9)}-{path.name}"
        if path.is_file():
            shutil.copyfile(path, copy)  # the same bytes, but outside the capture: still refused
        path.unlink()
        path.symlink_to(copy)
        return f"{rel} is a symlink out of the capture"
    if choice == 1:
        path.unlink()
        path.symlink_to("/dev/zero")
        return f"{rel} is a symlink to /dev/zero"
    path.unlink()
    os.mkfifo(path)
    return f"{rel} is a FIFO"


def _host_folder(root: Path, host: str, rng: random.Random, outside: Path) -> str:
    hdir = root / "hosts" / host
    choice = rng.randrange(4)
    if choice == 0:
        shutil.rmtree(hdir)
        return f"hosts/{host} deleted"
    if choice == 1:
        moved = outside / f"{rng.randrange(10**9)}-{host}"
        shutil.move(str(hdir), moved)
        hdir.symlink_to(moved)
        return f"hosts/{host} is a symlink out of the capture"
    if choice == 2:
        shutil.rmtree(hdir)
        hdir.write_bytes(b"{}")
        return f"hosts/{host} is a file"
    meta = json.loads((hdir / "host.json").read_bytes())
    meta["host"] = rng.choice([h for h in HOSTS if h != host] + list(_HOST_NAMES))
    (hdir / "host.json").write_bytes(_dump(meta))
    return f"hosts/{host}/host.json names {meta['host']!r:.30}"


def _host_names(root: Path, rng: random.Random) -> str:
    """capture.json lists a host under a name that cannot name a folder, or twice."""
    doc = json.loads((root / "capture.json").read_bytes())
    n = rng.randrange(len(doc["hosts"]))
    if rng.random() < 0.2:
        doc["hosts"].append(doc["hosts"][n])
        what = f"{doc['hosts'][n]} twice"
    else:
        name = rng.choice(_HOST_NAMES)
        old, doc["hosts"][n] = doc["hosts"][n], name
        if name and "/" not in name and "\x00" not in name and name not in (".", "..") and len(name) < 255:
            os.rename(root / "hosts" / old, root / "hosts" / name)  # the folder carries the hostile name too
        what = f"{name!r:.30}"
    (root / "capture.json").write_bytes(_dump(doc))
    return f"capture.json hosts: {what}"


_CONTENTS: tuple[bytes, ...] = (
    b"9" * 5000 + b"\n", b"9" * 4000 + b"\n", b"-5\n", b"1e308\n", b"nan\n", b"inf\n", b"18446744073709551616\n",
    b"", b"\x00" * 64, bytes(range(256)), b"\xff\xfe\xfd\n", b"A" * 20_000, b" " * 20_000, b"<a>" * 2_000,
    b"[/x]\x1b]0;owned\x07\x1b[2J\r\x08\n", b"0x" + b"f" * 100 + b"\n",
)


def _content(root: Path, host: str, rng: random.Random) -> str:
    """An item whose content is hostile but consistent with the index (the host sent it so): it reaches the
    parsers and rules, and only per-host isolation stands between it and the rest of the fleet."""
    parsed = parse_stream((root / "hosts" / host / "stream.fc1").read_bytes())
    target = rng.choice([fi for fi in parsed.items if fi.kind != "stderr"])
    choice = rng.randrange(4)
    if choice == 0:
        content, what = rng.choice(_CONTENTS), "hostile"
    elif choice == 1:
        digits = rng.choice((b"9" * 5000, b"9" * 400, b"-1", b"1" + b"0" * 30))
        content, what = re.sub(rb"\b\d+\b", digits, target.content), "numbers replaced"
    elif choice == 2:
        content, what = target.content[: rng.randrange(len(target.content) + 1)], "cut"
    else:
        data = bytearray(target.content)
        for _ in range(rng.randrange(1, 16)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        content, what = bytes(data), "garbled"
    source = rewrite_item(root, host, lambda fi: fi is target or (fi.source, fi.snapshot, fi.kind) == (
        target.source, target.snapshot, target.kind), content)
    return f"hosts/{host} item {source} (snapshot {target.snapshot}) {what}"


def _input_content(root: Path, rng: random.Random) -> str:
    """The NCCL log given as an input, hostile but consistent with capture.json (size and sha256)."""
    import hashlib

    meta = json.loads((root / "capture.json").read_bytes())
    record = meta["inputs"][0]
    content = rng.choice(_CONTENTS) if rng.random() < 0.5 else re.sub(
        rb"\b\d+\b", rng.choice((b"9" * 5000, b"-1", b"1" + b"0" * 40)), NCCL_LOG.encode())
    (root / record["path"]).write_bytes(content)
    record.update(bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
    (root / "capture.json").write_bytes(_dump(meta))
    return f"{record['path']} hostile ({content[:12]!r})"


def mutate(root: Path, rng: random.Random, outside: Path) -> str:
    """Damage the capture at `root` in one random way; say how."""
    host = rng.choice(HOSTS)
    choice = rng.random()
    if choice < 0.13:
        return _content(root, host, rng)
    if choice < 0.15:
        return _input_content(root, rng)
    if choice < 0.40:
        rel = rng.choice(_JSON_FILES).format(h=host)
        return (_json_value if rng.random() < 0.75 else _json_key)(root, rel, rng)
    if choice < 0.52:
        return _index_item(root, host, rng)
    if choice < 0.78:
        return _raw(root, rng.choice(_files(root)), rng)
    if choice < 0.87:
        return _special(root, rng.choice(_files(root)), rng, outside)
    if choice < 0.94:
        return _host_folder(root, host, rng, outside)
    return _host_names(root, rng)
