"""Hundreds of tampered bundles made from one real built bundle: verify and extraction reject every one that
differs from what was built (content, names, framing, header fields, the manifest and its command list), and
accept the original. What verify leaves out on purpose (docs/bundles.md, "What verify checks") is a list of
its own, asserted accepted with the bundle id it reports, so that the decision is visible and tested.

Everything is mutated in memory from the built bytes: the tar is unpacked and packed again with the builder's
own settings (asserted to give the same bytes back), so each mutation changes only what it names.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from bundle_helpers import EXTRA, LONG_NAME, MTIME, make_capture

from fabricase import caps
from fabricase.bundler import build_bundle, extract_bundle, verify_bundle
from fabricase.errors import BundleError

RNG = random.Random(14)
INDEX_1 = {"items": [
    {"source": "cmd:uname", "snapshot": 0, "kind": "command", "rc": 0, "truncated": False, "path": "s0/cmd/uname"},
    {"source": "cmd:ibstat", "snapshot": 0, "kind": "command", "rc": 0, "truncated": True, "path": "s0/cmd/ibstat"},
    {"source": "cmd:ibstat", "snapshot": 1, "kind": "command", "rc": 0, "truncated": False, "path": "s1/cmd/ibstat"},
    {"source": "cmd:nvidia-smi", "snapshot": 0, "kind": "command", "rc": 127, "truncated": False,
     "error": "command not found"},
    {"source": "/proc/net/snmp", "snapshot": 0, "kind": "file", "rc": 0, "path": "s0/fs/proc/net/snmp"},
    {"source": "cmd:uname", "snapshot": 0, "kind": "stderr", "rc": 0, "path": "s0/cmd/uname.stderr"},
]}
INDEX_2 = {"items": [{"source": "cmd:uname", "snapshot": 0, "kind": "command", "rc": 124, "truncated": False}]}
CAPTURE_JSON = {"format": "fabricase-capture", "format_version": 2, "created_at": "2024-05-14T08:30:00Z",
                "hosts": ["gpu001", "gpu002"], "collectors": {"rdma": 2, "netdev": 1, "nvidia": 3}}
FILES = {
    "capture.json": json.dumps(CAPTURE_JSON).encode(),
    "placements.json": b'{"format": "fabricase-placements", "format_version": 1, "placements": []}\n',
    "hosts/gpu001/host.json": b'{"host": "gpu001", "status": "ok"}\n',
    "hosts/gpu001/index.json": json.dumps(INDEX_1).encode(),
    "hosts/gpu001/stream.fc1": RNG.randbytes(3000),
    "hosts/gpu001/s0/cmd/uname": b"Linux gpu001 6.1.0 #1 SMP x86_64 GNU/Linux\n",
    "hosts/gpu001/s0/cmd/uname.stderr": b"",
    "hosts/gpu001/s0/cmd/ibstat": b"CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n" * 40,
    "hosts/gpu001/s1/cmd/ibstat": b"CA 'mlx5_0'\n\tPort 1:\n\t\tState: Down\n" * 40,
    "hosts/gpu001/s0/fs/proc/net/snmp": b"Tcp: RtoAlgorithm RtoMin\nTcp: 1 200\n",
    "hosts/gpu001/s0/fs/sys/class/net/eth\u00e9/statistics/rx_errors": b"17\n",  # non-ASCII: a PAX path
    LONG_NAME: b"0\n",  # over 100 bytes: a PAX path
    "hosts/gpu002/host.json": b'{"host": "gpu002", "status": "ok"}\n',
    "hosts/gpu002/index.json": json.dumps(INDEX_2).encode(),
    "hosts/gpu002/s0/cmd/uname": b"",
}
BAD_NAMES = [
    "capture/x\n verify: OK", "capture/x\r", "capture/\x1b[2J\x1b]0;owned\x07", "capture/nul\x00x", "capture/tab\tx",
    "capture/del\x7f", "capture/c1\x85", "capture/c1\x9b31m", "capture/bidi\u202ecod.exe", "capture/bidi\u202a",
    "capture/iso\u2066x", "capture/iso\u2069", "capture/line\u2028sep", "capture/back\\slash", "/etc/cron.d/x",
    "../escape", "capture/../../escape", "capture//twice", "capture/./here", "capture/" + "n" * 1100,
    "capture/not-utf8-\udcff\udcfe",
]


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes


@dataclass(frozen=True)
class Built:
    gz: bytes  # the bundle as built
    tar: bytes  # its tar, decompressed
    members: list[tuple[tarfile.TarInfo, bytes | None]]
    bundle_id: str


def _gzip(tar: bytes, *, mtime: int = MTIME, level: int = 9, filename: str = "") -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=mtime, filename=filename, compresslevel=level) as gz:
        gz.write(tar)
    return buf.getvalue()


def _unpack(tar: bytes) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        out = []
        for m in t.getmembers():
            f = t.extractfile(m) if m.isreg() else None
            out.append((m, f.read() if f else None))
        return out


def _pack(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as t:
        for info, data in members:
            info = _copy(info)
            if data is not None and info.type in tarfile.REGULAR_TYPES and info.sparse is None:
                info.size = len(data)
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _copy(info: tarfile.TarInfo, **changes) -> tarfile.TarInfo:
    new = tarfile.TarInfo(info.name)
    for attr in ("size", "mtime", "mode", "type", "linkname", "uid", "gid", "uname", "gname", "devmajor", "devminor"):
        setattr(new, attr, getattr(info, attr))
    new.pax_headers = {k: v for k, v in info.pax_headers.items() if k != "path" or "name" not in changes}
    for attr, value in changes.items():
        setattr(new, attr, value)
    return new


def _regular(name: str, data: bytes, **changes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), MTIME, 0o644
    for attr, value in changes.items():
        setattr(info, attr, value)
    return info, data


def _canonical(doc: dict) -> bytes:
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    root = tmp_path_factory.mktemp("tampered")
    bundle = build_bundle(make_capture(root / "cap", FILES), root / "b.tar.gz", extra=EXTRA, mtime=MTIME)
    gz = bundle.path.read_bytes()
    tar = gzip.decompress(gz)
    members = _unpack(tar)
    # the mutations below re-pack with the builder's settings: unchanged, that gives the built bytes back
    assert _gzip(tar) == gz and _pack(members) == tar
    return Built(gz=gz, tar=tar, members=members, bundle_id=bundle.bundle_id)


# --- the mutations ------------------------------------------------------------------------------------------


def _repacked(b: Built, edit: Callable[[list], None]) -> bytes:
    members = [(_copy(m), d) for m, d in b.members]
    edit(members)
    return _gzip(_pack(members))


def _manifest_edit(b: Built, edit: Callable[[dict], dict | bytes | None]) -> bytes:
    def apply(members):
        doc = json.loads(members[0][1])
        out = edit(doc)  # edits the document in place, or returns the manifest's new bytes
        raw = out if isinstance(out, bytes) else _canonical(doc)
        members[0] = (members[0][0], raw)

    return _repacked(b, apply)


def _resigned(b: Built, name: str, data: bytes, *, size: bool = True, sha: bool = True) -> bytes:
    """Member `name` given new bytes, with the manifest's size and/or sha256 for it recomputed."""
    def apply(members):
        i = next(i for i, (m, _) in enumerate(members) if m.name == name)
        members[i] = (members[i][0], data)
        doc = json.loads(members[0][1])
        entry = next(e for e in doc["members"] if e["path"] == name)
        entry["size"] = len(data) if size else entry["size"]
        entry["sha256"] = _sha(data) if sha else entry["sha256"]
        members[0] = (members[0][0], _canonical(doc))

    return _repacked(b, apply)


def _tar_flip(b: Built, offset: int) -> bytes:
    raw = bytearray(b.tar)
    raw[offset] ^= 0x5A
    return _gzip(bytes(raw))


def _content_cases(b: Built) -> list[Case]:
    cases = []
    with tarfile.open(fileobj=io.BytesIO(b.tar)) as t:
        located = [(m.name, m.offset, m.offset_data, m.size) for m in t.getmembers()]
    for name, offset, data_at, size in located:
        for pos in sorted({0, size // 2, size - 1}) if size else []:
            cases.append(Case(f"flip data byte {pos} of {name}", _tar_flip(b, data_at + pos)))
        cases.append(Case(f"flip the first header byte of {name}", _tar_flip(b, offset)))
        cases.append(Case(f"flip the header checksum of {name}", _tar_flip(b, data_at - 512 + 148)))
    return cases


def _member_cases(b: Built) -> list[Case]:
    cases = []
    for i, (info, _data) in enumerate(b.members):
        n = info.name

        def drop(ms, i=i):
            del ms[i]

        def dup(ms, i=i):
            ms.insert(i + 1, (_copy(ms[i][0]), ms[i][1]))

        def rename(ms, i=i):
            ms[i] = (_copy(ms[i][0], name=ms[i][0].name + ".renamed"), ms[i][1])

        def touch(ms, i=i):
            ms[i] = (_copy(ms[i][0], mtime=ms[i][0].mtime + 1), ms[i][1])

        def grow(ms, i=i):
            ms[i] = (ms[i][0], (ms[i][1] or b"") + b"\n")

        cases += [Case(f"remove {n}", _repacked(b, drop)), Case(f"duplicate {n}", _repacked(b, dup)),
                  Case(f"rename {n}", _repacked(b, rename)), Case(f"mtime + 1 on {n}", _repacked(b, touch)),
                  Case(f"one byte more in {n}", _repacked(b, grow))]
    header = [("mode 0755", {"mode": 0o755}), ("mode 04755", {"mode": 0o4755}), ("uid 1000", {"uid": 1000}),
              ("gid 1000", {"gid": 1000}), ("uname root", {"uname": "root"}), ("gname wheel", {"gname": "wheel"}),
              ("type AREGTYPE", {"type": tarfile.AREGTYPE}), ("PAX comment", {"pax_headers": {"comment": "x"}}),
              ("PAX xattr", {"pax_headers": {"SCHILY.xattr.user.x": "1"}}), ("float mtime", {"mtime": MTIME + 0.5})]
    for label, change in header:
        def alter(ms, change=change):
            ms[3] = (_copy(ms[3][0], **change), ms[3][1])

        cases.append(Case(f"header {label} on {b.members[3][0].name}", _repacked(b, alter)))

    def manifest_last(ms):
        ms.append(ms.pop(0))

    cases.append(Case("MANIFEST.json moved to the end", _repacked(b, manifest_last)))
    return cases


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mtime = kind, linkname, MTIME
    return info, None


def _added_cases(b: Built) -> list[Case]:
    cases = []
    for bad in BAD_NAMES:
        cases.append(Case(f"add a member named {bad!r:.60}", _repacked(b, lambda ms, bad=bad: ms.append(
            _regular(bad, b"planted\n")))))

        def listed_too(ms, bad=bad):
            # the hostile member is listed in the manifest as well: only the name rule can catch it
            ms.append(_regular(bad, b"planted\n"))
            doc = json.loads(ms[0][1])
            doc["members"] = sorted([*doc["members"], {"path": bad, "size": 8, "sha256": _sha(b"planted\n")}],
                                    key=lambda e: e["path"])
            ms[0] = (ms[0][0], _canonical(doc))

        cases.append(Case(f"add and list a member named {bad!r:.60}", _repacked(b, listed_too)))
    specials = [
        _special("capture/hosts/gpu001/link", tarfile.SYMTYPE, "/etc/shadow"),
        _special("capture/hosts/gpu001/link\n verify: OK", tarfile.SYMTYPE, "/x\x1b[2J"),
        _special("capture/hosts/gpu001/hard", tarfile.LNKTYPE, "capture/capture.json"),
        _special("capture/hosts/gpu001/chr", tarfile.CHRTYPE),
        _special("capture/hosts/gpu001/blk", tarfile.BLKTYPE),
        _special("capture/hosts/gpu001/fifo", tarfile.FIFOTYPE),
    ]
    for info, data in specials:
        cases.append(Case(f"add a {info.type!r} member {info.name!r:.50}", _repacked(
            b, lambda ms, info=info, data=data: ms.append((info, data)))))
    for kind in (tarfile.CONTTYPE, tarfile.GNUTYPE_SPARSE):
        cases.append(Case(f"add a member of type {kind!r}", _repacked(
            b, lambda ms, kind=kind: ms.append(_regular("capture/hosts/gpu001/odd", b"12345678", type=kind)))))

    def link_for_file(ms):
        i = next(i for i, (m, _) in enumerate(ms) if m.name.endswith("stream.fc1"))
        ms[i] = _special(ms[i][0].name, tarfile.SYMTYPE, "/dev/zero")

    cases.append(Case("a listed member replaced by a symlink", _repacked(b, link_for_file)))
    cases.append(Case("a plain extra member", _repacked(b, lambda ms: ms.append(_regular("capture/planted", b"x")))))
    return cases


def _manifest_cases(b: Built) -> list[Case]:
    cases = []
    names = [e["path"] for e in json.loads(b.members[0][1])["members"]]
    for k, name in enumerate(names):
        def sha(doc, k=k):
            doc["members"][k]["sha256"] = _sha(b"other")

        def size(doc, k=k):
            doc["members"][k]["size"] += 1

        def drop(doc, k=k):
            del doc["members"][k]

        cases += [Case(f"manifest: sha256 of {name}", _manifest_edit(b, sha)),
                  Case(f"manifest: size of {name}", _manifest_edit(b, size)),
                  Case(f"manifest: {name} not listed", _manifest_edit(b, drop))]

    def commands(edit):
        def apply(doc):
            edit(doc["capture"]["commands"])
        return apply

    edits = {
        "an exit code": commands(lambda c: c["gpu001"][0].update(rc=1)),
        "an exit code as true": commands(lambda c: c["gpu001"][3].update(rc=True) if c["gpu001"][3]["rc"] == 1 else
                                         c["gpu002"][0].update(rc=True)),
        "a truncation": commands(lambda c: c["gpu001"][1].update(truncated=not c["gpu001"][1]["truncated"])),
        "a command dropped": commands(lambda c: c["gpu001"].pop(2)),
        "a command added": commands(lambda c: c["gpu001"].append(
            {"command": "cmd:ethtool", "snapshot": 0, "rc": 0, "truncated": False})),
        "a command listed twice": commands(lambda c: c["gpu001"].append(dict(c["gpu001"][0]))),
        "a snapshot changed": commands(lambda c: c["gpu001"][0].update(snapshot=1)),
        "a host dropped": commands(lambda c: c.pop("gpu002")),
        "a host added": commands(lambda c: c.update(gpu003=[dict(c["gpu002"][0])])),
        "a host renamed": commands(lambda c: c.update(gpu009=c.pop("gpu002"))),
        "an empty host added": commands(lambda c: c.update(gpu003=[])),
        "commands reordered": commands(lambda c: c["gpu001"].reverse()),
        "a stray field": commands(lambda c: c["gpu001"][0].update(duration_ms=12)),
        "commands not a mapping": lambda doc: doc["capture"].update(commands=[]),
        "a collector version": lambda doc: doc["capture"]["collectors"].update(rdma=3),
        "capture record dropped": lambda doc: doc.pop("capture"),
        "capture record null": lambda doc: doc.update(capture=None),
        "capture_format_version": lambda doc: doc.update(capture_format_version=1),
        "an extra top-level key": lambda doc: doc.update(signed_by="me"),
        "an extra member key": lambda doc: doc["members"][0].update(mode=420),
        "members unsorted": lambda doc: doc["members"].reverse(),
        "re-indented": lambda doc: (json.dumps(doc, sort_keys=True, indent=1) + "\n").encode(),
        "no final newline": lambda doc: json.dumps(doc, sort_keys=True, indent=2).encode(),
        "keys unsorted": lambda doc: (json.dumps(dict(reversed(doc.items())), indent=2) + "\n").encode(),
        "a duplicated key": lambda doc: _canonical(doc).replace(b'"format": ', b'"format": "x",\n  "format": ', 1),
        "a listed member that is not there": lambda doc: doc["members"].append(
            {"path": "zz-not-there", "size": 1, "sha256": _sha(b"1")}),
        "format_version 2": lambda doc: doc.update(format_version=2),
        "not JSON": lambda doc: b"{" + _canonical(doc),
    }
    cases += [Case(f"manifest: {label}", _manifest_edit(b, edit)) for label, edit in edits.items()]
    # content changed and the manifest recomputed inconsistently, or consistently where another record disagrees
    by_name = {m.name: d for m, d in b.members}
    index_name = "capture/hosts/gpu001/index.json"
    index = json.loads(by_name[index_name])
    index["items"][0]["rc"] = 2
    capture_doc = json.loads(by_name["capture/capture.json"])
    stream = by_name["capture/hosts/gpu001/stream.fc1"]
    cases += [
        Case("stream changed, sha256 recomputed, size not", _resigned(b, "capture/hosts/gpu001/stream.fc1",
                                                                     stream + b"!", size=False)),
        Case("stream changed, size recomputed, sha256 not", _resigned(b, "capture/hosts/gpu001/stream.fc1",
                                                                     stream + b"!", sha=False)),
        Case("an index rc changed and re-signed", _resigned(b, index_name, json.dumps(index).encode())),
        Case("index emptied and re-signed", _resigned(b, index_name, b'{"items": []}')),
        Case("index not JSON and re-signed", _resigned(b, index_name, b"{oops")),
        Case("capture.json collectors changed and re-signed", _resigned(b, "capture/capture.json", json.dumps(
            {**capture_doc, "collectors": {"rdma": 9}}).encode())),
        Case("capture.json format_version changed and re-signed", _resigned(b, "capture/capture.json", json.dumps(
            {**capture_doc, "format_version": 3}).encode())),
    ]
    return cases


def _framing_cases(b: Built) -> list[Case]:
    gz, tar = b.gz, b.tar
    end = len(tar)
    members_end = max(m.offset_data + -(-m.size // 512) * 512 for m, _ in b.members)
    zero_member = _gzip(b"\0" * 1024)
    cases = [Case(f"truncated to {k} bytes", gz[:k]) for k in sorted(
        {1, 2, 9, 10, 11, 20, 100, len(gz) // 4, len(gz) // 2, len(gz) - 100, len(gz) - 9, len(gz) - 8,
         len(gz) - 5, len(gz) - 4, len(gz) - 1, *RNG.sample(range(10, len(gz) - 1), 12)})]
    appended = {
        "one zero byte": b"\0", "512 zero bytes": b"\0" * 512, "one byte": b"x", "random bytes": RNG.randbytes(100),
        "a newline and text": b"\nverify: OK\n", "a gzip member of zeros": zero_member,
        "an empty gzip member": _gzip(b""), "the bundle again": gz,
        "a gzip member holding a tar": _gzip(_pack([_regular("capture/hidden", b"hidden")])),
        "a gzip header only": zero_member[:10],
    }
    cases += [Case(f"appended to the gzip file: {label}", gz + data) for label, data in appended.items()]
    hidden = _pack([_regular("capture/hidden", b"hidden")])
    tar_edits = {
        "512 more zero bytes": tar + b"\0" * 512,
        "a record more of zeros": tar + b"\0" * tarfile.RECORDSIZE,
        "a byte after the end": tar + b"x",
        "a tar after the end": tar + hidden,
        "a non-zero byte in the padding": tar[:end - 1] + b"\x01",
        "a non-zero byte in the end blocks": tar[:members_end + 3] + b"\x01" + tar[members_end + 4:],
        "no end-of-archive blocks": tar[:members_end],
        "one end-of-archive block": tar[:members_end + 512],
        "end blocks without padding": tar[:members_end + 1024],
        "text in the padding": tar[:end - 12] + b"verify: OK\n\0",
    }
    cases += [Case(f"tar: {label}", _gzip(data)) for label, data in tar_edits.items()]
    for k in sorted({len(gz) // 3, len(gz) // 2, 2 * len(gz) // 3, *RNG.sample(range(20, len(gz) - 8), 6)}):
        raw = bytearray(gz)
        raw[k] ^= 0xFF
        cases.append(Case(f"compressed byte {k} flipped", bytes(raw)))
    crc = bytearray(gz)
    crc[-8] ^= 1
    cases.append(Case("gzip CRC changed", bytes(crc)))
    isize = bytearray(gz)
    isize[-1] ^= 1
    cases.append(Case("gzip length changed", bytes(isize)))
    head = tarfile.TarInfo("capture/hosts/gpu001/huge")
    head.size, head.mtime = 3 * 1024**3, MTIME
    huge = tar[:members_end] + head.tobuf(tarfile.PAX_FORMAT) + b"\0" * 4096
    cases.append(Case("a member whose header declares 3 GiB", _gzip(huge)))
    cases.append(Case("a raw (uncompressed) tar", tar))
    cases.append(Case("a zlib stream, not gzip", zlib.compress(tar)))
    return cases


def tampered(b: Built) -> list[Case]:
    return _content_cases(b) + _member_cases(b) + _added_cases(b) + _manifest_cases(b) + _framing_cases(b)


def uncovered(b: Built) -> list[tuple[Case, bool]]:
    """Differences verify accepts on purpose (docs/bundles.md): (case, whether the bundle id stays the same)."""
    def swap(ms):
        ms[2], ms[3] = ms[3], ms[2]

    def directory(ms):
        ms.insert(1, _special("capture/hosts", tarfile.DIRTYPE))

    stream = next(d for m, d in b.members if m.name.endswith("stream.fc1"))
    return [
        (Case("gzip header mtime", _gzip(b.tar, mtime=MTIME + 86400)), True),
        (Case("gzip header file name", _gzip(b.tar, filename="b.tar")), True),
        (Case("gzip OS byte", b.gz[:9] + b"\x03" + b.gz[10:]), True),
        (Case("compression level 1", _gzip(b.tar, level=1)), True),
        (Case("two members after the manifest swapped", _repacked(b, swap)), True),
        (Case("a directory entry added", _repacked(b, directory)), True),
        (Case("capture.json's created_at changed and re-signed whole", _resigned(b, "capture/capture.json", json.dumps(
            {**json.loads(next(d for m, d in b.members if m.name == "capture/capture.json")),
             "created_at": "2024-05-15T08:30:00Z"}).encode())), False),
        (Case("a host file changed and re-signed whole",
              _resigned(b, "capture/hosts/gpu001/stream.fc1", stream[::-1])), False),
    ]


# --- the tests ----------------------------------------------------------------------------------------------


def _verdict(path: Path, dest: Path) -> tuple[bool, bool, list[str]]:
    """(verify rejects, extraction refuses, every message verify and extraction gave)."""
    texts: list[str] = []
    try:
        report = verify_bundle(path)
        rejected = not report.ok
        texts += report.problems
    except BundleError as exc:
        rejected = True
        texts.append(str(exc))
    try:
        extract_bundle(path, dest)
        refused = False
    except BundleError as exc:
        refused = True
        texts.append(str(exc))
        texts += getattr(exc, "problems", [])
    return rejected, refused, texts


def _unsafe_text(texts: list[str]) -> list[str]:
    return [t for t in texts if not t.isprintable() or "verify: OK" in t.split(": ", 1)[0]]


def test_the_original_verifies_and_extracts(built, tmp_path):
    path = tmp_path / "b.tar.gz"
    path.write_bytes(built.gz)
    report = verify_bundle(path)
    assert report.ok and report.problems == [] and report.bundle_id == built.bundle_id
    assert (extract_bundle(path, tmp_path / "x") / "capture" / "capture.json").is_file()


def test_every_tampered_bundle_is_rejected_by_verify_and_extraction(built, tmp_path):
    cases = tampered(built)
    assert len(cases) >= 220 and len({c.name for c in cases}) == len(cases)
    same = [c.name for c in cases if c.data == built.gz]
    assert same == [], "mutations that changed nothing"
    path = tmp_path / "t.tar.gz"
    passed, unsafe = [], []
    for i, case in enumerate(cases):
        path.write_bytes(case.data)
        rejected, refused, texts = _verdict(path, tmp_path / f"x{i}")
        if not (rejected and refused):
            passed.append(f"{case.name}: verify {'rejects' if rejected else 'accepts'}, "
                          f"extraction {'refuses' if refused else 'extracts'}")
        unsafe += [f"{case.name}: {t!r}" for t in _unsafe_text(texts)]
        assert not (tmp_path / f"x{i}").exists() or not refused
    assert passed == [], f"{len(passed)} of {len(cases)} tampered bundles passed:\n" + "\n".join(passed)
    assert unsafe == [], "messages not safe to print:\n" + "\n".join(unsafe)


def test_what_verify_leaves_out_on_purpose_is_accepted(built, tmp_path):
    path = tmp_path / "t.tar.gz"
    for i, (case, same_id) in enumerate(uncovered(built)):
        path.write_bytes(case.data)
        report = verify_bundle(path)
        assert report.ok, (case.name, report.problems)
        assert (report.bundle_id == built.bundle_id) is same_id, case.name
        assert (extract_bundle(path, tmp_path / f"x{i}") / "capture").is_dir()


def test_a_fake_ok_line_in_a_member_name_stays_inside_its_problem(built, tmp_path):
    path = tmp_path / "t.tar.gz"
    path.write_bytes(_repacked(built, lambda ms: ms.append(_regular("capture/x\n verify: OK", b"1"))))
    report = verify_bundle(path)
    assert report.problems == ["unsafe: 'capture/x\\n verify: OK' (control character U+000A in the name)"]
    assert all("\n" not in p for p in report.problems)


def test_the_manifest_command_list_names_each_difference(built, tmp_path):
    def edit(doc):
        c = doc["capture"]["commands"]
        next(e for e in c["gpu001"] if e["command"] == "cmd:uname")["rc"] = 1
        c["gpu001"].remove(next(e for e in c["gpu001"] if e["command"] == "cmd:ibstat" and e["snapshot"] == 1))
        c["gpu002"].append({"command": "cmd:ethtool", "snapshot": 0, "rc": 0, "truncated": False})

    path = tmp_path / "t.tar.gz"
    path.write_bytes(_manifest_edit(built, edit))
    problems = verify_bundle(path).problems
    index = "capture/hosts/gpu001/index.json"
    assert problems == [
        f"commands: gpu001 cmd:ibstat (snapshot 1) ran ({index}) but is not in the manifest",
        "commands: gpu001 cmd:uname (snapshot 0): rc 0 in the index, the manifest says 1",
        "commands: gpu002 cmd:ethtool (snapshot 0) is listed in the manifest but not in "
        "capture/hosts/gpu002/index.json",
    ]


def test_trailing_data_is_named_with_the_same_bundle_id(built, tmp_path):
    path = tmp_path / "t.tar.gz"
    path.write_bytes(built.gz + b"\0" * 64)
    report = verify_bundle(path)
    assert report.bundle_id == built.bundle_id
    assert report.problems == ["64 bytes of trailing data after the gzip stream"]
    path.write_bytes(built.gz + _gzip(b"\0" * 1024))
    assert verify_bundle(path).problems[0].startswith("a second gzip member after the bundle's")
    members_end = max(m.offset_data + -(-m.size // 512) * 512 for m, _ in built.members)
    path.write_bytes(_gzip(built.tar + b"x"))
    assert verify_bundle(path).problems == [f"trailing data after the tar's end-of-archive blocks (byte {members_end})"]


@pytest.mark.parametrize("cap", ["MAX_MEMBER_BYTES", "MAX_TOTAL_BYTES", "MAX_MEMBERS"])
def test_caps_are_enforced_alike_by_verify_and_extraction(built, tmp_path, monkeypatch, cap):
    path = tmp_path / "b.tar.gz"
    path.write_bytes(built.gz)
    largest = max(len(d or b"") for _, d in built.members)
    total = sum(len(d or b"") for _, d in built.members)
    monkeypatch.setattr(caps, cap, {"MAX_MEMBER_BYTES": largest - 1, "MAX_TOTAL_BYTES": total - 1,
                                    "MAX_MEMBERS": len(built.members) - 1}[cap])
    try:
        said = verify_bundle(path).problems[-1]
    except BundleError as exc:  # the manifest itself is over the cap: no report to give
        said = str(exc)
    assert "over the" in said and "stopped here" in said
    with pytest.raises(BundleError, match="over the"):
        extract_bundle(path, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_declared_3_gib_member_is_refused_from_its_header(built, tmp_path):
    head = tarfile.TarInfo("capture/hosts/gpu001/huge")
    head.size, head.mtime = 3 * 1024**3, MTIME
    members_end = max(m.offset_data + -(-m.size // 512) * 512 for m, _ in built.members)
    path = tmp_path / "t.tar.gz"
    path.write_bytes(_gzip(built.tar[:members_end] + head.tobuf(tarfile.PAX_FORMAT) + b"\0" * 4096))
    report = verify_bundle(path)
    assert report.problems == [f"unsafe: capture/hosts/gpu001/huge ({3 * 1024**3} bytes, over the "
                               f"{caps.MAX_MEMBER_BYTES}-byte limit; verification stopped here)"]


@pytest.mark.parametrize("bad", ["hosts/gpu001/x\n verify: OK", "hosts/gpu001/\x1b[2J", "hosts/gpu001/a\u202eb",
                                 "hosts/gpu001/a\\b", "hosts/gpu001/\udcff", "hosts/" + "/".join(["d" * 100] * 11)])
def test_the_builder_refuses_names_verify_would_refuse(tmp_path, bad):
    cap = make_capture(tmp_path / "cap", {"capture.json": FILES["capture.json"]})
    (cap / bad).parent.mkdir(parents=True, exist_ok=True)
    try:
        (cap / bad).write_bytes(b"1")
    except OSError:
        pytest.skip("this file system refuses the name itself")
    with pytest.raises(BundleError) as err:
        build_bundle(cap, tmp_path / "b.tar.gz", extra={}, mtime=MTIME)
    assert str(err.value).isprintable() and not (tmp_path / "b.tar.gz").exists()


def test_the_builder_refuses_a_member_over_the_cap(tmp_path, monkeypatch):
    cap = make_capture(tmp_path / "cap", {"capture.json": FILES["capture.json"], "hosts/a/big": b"x" * 100})
    monkeypatch.setattr(caps, "MAX_MEMBER_BYTES", 99)
    with pytest.raises(BundleError, match="over the 99-byte limit"):
        build_bundle(cap, tmp_path / "b.tar.gz", extra={}, mtime=MTIME)
