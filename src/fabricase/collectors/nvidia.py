"""NVIDIA GPU fabric: nvidia-smi (XML and text), NVLink state and error counters, topology, the Fabric Manager
and IMEX daemons with their logs, DCGM health. Every tool is optional: a host without it gives rc 0 and no
output, which analysis reads as "not present"."""

from fabricase.collectors.base import Collector, CommandSpec, FileSpec

NVIDIA_SMI_CAP = 8 * 1024 * 1024
LOG_TAIL = 1024 * 1024


def _tool(tool: str, command: str) -> str:
    return f"command -v {tool} >/dev/null 2>&1 || exit 0; {command}"


def _log_tail(path: str) -> str:
    # $FC_ROOT is the --root folder (a recorded host tree), empty on a real host: files and logs read alike.
    return f'f="${{FC_ROOT:-}}{path}"; [ -r "$f" ] || exit 0; tail -c {LOG_TAIL} "$f"'


# systemctl says "inactive" for a unit that does not exist, so the state alone does not prove Fabric Manager
# is installed; analysis only expects it to be active where NVSwitches are present.
_FABRIC_MANAGER = (
    "if command -v systemctl >/dev/null 2>&1; then echo '### systemctl is-active nvidia-fabricmanager'; "
    "systemctl is-active nvidia-fabricmanager 2>&1; fi; "
    "if command -v nv-fabricmanager >/dev/null 2>&1; then echo '### nv-fabricmanager --version'; "
    "nv-fabricmanager --version 2>&1; fi; exit 0"
)


class NvidiaCollector(Collector):
    name = "nvidia"
    version = 1
    description = "nvidia-smi -q (XML and text), NVLink status and errors, topo -m, Fabric Manager, IMEX, DCGM"
    requires_any = ("/proc/driver/nvidia", "/dev/nvidiactl", "/usr/bin/nvidia-smi")
    files = (
        FileSpec("/proc/driver/nvidia/version", cap=4096),
        FileSpec("/proc/driver/nvidia/gpus/*/information", cap=8192),
        FileSpec("/proc/driver/nvidia-nvswitch/devices/*/information", cap=4096),
    )
    commands = (
        CommandSpec("nvidia-smi-xml", _tool("nvidia-smi", "nvidia-smi -q -x"), timeout_s=30, cap=NVIDIA_SMI_CAP),
        CommandSpec("nvidia-smi-q", _tool("nvidia-smi", "nvidia-smi -q"), timeout_s=30, cap=NVIDIA_SMI_CAP),
        CommandSpec("nvlink-status", _tool("nvidia-smi", "nvidia-smi nvlink -s"), timeout_s=20),
        # Read in both snapshots: the increase of replay/recovery/CRC counters over the interval is the signal.
        CommandSpec("nvlink-errors", _tool("nvidia-smi", "nvidia-smi nvlink -e"), timeout_s=20, counter=True),
        CommandSpec("nvidia-topo", _tool("nvidia-smi", "nvidia-smi topo -m"), timeout_s=20),
        CommandSpec("fabric-manager", _FABRIC_MANAGER, timeout_s=10, cap=64 * 1024),
        CommandSpec("fabric-manager-log", _log_tail("/var/log/fabricmanager.log"), timeout_s=10, cap=LOG_TAIL),
        CommandSpec("imex-status", _tool("nvidia-imex-ctl", "nvidia-imex-ctl -N"), timeout_s=20, cap=256 * 1024),
        CommandSpec("imex-log", _log_tail("/var/log/nvidia-imex.log"), timeout_s=10, cap=LOG_TAIL),
        CommandSpec("dcgm-discovery", _tool("dcgmi", "dcgmi discovery -l"), timeout_s=20, cap=256 * 1024),
        CommandSpec("dcgm-health", _tool("dcgmi", "dcgmi health -c"), timeout_s=20, cap=256 * 1024),
    )
