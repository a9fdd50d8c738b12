"""Start-up: every command imports the CLI, so what it imports at start is paid by `fabricase --help` and
`fabricase list` too. scipy (0.3 s) is imported when a statistical test first runs, not at start."""

from __future__ import annotations

import subprocess
import sys

from fabricase.analysis import stats


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return set(out.split())


def test_the_cli_starts_without_scipy():
    loaded = _modules_after("import fabricase.cli.capture_cmds")
    assert "fabricase.analysis" in loaded  # the analysis is imported, its statistics library is not
    assert not {m for m in loaded if m == "scipy" or m.startswith("scipy.")}


def test_scipy_is_there_when_a_test_needs_it():
    assert stats.scipy_special().pdtrc(0, 1.0) > 0.36  # e^-1
    assert stats.rate_limit_pvalue(0, 1.0, 1.0) == 1.0
