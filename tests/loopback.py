"""What the tests' local servers share: a free port on 127.0.0.1, AWS keys of the real shapes made at run time,
and moto in server mode on loopback (the AWS provider, upload and retry tests, and bench_open.py)."""

from __future__ import annotations

import contextlib
import secrets
import socket
import string
from collections.abc import Iterator

__all__ = ["free_port", "moto_server", "random_aws_keys"]


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (bound and released: a closed port for "unreachable")."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_aws_keys() -> tuple[str, str]:
    """An access key id and a secret key of the real shapes, made at run time from random values (never a
    committed literal): AKIA + 16 of A-Z2-7, and 40 characters of the secret's alphabet."""
    key_alphabet = string.ascii_uppercase + "234567"
    secret_alphabet = string.ascii_letters + string.digits + "/+"
    return ("AKIA" + "".join(secrets.choice(key_alphabet) for _ in range(16)),
            "".join(secrets.choice(secret_alphabet) for _ in range(40)))


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto in server mode on a free loopback port, its URL; stopped on exit."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
