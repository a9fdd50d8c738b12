"""Helpers for the HTML report tests: synthetic fleets, a DOM walker, headless Chromium and a tiny PNG reader.

A plain module, not a conftest, so that its name cannot collide with other test folders' modules."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from fabricase.models import Capture, HostCapture, HostStatus, MetricSample, Placement

RDMA_METRIC = "phy.symbol_errors_uncorrected"


def rdma_sample(host: str, port: int, rate: float, metric: str = RDMA_METRIC) -> MetricSample:
    """An RDMA error counter read over a 5 s interval."""
    source = f"/sys/class/infiniband/mlx5_{port}/ports/1/counters/symbol_error"
    return MetricSample(host, f"rdma:mlx5_{port}/1", metric, 100.0 + rate * 5, "errors", source=source,
                        delta=rate * 5, rate=rate)


def fleet(n_hosts: int, ports: int = 8, hot: dict[tuple[int, int], float] | None = None
          ) -> tuple[Capture, dict[str, list[MetricSample]]]:
    """A capture of `n_hosts` healthy hosts (gpu0001...) with `ports` RDMA ports each, error rate 0 except `hot`
    {(host index, port): rate}; the samples are given, so the capture holds no items."""
    hot = hot or {}
    hosts = [HostCapture(f"gpu{i:04d}", HostStatus.OK, "fake") for i in range(1, n_hosts + 1)]
    samples = {hc.host: [rdma_sample(hc.host, p, hot.get((i, p), 0.0)) for p in range(ports)]
               for i, hc in enumerate(hosts, 1)}
    return capture_of(hosts), samples


def capture_of(hosts: list[HostCapture]) -> Capture:
    return Capture(Path("/nonexistent"), 2, "2026-11-30T00:00:00Z", "0.1.0", 5.0, {"rdma": 1},
                   {"hosts": "gpu[0001-1024]"}, hosts)


def leaf_placements(hosts: list[str], per_leaf: int = 16) -> list[Placement]:
    return [Placement(h, "static", topology=[f"switch:leaf-{i // per_leaf:03d}", f"rack:r{i // per_leaf:03d}"])
            for i, h in enumerate(hosts)]


class Dom(HTMLParser):
    """What the tests read from a page: the heat map's rows (cells per row), finding rows, plots and elements; the
    sections in page order, the suspect cards, and whether each findings table sits in a folded <details>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []  # ids, in page order
        self.cards: list[str] = []  # class of each suspect card
        self.mini_plots = 0
        self.findings_folded: list[bool] = []  # per findings table: its nearest <details> is there and closed
        self._details: list[bool] = []  # open attribute of each enclosing <details>
        self.heat_rows: list[int] = []
        self.heat_classes: list[str] = []
        self.finding_rows = 0
        self.plots = 0
        self.tags: dict[str, int] = {}
        self.host_headers: list[str] = []
        self.groups = 0
        self.open_groups = 0
        self._stack: list[str] = []
        self._in_host = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "section":
            self.sections.append(a.get("id") or "")
        elif tag == "article" and "card" in classes:
            self.cards.append(a.get("class") or "")
        elif tag == "details":
            self._details.append("open" in a)
        if tag == "svg" and "mini" in classes:
            self.mini_plots += 1
        if tag == "table" and "findings" in classes:
            self.findings_folded.append(bool(self._details) and not self._details[-1])
        if tag == "table":
            self._stack.append("heat" if "heat" in classes else "findings" if "findings" in classes else "other")
        elif tag == "tbody" and self._stack:
            self._stack[-1] += ":body"
        elif tag == "tr" and self._stack and self._stack[-1] == "heat:body":
            self.heat_rows.append(0)
        elif tag == "tr" and self._stack and self._stack[-1] == "findings:body":
            self.finding_rows += 1
        elif tag == "td" and self._stack and self._stack[-1] == "heat:body":
            self.heat_rows[-1] += 1
            self.heat_classes.append(a.get("class") or "")
        elif tag == "th" and self._stack and self._stack[-1] == "heat:body" and "host" in classes:
            self._in_host = True
            self.host_headers.append("")
        elif tag == "svg" and "dist" in classes and "mini" not in classes:
            self.plots += 1
        elif tag == "details" and "group" in classes:
            self.groups += 1
            self.open_groups += "open" in a

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self._details:
            self._details.pop()
        if tag == "table" and self._stack:
            self._stack.pop()
        elif tag == "th":
            self._in_host = False

    def handle_data(self, data: str) -> None:
        if self._in_host:
            self.host_headers[-1] += data


def dom(html: str) -> Dom:
    d = Dom()
    d.feed(html)
    d.close()
    return d


# --- headless Chromium -------------------------------------------------------------------------------------------

def chromium() -> str:
    """Debian's chromium; skipped without it, a failure under CI=true (.ci/run installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but chromium is missing: .ci/run must install Debian's chromium", pytrace=False)
    pytest.skip("chromium is not installed (apt-get install chromium)")


def run_chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on a file:// page, with no way to the network: no proxy, every name unresolvable, and no
    background services that phone home. Console messages go to stderr (`:CONSOLE`)."""
    cmd = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-proxy-server",
        "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-extensions", "--no-first-run", "--disable-dev-shm-usage",
        "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", *args, page.resolve().as_uri(),
    ]
    # The timeout only stops a hung browser; nothing is asserted about time.
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def artifacts_dir(default: Path) -> Path:
    """$FABRICASE_TEST_ARTIFACTS when set (CI keeps it), else the test's tmp_path."""
    where = os.environ.get("FABRICASE_TEST_ARTIFACTS")
    path = Path(where) / "report" if where else default
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- a tiny PNG reader (8-bit RGB/RGBA, non-interlaced: what Chromium writes) --------------------------------------

def png_pixels(data: bytes) -> np.ndarray:
    """The image as an (height, width, channels) uint8 array."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, color, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {color}, interlace {interlace}")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1)
        out[y] = prev = _unfilter(kind, line, prev, channels)
    return out.reshape(height, width, channels)


def _unfilter(kind: int, line: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    if kind == 0:
        return line.copy()
    if kind == 1:  # Sub: a running sum per channel, modulo 256
        return (np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.uint64) % 256).astype(np.uint8).reshape(-1)
    if kind == 2:
        return line + prev
    cur = bytearray(line.tobytes())
    up = prev.tobytes()
    for i in range(len(cur)):
        left = cur[i - bpp] if i >= bpp else 0
        if kind == 3:
            cur[i] = (cur[i] + ((left + up[i]) >> 1)) & 0xFF
            continue
        upleft = up[i - bpp] if i >= bpp else 0
        p = left + up[i] - upleft
        pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - upleft)
        pred = left if pa <= pb and pa <= pc else up[i] if pb <= pc else upleft
        cur[i] = (cur[i] + pred) & 0xFF
    return np.frombuffer(bytes(cur), dtype=np.uint8)


def colours(pixels: np.ndarray) -> set[tuple[int, int, int]]:
    """The distinct RGB colours of an image."""
    rgb = pixels[..., :3].reshape(-1, 3).astype(np.uint32)
    packed = np.unique((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2])
    return {(int(v >> 16), int(v >> 8 & 0xFF), int(v & 0xFF)) for v in packed}
