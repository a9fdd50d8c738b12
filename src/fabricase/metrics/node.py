"""`fabricase export --self`: node-local metrics, run on every node by a systemd timer or the DaemonSet.

Instead of one machine capturing and analyzing the whole fleet and writing every host's series into one
textfile (550,000 series for 1,024 HGX hosts), each node captures only itself, with the local transport and
only the collectors that read counters, and writes only its own series to its node_exporter's textfile
directory; Prometheus gathers them through the node_exporter scrape it already does. Nothing central runs,
and no node reads another's data or the tracker.
"""

from __future__ import annotations

import socket
from pathlib import Path

from fabricase.collectors import COLLECTORS
from fabricase.models import Capture

__all__ = ["SELF_INTERVAL_S", "SELF_TIMEOUT_S", "capture_self", "counter_collectors", "node_name"]

SELF_INTERVAL_S = 10.0  # between the two counter snapshots: short, so a 60 s timer leaves the node alone most
SELF_TIMEOUT_S = 45.0  # the whole capture; under the timer's period, so two runs never overlap


def counter_collectors() -> tuple[str, ...]:
    """The default collectors that read at least one counter (a file or command read in both snapshots)."""
    return tuple(name for name, c in COLLECTORS.items() if not c.opt_in and (
        any(f.counter for f in c.files) or any(cmd.counter for cmd in c.commands)))


def node_name() -> str:
    """This node's name for the `host` label: its hostname, without the domain (as node_exporter's nodename
    is usually relabeled); the local transport accepts it as this machine."""
    return socket.gethostname().split(".")[0] or "localhost"


def capture_self(out_dir: Path, *, interval_s: float = SELF_INTERVAL_S, timeout_s: float = SELF_TIMEOUT_S,
                 root: str = "") -> Capture:
    """Capture this machine's counters into a new capture directory at out_dir (root: a host tree, for tests)."""
    from fabricase.pipeline import CollectOptions, collect
    from fabricase.targets import Targets

    opts = CollectOptions(via="local", interval_s=interval_s, timeout_s=timeout_s, collectors=counter_collectors(),
                          root=root)
    return collect(Targets(hosts=(node_name(),)), opts, out_dir)
