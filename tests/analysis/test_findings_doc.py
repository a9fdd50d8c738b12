"""docs/findings.md stays true: its JSON example reads back and re-serializes unchanged, and every kind the
rules emit is documented."""

import re
from pathlib import Path

from capture_builder import degraded_eth2, healthy_eth0, make_capture, sysfs_net, write_host

from fabricase.analysis import analyze, findings_from_json, findings_to_json
from fabricase.models import HostStatus

DOC = Path(__file__).parents[2] / "docs/findings.md"


def test_json_example_round_trips():
    example = re.search(r"```json\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert findings_to_json(findings_from_json(example)) == example


def test_every_emitted_kind_is_documented(tmp_path):
    kernel_log = "[ 1.0] eth7: Link is Down\n[ 2.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1\n"
    files = {**healthy_eth0(), **degraded_eth2(), (0, "cmd:kernel-log"): kernel_log}
    files |= sysfs_net("eth3", {"operstate": "down\n", "carrier": "0\n"})
    hosts = [
        write_host(tmp_path, "gpu001", files),
        write_host(tmp_path, "gpu002", {}, status=HostStatus.UNREACHABLE, reason="no route", interval_s=None),
    ]
    kinds = {f.kind for f in analyze(make_capture(tmp_path, hosts))}
    assert kinds == {"host-unreachable", "netdev-errors", "link-flap", "link-down", "kernel-link-down", "nvidia-xid",
                     "fleet-too-small"}
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", DOC.read_text(), re.M))
    assert kinds <= documented
