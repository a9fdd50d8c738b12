"""Tree mode for real: the capture goes through a gateway namespace (lab-h1), which runs `fabricase relay` and
fans out to lab-h2 and lab-h3 over its own ssh connections; the results come back on one stream."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from fabricase.models import HostStatus
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets

from .conftest import Lab


def test_capture_through_a_gateway(lab: Lab, tmp_path: Path) -> None:
    # The gateway shares this machine's file system: it runs this checkout's fabricase and the lab's ssh config.
    command = f"{shlex.quote(sys.executable)} -m fabricase"
    opts = CollectOptions(via="ssh", interval_s=0, timeout_s=30, collectors=("netdev",), fanout=4,
                          ssh_options=lab.ssh_options, gateways=("lab-h1",), gateway_command=command)
    capture = collect(Targets(hosts=("lab-h2", "lab-h3", "lab-h5")), opts, tmp_path / "cap")
    by_host = {h.host: h for h in capture.hosts}
    for i in (2, 3):
        hc = by_host[f"lab-h{i}"]
        assert hc.status == HostStatus.OK, hc.reason
        ifname = lab.by_index(i).ifname
        # Each host's own interface, seen from inside its namespace, came back through the gateway.
        assert hc.text(f"/sys/class/net/{ifname}/address") == lab.read_in_ns(lab.by_index(i),
                                                                            f"/sys/class/net/{ifname}/address")
    assert by_host["lab-h5"].status == HostStatus.UNREACHABLE
    assert "Connection refused" in by_host["lab-h5"].reason
