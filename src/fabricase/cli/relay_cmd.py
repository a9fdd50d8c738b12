"""`fabricase relay`: the gateway's half of tree mode (transports/gateway.py). Not for people: a gateway runs
it under ssh, with the capture script on stdin, and streams every host's result back as it ends."""

from __future__ import annotations

import sys

import click

from fabricase.cli.app import cli
from fabricase.cli.options import bounded


@cli.command(hidden=True)
@click.option("--hosts", required=True, metavar="NODESET", help="The hosts this gateway captures.")
@click.option("--fanout", default=64, show_default=True, **bounded("--fanout", "Hosts at once."))
@click.option("--timeout", required=True, **bounded("--timeout", "Per-host time limit in seconds."))
@click.option("--ssh-option", "ssh_options", multiple=True, metavar="OPT", help="As for collect (repeatable).")
@click.option("--user", default=None, help="Remote user for ssh.")
@click.option("--json", "as_json", is_flag=True, help="Accepted for uniformity; the output is always the relay stream.")
def relay(hosts, fanout, timeout, ssh_options, user, as_json):
    """Capture HOSTS over ssh from this machine and stream each result back (tree mode's gateway side)."""
    from fabricase.targets import parse_nodeset
    from fabricase.transports.gateway import encode_run
    from fabricase.transports.ssh import SshTransport

    script = sys.stdin.read()
    out = sys.stdout.buffer

    def send(run) -> None:
        out.write(encode_run(run))
        out.flush()

    SshTransport(fanout=fanout, user=user, ssh_options=ssh_options).run(parse_nodeset(hosts), script,
                                                                         timeout_s=timeout, on_done=send)
