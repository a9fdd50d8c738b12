"""The tampered bundles, by the part of the bundle each changes: the members' bytes and tar headers; the
members themselves (removed, duplicated, renamed, re-dated, grown, and hostile ones added); the manifest and its
command list; and the framing of the gzip stream and the tar. Each case is made from the reference bundle
(tamper_helpers.build_reference), and `uncovered` lists what verify leaves out on purpose (docs/bundles.md,
"What verify checks").
"""

from __future__ import annotations

import io
import json
import tarfile
import zlib

from bundle_helpers import MTIME
from tamper_helpers import (
    RNG,
    Built,
    Case,
    canonical,
    copied,
    gzipped,
    manifest_edited,
    pack,
    regular_member,
    repacked,
    resigned,
    sha256_hex,
    special_member,
    tar_flip,
)

BAD_NAMES = [
    "capture/x\n verify: OK", "capture/x\r", "capture/\x1b[2J\x1b]0;owned\x07", "capture/nul\x00x", "capture/tab\tx",
    "capture/del\x7f", "capture/c1\x85", "capture/c1\x9b31m", "capture/bidi\u202ecod.exe", "capture/bidi\u202a",
    "capture/iso\u2066x", "capture/iso\u2069", "capture/line\u2028sep", "capture/back\\slash", "/etc/cron.d/x",
    "../escape", "capture/../../escape", "capture//twice", "capture/./here", "capture/" + "n" * 1100,
    "capture/not-utf8-\udcff\udcfe",
]


def content_cases(b: Built) -> list[Case]:
    cases = []
    with tarfile.open(fileobj=io.BytesIO(b.tar)) as t:
        located = [(m.name, m.offset, m.offset_data, m.size) for m in t.getmembers()]
    for name, offset, data_at, size in located:
        for pos in sorted({0, size // 2, size - 1}) if size else []:
            cases.append(Case(f"flip data byte {pos} of {name}", tar_flip(b, data_at + pos)))
        cases.append(Case(f"flip the first header byte of {name}", tar_flip(b, offset)))
        cases.append(Case(f"flip the header checksum of {name}", tar_flip(b, data_at - 512 + 148)))
    return cases


def member_cases(b: Built) -> list[Case]:
    cases = []
    for i, (info, _data) in enumerate(b.members):
        n = info.name

        def drop(ms, i=i):
            del ms[i]

        def dup(ms, i=i):
            ms.insert(i + 1, (copied(ms[i][0]), ms[i][1]))

        def rename(ms, i=i):
            ms[i] = (copied(ms[i][0], name=ms[i][0].name + ".renamed"), ms[i][1])

        def touch(ms, i=i):
            ms[i] = (copied(ms[i][0], mtime=ms[i][0].mtime + 1), ms[i][1])

        def grow(ms, i=i):
            ms[i] = (ms[i][0], (ms[i][1] or b"") + b"\n")

        cases += [Case(f"remove {n}", repacked(b, drop)), Case(f"duplicate {n}", repacked(b, dup)),
                  Case(f"rename {n}", repacked(b, rename)), Case(f"mtime + 1 on {n}", repacked(b, touch)),
                  Case(f"one byte more in {n}", repacked(b, grow))]
    header = [("mode 0755", {"mode": 0o755}), ("mode 04755", {"mode": 0o4755}), ("uid 1000", {"uid": 1000}),
              ("gid 1000", {"gid": 1000}), ("uname root", {"uname": "root"}), ("gname wheel", {"gname": "wheel"}),
              ("type AREGTYPE", {"type": tarfile.AREGTYPE}), ("PAX comment", {"pax_headers": {"comment": "x"}}),
              ("PAX xattr", {"pax_headers": {"SCHILY.xattr.user.x": "1"}}), ("float mtime", {"mtime": MTIME + 0.5})]
    for label, change in header:
        def alter(ms, change=change):
            ms[3] = (copied(ms[3][0], **change), ms[3][1])

        cases.append(Case(f"header {label} on {b.members[3][0].name}", repacked(b, alter)))

    def manifest_last(ms):
        ms.append(ms.pop(0))

    cases.append(Case("MANIFEST.json moved to the end", repacked(b, manifest_last)))
    return cases


def added_cases(b: Built) -> list[Case]:
    cases = []
    for bad in BAD_NAMES:
        cases.append(Case(f"add a member named {bad!r:.60}", repacked(b, lambda ms, bad=bad: ms.append(
            regular_member(bad, b"planted\n")))))

        def listed_too(ms, bad=bad):
            # the hostile member is listed in the manifest as well: only the name rule can catch it
            ms.append(regular_member(bad, b"planted\n"))
            doc = json.loads(ms[0][1])
            doc["members"] = sorted([*doc["members"], {"path": bad, "size": 8, "sha256": sha256_hex(b"planted\n")}],
                                    key=lambda e: e["path"])
            ms[0] = (ms[0][0], canonical(doc))

        cases.append(Case(f"add and list a member named {bad!r:.60}", repacked(b, listed_too)))
    specials = [
        special_member("capture/hosts/gpu001/link", tarfile.SYMTYPE, "/etc/shadow"),
        special_member("capture/hosts/gpu001/link\n verify: OK", tarfile.SYMTYPE, "/x\x1b[2J"),
        special_member("capture/hosts/gpu001/hard", tarfile.LNKTYPE, "capture/capture.json"),
        special_member("capture/hosts/gpu001/chr", tarfile.CHRTYPE),
        special_member("capture/hosts/gpu001/blk", tarfile.BLKTYPE),
        special_member("capture/hosts/gpu001/fifo", tarfile.FIFOTYPE),
    ]
    for info, data in specials:
        cases.append(Case(f"add a {info.type!r} member {info.name!r:.50}", repacked(
            b, lambda ms, info=info, data=data: ms.append((info, data)))))
    for kind in (tarfile.CONTTYPE, tarfile.GNUTYPE_SPARSE):
        cases.append(Case(f"add a member of type {kind!r}", repacked(
            b, lambda ms, kind=kind: ms.append(regular_member("capture/hosts/gpu001/odd", b"12345678", type=kind)))))

    def link_for_file(ms):
        i = next(i for i, (m, _) in enumerate(ms) if m.name.endswith("stream.fc1"))
        ms[i] = special_member(ms[i][0].name, tarfile.SYMTYPE, "/dev/zero")

    cases.append(Case("a listed member replaced by a symlink", repacked(b, link_for_file)))
    cases.append(Case("a plain extra member", repacked(
        b, lambda ms: ms.append(regular_member("capture/planted", b"x")))))
    return cases


def manifest_cases(b: Built) -> list[Case]:
    cases = []
    names = [e["path"] for e in json.loads(b.members[0][1])["members"]]
    for k, name in enumerate(names):
        def sha(doc, k=k):
            doc["members"][k]["sha256"] = sha256_hex(b"other")

        def size(doc, k=k):
            doc["members"][k]["size"] += 1

        def drop(doc, k=k):
            del doc["members"][k]

        cases += [Case(f"manifest: sha256 of {name}", manifest_edited(b, sha)),
                  Case(f"manifest: size of {name}", manifest_edited(b, size)),
                  Case(f"manifest: {name} not listed", manifest_edited(b, drop))]

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
        "a duplicated key": lambda doc: canonical(doc).replace(b'"format": ', b'"format": "x",\n  "format": ', 1),
        "a listed member that is not there": lambda doc: doc["members"].append(
            {"path": "zz-not-there", "size": 1, "sha256": sha256_hex(b"1")}),
        "format_version 2": lambda doc: doc.update(format_version=2),
        "not JSON": lambda doc: b"{" + canonical(doc),
    }
    cases += [Case(f"manifest: {label}", manifest_edited(b, edit)) for label, edit in edits.items()]
    # content changed and the manifest recomputed inconsistently, or consistently where another record disagrees
    by_name = {m.name: d for m, d in b.members}
    index_name = "capture/hosts/gpu001/index.json"
    index = json.loads(by_name[index_name])
    index["items"][0]["rc"] = 2
    capture_doc = json.loads(by_name["capture/capture.json"])
    stream = by_name["capture/hosts/gpu001/stream.fc1"]
    cases += [
        Case("stream changed, sha256 recomputed, size not", resigned(b, "capture/hosts/gpu001/stream.fc1",
                                                                     stream + b"!", size=False)),
        Case("stream changed, size recomputed, sha256 not", resigned(b, "capture/hosts/gpu001/stream.fc1",
                                                                     stream + b"!", sha=False)),
        Case("an index rc changed and re-signed", resigned(b, index_name, json.dumps(index).encode())),
        Case("index emptied and re-signed", resigned(b, index_name, b'{"items": []}')),
        Case("index not JSON and re-signed", resigned(b, index_name, b"{oops")),
        Case("capture.json collectors changed and re-signed", resigned(b, "capture/capture.json", json.dumps(
            {**capture_doc, "collectors": {"rdma": 9}}).encode())),
        Case("capture.json format_version changed and re-signed", resigned(b, "capture/capture.json", json.dumps(
            {**capture_doc, "format_version": 3}).encode())),
    ]
    return cases


def framing_cases(b: Built) -> list[Case]:
    gz, tar = b.gz, b.tar
    end = len(tar)
    members_end = max(m.offset_data + -(-m.size // 512) * 512 for m, _ in b.members)
    zero_member = gzipped(b"\0" * 1024)
    cases = [Case(f"truncated to {k} bytes", gz[:k]) for k in sorted(
        {1, 2, 9, 10, 11, 20, 100, len(gz) // 4, len(gz) // 2, len(gz) - 100, len(gz) - 9, len(gz) - 8,
         len(gz) - 5, len(gz) - 4, len(gz) - 1, *RNG.sample(range(10, len(gz) - 1), 12)})]
    appended = {
        "one zero byte": b"\0", "512 zero bytes": b"\0" * 512, "one byte": b"x", "random bytes": RNG.randbytes(100),
        "a newline and text": b"\nverify: OK\n", "a gzip member of zeros": zero_member,
        "an empty gzip member": gzipped(b""), "the bundle again": gz,
        "a gzip member holding a tar": gzipped(pack([regular_member("capture/hidden", b"hidden")])),
        "a gzip header only": zero_member[:10],
    }
    cases += [Case(f"appended to the gzip file: {label}", gz + data) for label, data in appended.items()]
    hidden = pack([regular_member("capture/hidden", b"hidden")])
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
    cases += [Case(f"tar: {label}", gzipped(data)) for label, data in tar_edits.items()]
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
    cases.append(Case("a member whose header declares 3 GiB", gzipped(huge)))
    cases.append(Case("a raw (uncompressed) tar", tar))
    cases.append(Case("a zlib stream, not gzip", zlib.compress(tar)))
    return cases


def tampered(b: Built) -> list[Case]:
    return content_cases(b) + member_cases(b) + added_cases(b) + manifest_cases(b) + framing_cases(b)


def uncovered(b: Built) -> list[tuple[Case, bool]]:
    """Differences verify accepts on purpose (docs/bundles.md): (case, whether the bundle id stays the same)."""
    def swap(ms):
        ms[2], ms[3] = ms[3], ms[2]

    def directory(ms):
        ms.insert(1, special_member("capture/hosts", tarfile.DIRTYPE))

    stream = next(d for m, d in b.members if m.name.endswith("stream.fc1"))
    return [
        (Case("gzip header mtime", gzipped(b.tar, mtime=MTIME + 86400)), True),
        (Case("gzip header file name", gzipped(b.tar, filename="b.tar")), True),
        (Case("gzip OS byte", b.gz[:9] + b"\x03" + b.gz[10:]), True),
        (Case("compression level 1", gzipped(b.tar, level=1)), True),
        (Case("two members after the manifest swapped", repacked(b, swap)), True),
        (Case("a directory entry added", repacked(b, directory)), True),
        (Case("capture.json's created_at changed and re-signed whole", resigned(b, "capture/capture.json", json.dumps(
            {**json.loads(next(d for m, d in b.members if m.name == "capture/capture.json")),
             "created_at": "2024-05-15T08:30:00Z"}).encode())), False),
        (Case("a host file changed and re-signed whole",
              resigned(b, "capture/hosts/gpu001/stream.fc1", stream[::-1])), False),
    ]
