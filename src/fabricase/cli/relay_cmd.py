"""`fabricase relay`: the gateway's half of tree mode (transports/gateway.py). Not for people: a gateway runs
it under ssh, with the capture script on stdin, and streams every host's result back as a frame as it ends.
Given --gateway it splits its hosts again among its own gateways (nested tree mode)."""

from __future__ import annotations

import sys
import threading

import click

from fabricase.cli.app import cli
from fabricase.cli.options import bounded


@cli.command(hidden=True)
@click.option("--hosts", required=True, metavar="NODESET", help="The hosts this gateway captures.")
@click.option("--fanout", default=64, show_default=True, **bounded("--fanout", "Hosts at once."))
@click.option("--timeout", required=True, **bounded("--timeout", "Per-host time limit in seconds."))
@click.option("--deadline", default=None, **bounded("--deadline", "Seconds left of the caller's overall deadline."))
@click.option("--ssh-option", "ssh_options", multiple=True, metavar="OPT", help="As for collect (repeatable).")
@click.option("--user", default=None, help="Remote user for ssh.")
@click.option("--gateway", "gateways", multiple=True, metavar="HOST",
              help="Relay through these gateways in turn (nested tree mode; repeatable).")
@click.option("--gateway-command", default="fabricase", show_default=True,
              help="How to start fabricase on those gateways.")
@click.option("--json", "as_json", is_flag=True, help="Accepted for uniformity; the output is always the relay stream.")
def relay(hosts, fanout, timeout, deadline, ssh_options, user, gateways, gateway_command, as_json):
    """Capture HOSTS over ssh from this machine and stream each result back (tree mode's gateway side)."""
    from fabricase.targets import parse_nodeset
    from fabricase.transports.gateway import PROTOCOL, GatewayTransport, encode_run, strip_protocol_line
    from fabricase.transports.ssh import SshTransport

    spoken, script = strip_protocol_line(sys.stdin.read())
    if spoken != PROTOCOL:
        said = f"protocol {spoken}" if spoken is not None else "an older protocol (1)"
        raise click.UsageError(f"the caller speaks relay {said}, this relay speaks relay protocol {PROTOCOL}: "
                               "install the same fabricase version on the gateway and the caller")
    out = sys.stdout.buffer
    lock = threading.Lock()

    def send(run) -> None:
        frame = encode_run(run)
        run.stdout = b""  # sent: one host's stream at a time in memory
        with lock:
            out.write(frame)
            out.flush()

    if gateways:
        transport = GatewayTransport(tuple(gateways), command=gateway_command, fanout=fanout, user=user,
                                     ssh_options=tuple(ssh_options), deadline_s=deadline)
    else:
        transport = SshTransport(fanout=fanout, user=user, ssh_options=ssh_options, deadline_s=deadline)
    transport.run(parse_nodeset(hosts), script, timeout_s=timeout, on_done=send)
