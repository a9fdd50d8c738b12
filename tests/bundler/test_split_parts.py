"""split_bundle and join_parts: parts that each verify on their own, join back to the same bytes (with
fabricase or with tar alone), are the same every time, and give tampering away."""

from __future__ import annotations

import gzip
import io
import json
import random
import subprocess
import tarfile

import pytest
from bundle_helpers import EXTRA, FILES, MTIME, make_capture, members_of, write_tar
from click.testing import CliRunner

from fabricase.bundler import build_bundle, verify_bundle
from fabricase.bundler.parts import MIN_PART_BYTES, part_names, split_bundle
from fabricase.bundler.verify import PART_DATA, PART_INFO, bundle_id_of, join_parts
from fabricase.cli import cli
from fabricase.errors import BundleError, VerifyError

PART = 128 * 1024


@pytest.fixture
def bundle(tmp_path):
    # incompressible host data, as a real bundle's gzip leaves it: ~600 KB, so five parts of 128 KiB
    files = {**FILES, "hosts/gpu001/stream.fc1": random.Random(7).randbytes(600_000)}
    return build_bundle(make_capture(tmp_path / "cap", files), tmp_path / "b.tar.gz", extra=EXTRA, mtime=MTIME)


@pytest.fixture
def parts(bundle, tmp_path):
    return split_bundle(bundle.path, PART, out_dir=tmp_path / "parts")


def part_info(path):
    return json.loads(dict((m.name, d) for m, d in members_of(path))[PART_INFO])


def test_a_bundle_that_fits_is_not_split(bundle, tmp_path):
    assert split_bundle(bundle.path, bundle.size) == [bundle.path]
    assert not list(tmp_path.glob("*.part*"))


def test_each_part_fits_and_verifies_on_its_own(bundle, parts):
    assert [p.name for p in parts] == part_names("b.tar.gz", len(parts))
    assert parts[0].name == f"b.tar.gz.part001-of-{len(parts):03d}" and len(parts) == 5
    for k, path in enumerate(parts, start=1):
        assert path.stat().st_size <= PART
        report = verify_bundle(path)
        assert report.ok and report.members == 2, report.problems
        assert (report.part["index"], report.part["count"]) == (k, len(parts))
        assert report.part["parent"] == {"name": "b.tar.gz", "size": bundle.size, "bundle_id": bundle.bundle_id,
                                         "sha256": report.part["parent"]["sha256"]}
    assert bundle_id_of(bundle.path) == bundle.bundle_id


def test_parts_join_to_the_same_bytes_in_any_order(bundle, parts, tmp_path):
    joined = join_parts(list(reversed(parts)), tmp_path / "joined.tar.gz")
    assert joined.read_bytes() == bundle.path.read_bytes()
    assert verify_bundle(joined).ok


def test_parts_join_with_tar_alone(bundle, parts):
    """The recipe each PART.json carries, run by sh in the parts' folder: no fabricase needed."""
    recipe = part_info(parts[0])["join"]
    subprocess.run(["sh", "-c", recipe], cwd=parts[0].parent, check=True)
    assert (parts[0].parent / "b.tar.gz").read_bytes() == bundle.path.read_bytes()


def test_same_bundle_same_parts(bundle, parts, tmp_path):
    again = split_bundle(bundle.path, PART, out_dir=tmp_path / "again")
    assert [p.name for p in again] == [p.name for p in parts]
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in parts]


def test_the_cli_verifies_a_part(parts):
    result = CliRunner().invoke(cli, ["verify", str(parts[1]), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True


def flip_slice_byte(part, out):
    """The part with one byte of its slice flipped, headers and manifest untouched."""
    raw = bytearray(gzip.decompress(part.read_bytes()))
    with tarfile.open(fileobj=io.BytesIO(bytes(raw))) as tar:
        offset = tar.getmember(PART_DATA).offset_data
    raw[offset + 1000] ^= 0x01
    out.write_bytes(gzip.compress(bytes(raw), mtime=MTIME))
    return out


def rebuilt(part, out, *, data=None, info=None):
    """The part rebuilt as a self-consistent bundle (a fresh manifest) around a changed slice or PART.json."""
    members = dict((m.name, d) for m, d in members_of(part) if m.name != "MANIFEST.json")
    extra = {PART_INFO: info(json.loads(members[PART_INFO])) if info else members[PART_INFO],
             PART_DATA: data(members[PART_DATA]) if data else members[PART_DATA]}
    empty = out.parent / "empty"
    empty.mkdir(exist_ok=True)
    return build_bundle(empty, out, extra={k: v if isinstance(v, bytes) else v.encode() for k, v in extra.items()},
                        mtime=MTIME).path


def swap(parts, k, replacement):
    replacement.replace(parts[k])
    return parts


def test_a_flipped_byte_in_a_part_is_named(parts, tmp_path):
    bad = flip_slice_byte(parts[1], tmp_path / "bad")
    report = verify_bundle(bad)
    assert not report.ok and report.problems == [f"changed: {PART_DATA} (sha256 mismatch)"]
    with pytest.raises(VerifyError, match="cannot join") as exc:
        join_parts(swap(parts, 1, bad), tmp_path / "joined.tar.gz")
    assert any(p.startswith(str(parts[1])) and "changed: part.bin" in p for p in exc.value.problems)
    assert not (tmp_path / "joined.tar.gz").exists()


def test_a_slice_changed_with_a_fresh_manifest_is_caught_by_part_json(parts, tmp_path):
    bad = rebuilt(parts[2], tmp_path / "bad", data=lambda d: d[:-1] + bytes([d[-1] ^ 0xFF]))
    report = verify_bundle(bad)
    assert not report.ok
    assert report.problems == [f"part: {PART_DATA} is not the slice {PART_INFO} lists for part 3 of 5"]


def test_a_part_rewritten_whole_is_caught_when_joining(parts, tmp_path):
    """A part whose slice AND PART.json were both rewritten verifies alone (nothing is signed), but its listing
    no longer agrees with the other parts', and the join refuses."""
    def forge(info):
        import hashlib

        entry = info["parts"][3]
        data = members_of(parts[3])
        slice_ = dict((m.name, d) for m, d in data)[PART_DATA]
        entry["sha256"] = hashlib.sha256(slice_[::-1]).hexdigest()
        return json.dumps(info).encode()

    bad = rebuilt(parts[3], tmp_path / "bad", data=lambda d: d[::-1], info=forge)
    assert verify_bundle(bad).ok
    with pytest.raises(VerifyError, match="different bundles"):
        join_parts(swap(parts, 3, bad), tmp_path / "joined.tar.gz")


def test_a_missing_or_repeated_part_is_named(parts, tmp_path):
    with pytest.raises(VerifyError, match="part 3 of 5 is missing"):
        join_parts(parts[:2] + parts[3:], tmp_path / "j")
    with pytest.raises(VerifyError, match="part 2 given twice"):
        join_parts([*parts, parts[1]], tmp_path / "j")


def test_parts_of_two_bundles_do_not_join(parts, tmp_path):
    files = {**FILES, "hosts/gpu001/stream.fc1": random.Random(8).randbytes(600_000)}
    other = build_bundle(make_capture(tmp_path / "cap2", files), tmp_path / "c" / "b.tar.gz", extra=EXTRA, mtime=MTIME)
    others = split_bundle(other.path, PART, out_dir=tmp_path / "c")
    with pytest.raises(VerifyError, match="different bundles"):
        join_parts([*parts[:2], *others[2:]], tmp_path / "j")


def test_a_truncated_part_is_one_line_error(parts, tmp_path):
    cut = tmp_path / "cut"
    cut.write_bytes(parts[0].read_bytes()[:50_000])
    with pytest.raises(BundleError, match="not a readable bundle"):
        verify_bundle(cut)


def test_a_whole_bundle_is_not_a_part(bundle, tmp_path):
    with pytest.raises(VerifyError, match="not a bundle part"):
        join_parts([bundle.path], tmp_path / "j")


def test_a_malformed_part_json_is_named(parts, tmp_path):
    bad = rebuilt(parts[0], tmp_path / "bad", info=lambda info: json.dumps({**info, "index": 9}).encode())
    report = verify_bundle(bad)
    assert not report.ok and report.part is None
    assert report.problems[0].startswith(f"part: {PART_INFO} is malformed: part 9 of 5")


def test_a_damaged_bundle_is_not_split(bundle, tmp_path):
    members = members_of(bundle.path)
    name, data = next((m, d) for m, d in members if m.name.endswith("stream.fc1"))
    members[members.index((name, data))] = (name, data[:-1] + b"\0")
    damaged = write_tar(tmp_path / "damaged.tar.gz", members)
    with pytest.raises(VerifyError, match="fails verification"):
        split_bundle(damaged, PART, out_dir=tmp_path / "p")


@pytest.mark.parametrize("size", [MIN_PART_BYTES - 1, 0, "1MB", True])
def test_a_part_size_too_small_is_refused(bundle, size):
    with pytest.raises(BundleError, match="at least"):
        split_bundle(bundle.path, size)
