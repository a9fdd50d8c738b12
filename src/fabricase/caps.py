"""Size caps on what fabricase reads back: one table, enforced alike by `verify`, `extract` and `analyze`.

A capture is written by fabricase's own collectors, whose per-command caps are 1-8 MB and whose transports cut a
host's stream at 256 MiB (transports/ssh.py, transports/slurm.py). Anything larger was not made by fabricase: a
bundle or a capture directory over these caps is refused with a one-line error naming the member, before it
is read (docs/bundles.md, "Caps").
"""

from __future__ import annotations

__all__ = ["MAX_ITEM_BYTES", "MAX_MEMBERS", "MAX_MEMBER_BYTES", "MAX_NAME_BYTES", "MAX_TOTAL_BYTES", "MIB"]

MIB = 1024 * 1024
MAX_MEMBER_BYTES = 512 * MIB  # one file of a bundle or a capture (a host's stream is cut at 256 MiB)
MAX_TOTAL_BYTES = 64 * 1024 * MIB  # all members of one bundle, uncompressed
MAX_MEMBERS = 1_000_000  # members of one bundle (10,000 hosts x a few files each, with room)
MAX_NAME_BYTES = 1024  # one member name, UTF-8
MAX_ITEM_BYTES = 64 * MIB  # one captured item read into memory for parsing (the collectors cap commands at 8 MB)
