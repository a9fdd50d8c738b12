"""File descriptors for a fan-out: raise the soft RLIMIT_NOFILE to the hard limit at start, and refuse a --fanout
that the limit cannot hold, in one line, before any host is contacted.

Each host in flight holds its ssh child's three pipes and a selector (4 descriptors here) and the child's own
(ssh opens a socket, a ControlMaster socket, and the pipes' other ends live in the child). With the usual soft
limit of 1,024, about 250 hosts in flight were the ceiling, and what went over came back as host failures
("Too many open files") that looked like broken hosts. The hard limit is commonly 524,288 or more; raising the
soft limit to it needs no privilege.
"""

from __future__ import annotations

import resource

from fabricase.errors import TransportError

__all__ = ["FDS_PER_HOST", "RESERVED_FDS", "check_fanout", "raise_nofile"]

FDS_PER_HOST = 4  # stdin, stdout and stderr pipes of the host's ssh, and its selector
RESERVED_FDS = 64  # the capture directory, the tracker, logs, the interpreter's own


def raise_nofile() -> int:
    """Raise this process's soft open-files limit to its hard limit (or as far as the system lets); the new soft
    limit. Never raises: a limit that cannot be changed stays as it was."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 1024
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return soft


def check_fanout(fanout: int, *, per_host: int = FDS_PER_HOST, where: str = "--fanout") -> None:
    """TransportError naming the largest fanout the limit holds, when `fanout` hosts at once would not fit."""
    limit = raise_nofile()
    needed = fanout * per_host + RESERVED_FDS
    if needed > limit:
        most = max(1, (limit - RESERVED_FDS) // per_host)
        raise TransportError(f"{fanout} hosts at once need about {needed} open files, and this process may open "
                             f"{limit} (ulimit -n); use --fanout {most} or less, or raise the hard limit",
                             where=where)
