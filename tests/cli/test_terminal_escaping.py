"""Everything printed from data is inert: rich markup prints literally and never crashes a command; terminal
controls (ESC/CSI/OSC, CR, backspace, other C0/C1, DEL) and bidi overrides are shown escaped, never emitted raw.

The data comes from every place a command reads it: a host's kernel log and hostname (a real capture through
the real script, tests/hosttrees), the symptom, the capture's folder name, the tracker's hosts and titles, a desk's
replies, a bundle's member names, and error messages that quote what was given. Each command must exit as it does
without the hostile data."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.text import Text

from fabricase import filing, providers
from fabricase.cli.output import err_console, inert, out_console
from fabricase.config import resolve_paths
from fabricase.errors import TargetError
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from fabricase.tracker import Tracker
from hosttrees import record_command, write_file
from hosttrees.nvidia import journalctl_args
from tracker.deskprovider import Desk, DeskProvider, draft_for

MARKUP = "[/x][bold][link=https://evil.example]"
OSC_LINK = "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"
CONTROLS = "\x1b[2J\r\x08\x7f\x9b\x00"
BIDI = "\u202e\u2066"
HOSTILE = MARKUP + OSC_LINK + CONTROLS + BIDI
IN_PATH = MARKUP + CONTROLS.replace("\x00", "") + BIDI  # a file name cannot hold NUL
# What must never reach the terminal raw (a newline from data is checked where data could hold one).
RAW = ("\x1b", "\x07", "\r", "\x08", "\x7f", "\x9b", "\x00", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
       "\u2066", "\u2067", "\u2068", "\u2069")
ESCAPED = ("\\x1b", "\\u202e")  # how ESC and RLO show


def _assert_inert(result, *literal: str) -> None:
    """No raw control or bidi character in stdout or stderr, and each of `literal` printed as it is."""
    out = result.stdout + result.stderr
    raw = sorted({f"U+{ord(c):04X}" for c in out if c in RAW})
    assert not raw, (raw, out[-2000:])
    assert "Traceback" not in out and "internal error" not in out, out[-2000:]
    for text in literal:
        assert text in out, (text, out[-2000:])


def _hostile_host(root: Path) -> Path:
    """A host with one interface down and a kernel log whose lines, and whose hostname, carry hostile text."""
    for ifname, state, carrier in (("eth0", "up", "1"), ("eth1", "down", "0")):
        for counter in ("rx_bytes", "rx_errors", "rx_crc_errors"):
            write_file(root, f"/sys/class/net/{ifname}/statistics/{counter}", "0\n")
        for name, value in (("operstate", state), ("carrier", carrier), ("carrier_changes", "3"), ("mtu", "9000"),
                            ("speed", "100000")):
            write_file(root, f"/sys/class/net/{ifname}/{name}", value + "\n")
    write_file(root, "/proc/sys/kernel/hostname", "gpu" + HOSTILE + "\n")
    lines = [f"NVRM: Xid (PCI:0000:19:00): 79, pid=1, name={HOSTILE}, GPU has fallen off the bus.",
             f"mlx5_core 0000:1b:00.0 eth1: Link down {HOSTILE}",
             f"NETDEV WATCHDOG: eth1 (mlx5_core): transmit queue 3 timed out {HOSTILE}",
             f"{HOSTILE} \x1b[31mred\x1b[0m \x1b]0;pwned\x07"]
    record_command(root, "journalctl", journalctl_args(), "".join(
        f"2026-11-29T22:50:0{i}.000001+0000 gpu001 kernel: {line}\n" for i, line in enumerate(lines)))
    return root


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    """Wide enough that no table cell is cut: the literal text must be there whole to be found."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory) -> Path:
    return _hostile_host(tmp_path_factory.mktemp("hostile") / "root")


@pytest.fixture(scope="module")
def capture_dir(tmp_path_factory, hostile_root) -> Path:
    """A capture of the hostile host, in a folder whose own name carries markup and controls."""
    out = tmp_path_factory.mktemp("caps") / f"cap{IN_PATH}"
    collect(Targets(hosts=("localhost",)), CollectOptions(interval_s=0, root=str(hostile_root)), out)
    return out


def test_inert_escapes_controls_and_bidi_and_keeps_text():
    assert inert("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert inert("\r\n\t\x08\x7f\x9b") == "\\r\\n\\t\\x08\\x7f\\x9b"
    assert inert("x\u202ey\u2066z\u200f") == "x\\u202ey\\u2066z\\u200f"
    assert inert("bad byte \udcff") == "bad byte \\udcff"  # a lone surrogate cannot even be written to UTF-8
    assert inert("[/x] gpu-01.é 日本 →") == "[/x] gpu-01.é 日本 →"
    assert inert(inert(HOSTILE)) == inert(HOSTILE)  # idempotent: printing twice escapes once
    assert not any(c in inert(HOSTILE) for c in RAW)


def test_the_consoles_print_data_literally(capsys):
    """The console layer itself makes data inert: a command that prints a string or a Text cannot forget."""
    out_console.print(f"host {HOSTILE} member a\n verify: OK")
    out_console.print(Text("text " + HOSTILE))
    err_console.print(f"warning: {HOSTILE}", style="yellow")
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert not any(c in out for c in RAW), repr(out)
    assert "[/x][bold][link=https://evil.example]" in out and "\\x1b]8;;" in out
    assert not any(line.lstrip().startswith("verify: OK") for line in out.splitlines()), out


def test_errors_render_on_one_inert_line():
    error = TargetError(f"bad nodeset {HOSTILE}\nsecond line", where=f"--hosts {HOSTILE}")
    text = str(error)
    assert "\n" not in text and not any(c in text for c in RAW)
    assert text.startswith("--hosts [/x]") and "\\nsecond line" in text


def test_collect_analyze_and_export_print_the_kernel_log_inert(run, tmp_path, hostile_root, capture_dir):
    cap = tmp_path / f"mine{IN_PATH}"
    collected = run("collect", "--hosts", "localhost", "--interval", "0", "--root", str(hostile_root), "-o", str(cap),
                    "--findings")
    _assert_inert(collected, "[/x][bold]", *ESCAPED)
    for args in (("analyze", str(capture_dir)), ("analyze", str(capture_dir), "--findings")):
        _assert_inert(run(*args), "Captured 1/1 host(s) into", "[/x][bold]", "\\x1b[2J")
    exported = run("export", str(capture_dir), "--textfile", str(tmp_path / f"tf{IN_PATH}"))
    _assert_inert(exported, "Wrote ", "[/x][bold]")


def test_json_output_stays_json_and_holds_no_raw_control(run, capture_dir):
    result = run("analyze", str(capture_dir), "--json")
    _assert_inert(result)
    data = json.loads(result.stdout)
    assert data["capture_dir"] == str(capture_dir)  # the data itself is kept, only its rendering is escaped


def test_bundle_verify_and_draft_print_inert(run, tmp_path, capture_dir):
    bundle = tmp_path / f"b{IN_PATH}.tar.gz"
    _assert_inert(run("bundle", str(capture_dir), "-o", str(bundle), "--symptom", HOSTILE), "Bundle ", "[/x][bold]")
    _assert_inert(run("verify", str(bundle)), "OK ", "[/x][bold]")
    drafted = run("draft", str(capture_dir), "--symptom", HOSTILE)
    _assert_inert(drafted, "[/x][bold]")
    # draft prints the ticket exactly but inert: its own lines stay lines, the data's controls show escaped.
    assert "\n\n" in drafted.stdout and "\\x1b" in drafted.stdout


def test_open_files_once_and_every_command_after_prints_inert(run, capture_dir):
    dry = run("open", "--replay", str(capture_dir), "--symptom", HOSTILE, "--dry-run")
    _assert_inert(dry, "Dry run", "[/x][bold]")
    opened = run("open", "--replay", str(capture_dir), "--symptom", HOSTILE)
    _assert_inert(opened, "Escalation  FC-1", "[/x][bold]")
    listed = run("list")
    _assert_inert(listed, "FC-1", "[/x][bold]", *ESCAPED)
    shown = run("show", "FC-1")
    _assert_inert(shown, "symptom", "[/x][bold]", *ESCAPED)
    assert [e["id"] for e in run.json("list", "--state", "all")] == ["FC-1"]  # filed once, not twice
    assert json.loads(run("show", "FC-1", "--json").stdout)["symptom"] == HOSTILE


@pytest.fixture
def hostile_tracker(home, monkeypatch):
    """A desk case whose hosts, components and title carry hostile text, with a hostile reply on the desk."""
    monkeypatch.setitem(providers.PROVIDERS, "desk", "tracker.deskprovider:DeskProvider")
    paths = resolve_paths().ensure()
    provider = DeskProvider(paths)
    with Tracker.open(paths) as tracker:
        esc = tracker.create(provider="desk", title=f"gpu{HOSTILE} symbol errors", symptom=HOSTILE,
                             severity="major", hosts=[f"gpu{HOSTILE}", "gpu002"],
                             components=[(f"gpu{HOSTILE}", f"rdma:{HOSTILE}")])
        esc = filing.file_escalation(tracker, provider, esc.id, draft_for(), None)
    desk = Desk(paths.data / "desk")
    desk.set_status(esc.provider_case_id, "pending-customer-action")
    yesterday = (datetime.now(UTC) - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    desk.add_comment(esc.provider_case_id, f"please run {HOSTILE}\n verify: OK", at=yesterday,
                     author=f"eng{HOSTILE}")
    return {"id": esc.id, "case": esc.provider_case_id, "desk": desk}


def test_tracker_commands_print_hosts_titles_and_desk_replies_inert(run, hostile_tracker):
    _assert_inert(run("list"), "[/x][bold]", *ESCAPED)
    _assert_inert(run("list", "--host", f"gpu{HOSTILE}"), "[/x][bold]")
    esc = hostile_tracker["id"]
    _assert_inert(run("sync"), "synced 1/1")
    shown = run("show", esc)
    _assert_inert(shown, "[/x][bold]", "please run", "\\n verify: OK", *ESCAPED)
    assert not any(line.lstrip().startswith("verify: OK") for line in shown.stdout.splitlines())
    _assert_inert(run("comment", esc, f"noted {HOSTILE}"), "comment recorded")
    _assert_inert(run("show", esc), "noted [/x][bold]")
    json.loads(run("list", "--json").stdout)
    # A desk answering with a status nobody knows: that case fails to sync (exit 3), and says so inert.
    hostile_tracker["desk"].set_status(hostile_tracker["case"], f"odd{HOSTILE}")
    _assert_inert(run("sync", code=3), "warning: " + esc)


def _with_member(bundle: Path, name: str, out: Path) -> None:
    """The bundle with one more member, named `name` (as a hostile packer would add it)."""
    raw = io.BytesIO()
    with tarfile.open(bundle) as src, tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        info = tarfile.TarInfo(name)
        info.size = 2
        dst.addfile(info, io.BytesIO(b"x\n"))
    out.write_bytes(gzip.compress(raw.getvalue(), mtime=0))


def test_verify_never_prints_a_fake_line_from_a_member_name(run, tmp_path, capture_dir):
    bundle = tmp_path / "b.tar.gz"
    run("bundle", str(capture_dir), "-o", str(bundle))
    bad = tmp_path / "bad.tar.gz"
    for name in (f"extra{MARKUP}.txt", f"x{IN_PATH}\n verify: OK", f"{OSC_LINK}.log"):
        _with_member(bundle, name, bad)
        result = run("verify", str(bad), code=1)
        _assert_inert(result)
        assert not any(line.lstrip().startswith("verify: OK") for line in (result.stdout + result.stderr).splitlines())
        assert len(result.stderr.strip().splitlines()) >= 1
        report = run.json("verify", str(bad), code=1)
        assert not report["ok"]


def test_errors_that_quote_data_are_one_inert_line(run, tmp_path):
    for args, code in ((("collect", "--hosts", f"gpu{HOSTILE}[1-", "--interval", "0"), 1),
                       (("show", f"FC-1{HOSTILE}"), 1),
                       (("analyze", str(tmp_path / f"missing{IN_PATH}\nfabricase: ok")), 1),
                       (("list", "--older-than", f"3{HOSTILE}"), 2),
                       (("collect", f"--x{HOSTILE}"), 2)):  # click's own usage error
        result = run(*args, code=code)
        _assert_inert(result)
        lines = result.stderr.strip().splitlines()
        # exit 1: our one line; exit 2: click's usage lines, then one line of error
        assert len([line for line in lines if "error" in line.lower()]) == 1 and "[/x]" in lines[-1], lines


def test_open_that_filed_never_fails_on_printing(run, capture_dir, monkeypatch):
    """Filed is filed: a failure to print the summary is a warning naming the escalation, and exit 0, so that
    nobody files a second time."""
    from fabricase.cli import capture_cmds

    def broken(*args, **kwargs):
        raise UnicodeEncodeError("ascii", HOSTILE, 0, 1, "ordinal not in range(128)")

    monkeypatch.setattr(capture_cmds, "print_diagnosis", broken)
    result = run("open", "--replay", str(capture_dir), "--symptom", HOSTILE)
    _assert_inert(result, "could not print the summary", "escalation FC-1 (filed")
    assert [e["id"] for e in run.json("list", "--state", "all")] == ["FC-1"]
