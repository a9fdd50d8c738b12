"""The kernel log, bounded by time (journald) and always by size: link flaps, Xid, AER live here."""

from fabricase.collectors.base import Collector, CommandSpec

KERNEL_LOG_CAP = 2 * 1024 * 1024

# journald first (it can bound by time); dmesg when there is no journal or it is empty. The tail is kept
# because the newest lines matter most. The exit status is the reader's, not tail's.
_SHELL = (
    'if command -v journalctl >/dev/null 2>&1 && '
    'journalctl -k -q --no-pager -o short-iso-precise --since "-${FC_SINCE_S}s" >"$FC_TMP/klog" 2>/dev/null '
    '&& [ -s "$FC_TMP/klog" ]; then tail -c ' + str(KERNEL_LOG_CAP) + ' "$FC_TMP/klog"; exit 0; fi; '
    'dmesg --time-format iso >"$FC_TMP/klog" || dmesg >"$FC_TMP/klog"; rc=$?; '
    'tail -c ' + str(KERNEL_LOG_CAP) + ' "$FC_TMP/klog"; exit $rc'
)


class KernelLogCollector(Collector):
    name = "kernel_log"
    version = 1
    description = "kernel ring buffer (journalctl -k, or dmesg), newest lines, size-capped"
    commands = (CommandSpec("kernel-log", _SHELL, timeout_s=20, cap=KERNEL_LOG_CAP + 1024),)
