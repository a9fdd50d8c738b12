"""`fabricase export` filters on a harness capture of 32 hosts: each keeps what its --help says, the fault is
still there where it should be, and what is written passes `promtool check metrics` without a lint problem."""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricase.metrics import TEXTFILE_NAME, metric_names
from fabricase.metrics.filters import ERROR_METRICS, ExportFilter
from metrics.conftest import run_promtool


def _export(run, capture: Path, out: Path, *flags: str) -> tuple[dict, dict[str, list]]:
    result = json.loads(run("export", str(capture), "--textfile", str(out), "--no-escalations", "--json",
                            *flags).stdout)
    text = (out / TEXTFILE_NAME).read_text()
    checked = run_promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0 and not (checked.stdout + checked.stderr).strip(), checked.stdout + checked.stderr
    by_name: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            by_name.setdefault(s.name, []).append(s)
    assert sum(map(len, by_name.values())) == result["series"]
    return result, by_name


@pytest.fixture
def symbol_errors(run, fleets, tmp_path):
    capture, truth = fleets["symbol-errors"]
    _, everything = _export(run, capture, tmp_path / "all")
    return capture, truth, everything


def test_errors_only_keeps_the_error_counters_and_the_fault(run, symbol_errors, tmp_path):
    capture, truth, everything = symbol_errors
    result, kept = _export(run, capture, tmp_path / "tf", "--errors-only")
    assert set(kept) == set(everything) & ERROR_METRICS and len(kept) < len(everything)
    assert "fabricase_rdma_receive_bytes_per_second" in everything  # traffic is left out, errors stay
    worst = max(kept["fabricase_rdma_symbol_errors_per_second"], key=lambda s: s.value)
    assert f"{worst.labels['host']}/rdma:{worst.labels['device']}/{worst.labels['port']}" in truth
    assert result["filter"] == {"errors_only": True, "totals": True, "metric": [], "exclude": []}


def test_no_totals_drops_every_raw_counter_and_keeps_the_rates(run, symbol_errors, tmp_path):
    capture, _, everything = symbol_errors
    _, kept = _export(run, capture, tmp_path / "tf", "--no-totals")
    assert set(kept) == {n for n in everything if not n.endswith("_total")}
    assert any(n.endswith("_total") for n in everything)
    assert kept["fabricase_rdma_symbol_errors_per_second"] == everything["fabricase_rdma_symbol_errors_per_second"]


def test_metric_globs_include_and_add_to_errors_only(run, symbol_errors, tmp_path):
    capture, _, everything = symbol_errors
    _, kept = _export(run, capture, tmp_path / "tf", "--metric", "fabricase_rdma_*", "--metric", "fabricase_capture_*")
    assert set(kept) == {n for n in everything if n.startswith(("fabricase_rdma_", "fabricase_capture_"))}
    _, both = _export(run, capture, tmp_path / "both", "--errors-only", "--metric", "fabricase_capture_*")
    assert set(both) == {n for n in everything if n in ERROR_METRICS or n.startswith("fabricase_capture_")}


def test_exclude_globs_leave_metrics_out(run, symbol_errors, tmp_path):
    capture, _, everything = symbol_errors
    _, kept = _export(run, capture, tmp_path / "tf", "--exclude", "*_bytes_*", "--exclude", "fabricase_finding*")
    assert set(kept) == {n for n in everything if not fnmatchcase(n, "*_bytes_*") and not n.startswith(
        "fabricase_finding")}
    assert any(fnmatchcase(n, "*_bytes_*") for n in everything)


def test_a_glob_that_matches_nothing_is_one_line(run, fleets, tmp_path):
    bad = run("export", str(fleets["symbol-errors"][0]), "--textfile", str(tmp_path / "tf"), "--metric",
              "fabricase_rmda_*", code=1)
    assert "matches no metric" in bad.stderr and bad.stderr.count("\n") == 1
    assert not (tmp_path / "tf").exists()  # refused before anything was written


def test_error_metrics_are_documented_and_filters_compose():
    assert set(metric_names()) >= ERROR_METRICS
    keep = ExportFilter(errors_only=True, totals=False, exclude=("fabricase_nvlink_*",))
    assert keep.keeps("fabricase_rdma_symbol_errors_per_second")
    assert not keep.keeps("fabricase_rdma_symbol_errors_total")  # --no-totals wins over --errors-only
    assert not keep.keeps("fabricase_nvlink_replay_errors_per_second")  # --exclude wins over the rest
    assert not keep.keeps("fabricase_rdma_receive_bytes_per_second")
    assert ExportFilter().keeps("fabricase_rdma_receive_bytes_total") and not ExportFilter().active
