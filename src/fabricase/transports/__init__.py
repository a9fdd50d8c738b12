"""Transports by name: an explicit registry of import paths, loaded on first use."""

from __future__ import annotations

import importlib
from typing import Any

from fabricase.errors import TransportError
from fabricase.transports.base import HostRun, Transport
from fabricase.transports.local import is_local_name

__all__ = ["TRANSPORTS", "HostRun", "Transport", "get_transport", "is_local_name"]

# name -> "module:Class"; None marks a transport that this version does not have yet.
TRANSPORTS: dict[str, str | None] = {
    "local": "fabricase.transports.local:LocalTransport",
    "ssh": "fabricase.transports.ssh:SshTransport",
    "slurm": "fabricase.transports.slurm:SlurmTransport",
    "k8s": "fabricase.transports.k8s:K8sTransport",  # needs the k8s extra: pip install 'fabricase[k8s]'
}
# ssh through gateways (--gateway): tree mode, chosen by the options rather than by name.
GATEWAY = "fabricase.transports.gateway:GatewayTransport"


def get_transport(name: str, **options: Any) -> Transport:
    """The transport called `name`, built with the options it accepts (fanout, deadline_s, ssh_options, user,
    kubeconfig, k8s_context, ...)."""
    if name not in TRANSPORTS:
        raise TransportError(f"unknown transport {name!r}; valid: {', '.join(TRANSPORTS)}")
    target = GATEWAY if name == "ssh" and options.get("gateways") else TRANSPORTS[name]
    if target is None:
        raise TransportError(f"the {name} transport is not available in this version yet; use --via local")
    module, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    return cls.from_options(**options)
