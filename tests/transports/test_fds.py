"""Open files for a fan-out: the soft limit is raised to the hard one at start, and a --fanout the limit cannot
hold is refused in one line before any host is contacted (it used to come back as ~750 'host failures')."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def _child(code: str, soft: int, hard: int) -> dict:
    """Run `code` in a child whose open-files limit is (soft, hard); it prints one JSON line."""
    script = textwrap.dedent(f"""
        import json, resource
        resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))
    """) + textwrap.dedent(code)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_soft_limit_is_raised_to_the_hard_one():
    got = _child("""
        from fabricase.transports.fds import raise_nofile
        print(json.dumps({"new": raise_nofile(), "now": resource.getrlimit(resource.RLIMIT_NOFILE)}))
    """, 256, 4096)
    assert got == {"new": 4096, "now": [4096, 4096]}


def test_a_fanout_within_the_limit_is_taken_once_the_limit_is_raised():
    got = _child("""
        from fabricase.transports.ssh import SshTransport
        SshTransport(fanout=900)  # 3,664 files: over the soft 1,024, within the hard 4,096
        print(json.dumps({"soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
    """, 1024, 4096)
    assert got == {"soft": 4096}


def test_a_fanout_over_the_hard_limit_is_one_clear_error():
    got = _child("""
        from fabricase.errors import TransportError
        from fabricase.transports.ssh import SshTransport
        try:
            SshTransport(fanout=4096)
            print(json.dumps({"error": None}))
        except TransportError as exc:
            print(json.dumps({"error": exc.message, "where": exc.where}))
    """, 1024, 1024)
    assert got == {"error": "4096 hosts at once need about 16448 open files, and this process may open 1024 "
                            "(ulimit -n); use --fanout 240 or less, or raise the hard limit", "where": "--fanout"}


def test_collect_refuses_it_before_any_host():
    """Through the CLI: exit 1, one line naming --fanout, no traceback."""
    script = textwrap.dedent("""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        from fabricase.cli import main
        sys.argv = ["fabricase", "collect", "--hosts", "gpu[0001-4096]", "--via", "ssh", "--fanout", "4096"]
        main()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert out.stderr.strip().splitlines() == [
        "fabricase: error: --fanout: 4096 hosts at once need about 16448 open files, and this process may open "
        "1024 (ulimit -n); use --fanout 240 or less, or raise the hard limit"]
