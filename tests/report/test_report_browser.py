"""The HTML report opened in a real browser: headless Chromium (Debian's `chromium`) renders it from file:// with
the network out of reach, dumps the DOM it built and takes a screenshot that must show the report's colours, and
a first screen (1280x800) that shows every suspect of the 16-host acceptance fleet whole.
Skipped without chromium; FAILS under CI=true."""

from __future__ import annotations

import shutil
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from report_helpers import artifacts_dir, colours, console_messages, dom, png_pixels, run_chromium

from fabricase.analysis import analyze
from fabricase.capturedir import load_capture
from fabricase.models import HostCapture, HostStatus
from fabricase.pipeline import diagnose_capture
from fabricase.placements import inventory_placements, topology_of
from fabricase.report import html_report

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import fleetgen  # noqa: E402

EVIL = "<script>alert(1)</script>"
# Colours the page must show on screen (report.html.j2): a critical finding's heat-map cell, the critical badge,
# and the fill of a quiet component.
CRITICAL_CELL, CRITICAL_BADGE, QUIET = (0x7F, 0x00, 0x00), (0xB3, 0x26, 0x1E), (0xCE, 0xEA, 0xD6)
# A suspect card's left stripe (article.card, 6 px wide) is its severity's colour (the --critical... variables).
STRIPES = {"critical": (0xB3, 0x26, 0x1E), "major": (0xE8, 0x71, 0x0A), "minor": (0xF9, 0xAB, 0x00),
           "info": (0x5F, 0x63, 0x68)}
FIRST_SCREEN = (1280, 800)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A 64-host capture with symbol errors on one port, an unreachable host named like an attack, a failed
    command and a truncated item: the report file and what went into it."""
    folder = tmp_path_factory.mktemp("browser") / "capture"
    fleetgen.build(next(s for s in fleetgen.scenarios(64, 1, 1) if s.kind == "symbol-errors"), folder, seed=3)
    capture = load_capture(folder)
    placements = inventory_placements(folder / "inventory.json", [h.host for h in capture.hosts])
    cmd = next(it for it in capture.hosts[1].items if it.kind == "command")
    cmd.error, cmd.rc = "command not found", 127
    next(it for it in capture.hosts[2].items if it.kind == "file").truncated = True
    capture.hosts.append(HostCapture(EVIL, HostStatus.UNREACHABLE, "ssh", reason="connection refused"))
    findings = analyze(capture, topology=topology_of(placements))
    page = folder.parent / "report.html"
    page.write_bytes(html_report(capture, findings, placements))
    return page, capture, findings


def test_chromium_builds_the_page_we_wrote(report, tmp_path):
    page, capture, findings = report
    done = run_chromium(page, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []  # no script error, no blocked load, no CSP violation
    built = dom(done.stdout)
    assert built.finding_rows == len(findings) > 0
    columns = len(built.heat_rows) and built.heat_rows[0]
    assert columns >= 8 + 2  # eight RDMA ports and two RoCE ports at least
    assert built.heat_rows == [columns] * len(capture.hosts)  # every host a row, every row every column
    assert "l4 sv-critical" in built.heat_classes  # the port with the symbol errors
    assert built.plots >= 1  # the suspect beside the fleet
    assert built.tags.get("script", 0) == 0 and EVIL in built.host_headers  # shown as text, never run
    assert built.open_groups >= 1


def test_the_screenshot_shows_the_report(report, tmp_path):
    page, _, _ = report
    keep = artifacts_dir(tmp_path)
    shot = keep / "report.png"
    done = run_chromium(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,2000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    shutil.copyfile(page, keep / "report.html")
    print(f"screenshot: {shot} ({shot.stat().st_size:,} bytes)")
    pixels = png_pixels(shot.read_bytes())
    assert pixels.shape[:2] == (2000, 1400)
    seen = colours(pixels)
    assert len(seen) > 32, f"{len(seen)} colours: a blank or unstyled page"
    for name, rgb in (("critical cell", CRITICAL_CELL), ("critical badge", CRITICAL_BADGE), ("quiet cell", QUIET)):
        assert rgb in seen, f"no {name} {rgb} on screen"


@pytest.fixture(scope="module")
def fleet16(tmp_path_factory):
    """The acceptance capture (fleetgen.build_fleet16: 16 hosts, 8 of them with one different fault each),
    diagnosed as `open` does, and its report as the bundle holds it: the page, the diagnosis."""
    folder = tmp_path_factory.mktemp("fleet16") / "capture"
    fleetgen.build_fleet16(folder, seed=1)
    capture = load_capture(folder, verify=False)
    placements = inventory_placements(folder / "inventory.json", [h.host for h in capture.hosts])
    done = diagnose_capture(capture, topology=topology_of(placements), placements=placements)
    page = folder.parent / "report.html"
    page.write_bytes(html_report(capture, done.findings, placements, done.samples, diagnosis=done.diagnosis,
                                 symptom="allreduce busbw fell from 360 to 210 GB/s", escalation_id="FAB-1042"))
    return page, done.diagnosis


def stripes(pixels: np.ndarray) -> list[tuple[str, int, int]]:
    """(severity, top, bottom) of each card stripe on screen: a run of one stripe colour at least 5 px wide and
    40 px tall. Nothing else on the page is drawn that way: severity badges are 16 px tall, the plots' red
    marker 2 px wide, the flagged-component plots' border 4 px wide, and the heat map uses other reds."""
    from scipy import ndimage

    out = []
    rgb = pixels[..., :3]
    for severity, colour in STRIPES.items():
        regions, _ = ndimage.label(np.all(rgb == colour, axis=-1))
        for rows, cols in ndimage.find_objects(regions):
            if cols.stop - cols.start >= 5 and rows.stop - rows.start >= 40:
                out.append((severity, rows.start, rows.stop))
    return sorted(out, key=lambda s: s[1])


def test_the_first_screen_shows_every_suspect_of_the_16_host_fleet(fleet16, tmp_path):
    """Acceptance: at 1280x800 the first screen holds all 8 suspect cards whole, under the header's symptom,
    escalation id, bundle id and verdict line. Checked on the pixels: each card has a left stripe in its
    severity's colour; 8 stripes must be on screen, none touching the bottom edge (a card cut by the fold), with
    as many of each colour as the diagnosis has suspects of that severity. The DOM that Chromium built says the
    cards are the page's first section, before the heat map."""
    page, diagnosis = fleet16
    assert len(diagnosis.suspects) == 8
    built = run_chromium(page, tmp_path / "profile", "--dump-dom")
    assert built.returncode == 0 and console_messages(built.stderr) == [], built.stderr[-2000:]
    tree = dom(built.stdout)
    assert len(tree.cards) == 8 and tree.sections[:3] == ["suspects", "heatmap", "background"]
    assert tree.sections[-1] == "findings" and tree.findings_folded == [True]
    keep = artifacts_dir(tmp_path)
    shot = keep / "first-screen.png"
    width, height = FIRST_SCREEN
    done = run_chromium(page, tmp_path / "profile", f"--screenshot={shot}", f"--window-size={width},{height}")
    assert done.returncode == 0 and console_messages(done.stderr) == [], done.stderr[-2000:]
    shutil.copyfile(page, keep / "fleet16-report.html")
    print(f"first screen: {shot}")
    pixels = png_pixels(shot.read_bytes())
    assert pixels.shape[:2] == (height, width)
    seen = stripes(pixels)
    assert len(seen) == 8, seen
    assert all(bottom < height - 1 for _, _, bottom in seen), f"a card is cut at the fold: {seen}"
    wanted = sorted(str(s.severity) for s in diagnosis.suspects)
    assert sorted(severity for severity, _, _ in seen) == wanted


def _png(rows: np.ndarray, filters: list[int], channels: int) -> bytes:
    """A PNG encoder for the reader's own test: each row filtered with the given filter type."""
    height, width = rows.shape[0], rows.shape[1] // channels
    prev = np.zeros(rows.shape[1], dtype=np.int32)
    raw = bytearray()
    for y, kind in enumerate(filters):
        cur = rows[y].astype(np.int32)
        left = np.concatenate([np.zeros(channels, np.int32), cur[:-channels]])
        upleft = np.concatenate([np.zeros(channels, np.int32), prev[:-channels]])
        p = left + prev - upleft
        pa, pb, pc = abs(p - left), abs(p - prev), abs(p - upleft)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
        pred = [np.zeros_like(cur), left, prev, (left + prev) // 2, paeth][kind]
        raw += bytes([kind]) + ((cur - pred) % 256).astype(np.uint8).tobytes()
        prev = cur

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, {3: 2, 4: 6}[channels], 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(
        b"IEND", b"")


@pytest.mark.parametrize("channels", [3, 4])
def test_the_png_reader_undoes_every_filter(channels):
    rows = np.random.default_rng(7).integers(0, 256, size=(10, 6 * channels), dtype=np.uint8)
    decoded = png_pixels(_png(rows, [0, 1, 2, 3, 4, 4, 3, 2, 1, 0], channels))
    assert np.array_equal(decoded.reshape(10, -1), rows)
    assert len(colours(decoded)) > 1
    with pytest.raises(ValueError, match="not a PNG"):
        png_pixels(b"GIF89a")
