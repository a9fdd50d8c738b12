"""Tree mode for real: the capture goes through a gateway namespace (lab-h1), which runs `fabricase relay` and
fans out to lab-h2 and lab-h3 over its own ssh connections; each host's result comes back as its own frame on
one stream, as soon as that host ends, with its own timings. Nested: lab-h1 relays through lab-h4."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from fabricase.models import HostStatus
from fabricase.pipeline import CollectOptions, collect
from fabricase.targets import Targets
from fabricase.transports.base import HostRun
from fabricase.transports.gateway import GatewayTransport

from .conftest import Lab

# The gateway shares this machine's file system: it runs this checkout's fabricase and the lab's ssh config.
COMMAND = f"{shlex.quote(sys.executable)} -m fabricase"


@pytest.mark.parametrize("gateway", ["lab-h1", "lab-h1:lab-h4"], ids=["one-tier", "nested"])
def test_capture_through_a_gateway(lab: Lab, tmp_path: Path, gateway: str) -> None:
    opts = CollectOptions(via="ssh", interval_s=0, timeout_s=30, collectors=("netdev",), fanout=4,
                          ssh_options=lab.ssh_options, gateways=(gateway,), gateway_command=COMMAND)
    capture = collect(Targets(hosts=("lab-h2", "lab-h3", "lab-h5")), opts, tmp_path / "cap")
    by_host = {h.host: h for h in capture.hosts}
    for i in (2, 3):
        hc = by_host[f"lab-h{i}"]
        assert hc.status == HostStatus.OK, hc.reason
        ifname = lab.by_index(i).ifname
        # Each host's own interface, seen from inside its namespace, came back through the gateway.
        assert hc.text(f"/sys/class/net/{ifname}/address") == lab.read_in_ns(lab.by_index(i),
                                                                            f"/sys/class/net/{ifname}/address")
        # Its own timings, taken where its ssh ran (the relay), not the gateway's.
        assert hc.started_at and hc.finished_at and hc.started_at <= hc.finished_at
    assert by_host["lab-h5"].status == HostStatus.UNREACHABLE
    assert "Connection refused" in by_host["lab-h5"].reason


def test_each_host_is_handed_on_before_the_gateway_ends(lab: Lab, tmp_path: Path) -> None:
    # lab-h3's script waits for a file this test creates when lab-h2's result is handed on: only a result
    # streamed while the gateway still runs releases it (else lab-h3 gives up after 20 s and exits 3).
    gate = shlex.quote(str(tmp_path / "released"))
    slow_if = f"/sys/class/net/{lab.by_index(3).ifname}"
    script = (f"if [ -e {slow_if} ]; then i=0; while [ ! -e {gate} ]; do i=$((i+1)); "
              "[ $i -gt 200 ] && { echo gate-not-released; exit 3; }; sleep 0.1; done; fi\n"
              "ls /sys/class/net\n")
    seen: list[HostRun] = []

    def on_done(run: HostRun) -> None:
        seen.append(run)
        if run.host == "lab-h2":
            (tmp_path / "released").touch()

    t = GatewayTransport(("lab-h1",), command=COMMAND, fanout=4, ssh_options=lab.ssh_options, deadline_s=120)
    runs = {r.host: r for r in t.run(["lab-h2", "lab-h3"], script, timeout_s=60, on_done=on_done)}
    assert [r.host for r in seen] == ["lab-h2", "lab-h3"]
    for i in (2, 3):
        run = runs[f"lab-h{i}"]
        assert run.status == HostStatus.OK, (run.reason, run.stdout)
        assert lab.by_index(i).ifname in run.stdout.decode()
        assert run.started_at <= run.finished_at
    assert runs["lab-h2"].finished_at <= runs["lab-h3"].finished_at
