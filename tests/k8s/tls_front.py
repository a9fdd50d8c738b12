"""TLS in front of the API server stand-in, as a real cluster's API server serves: a CA made at run time, a server
certificate for 127.0.0.1 signed by it, and (with `client_ca`) client certificates required, as kind, kubeadm and
minikube clusters authenticate their admin user.

The front terminates TLS and relays the bytes to the plain stand-in on loopback, both ways (the websocket exec
included), one thread per connection. Every TLS operation of a connection happens on that one thread (a
non-blocking socket behind a selector): OpenSSL's SSL objects must not be read and written from two threads at
once, which the stand-in's exec session (a reader thread, two pump threads) would do on a wrapped socket.

Keys are RSA 2048 made per test session (`cryptography`); nothing is written but to the test's tmp folder.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import selectors
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "TlsFront", "make_pki"]


@dataclass(frozen=True)
class Pki:
    """PEM bytes: the CA, the server's certificate and key (CN and SAN 127.0.0.1), and a client's ("admin")."""

    ca_cert: bytes
    server_cert: bytes
    server_key: bytes
    client_cert: bytes
    client_key: bytes

    @staticmethod
    def b64(pem: bytes) -> str:
        """As a kubeconfig's *-data fields hold it."""
        return base64.b64encode(pem).decode()


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _cert(subject: str, key: rsa.RSAPrivateKey, issuer: x509.Name | None, issuer_key: rsa.RSAPrivateKey,
          *, ca: bool = False, server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    elif server:
        builder = (builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(
            "127.0.0.1")), x509.DNSName("localhost")]), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(ca_name: str = "standin-ca") -> Pki:
    """A fresh CA and the certificates the front and a client present."""
    ca_key, server_key, client_key = _key(), _key(), _key()
    ca = _cert(ca_name, ca_key, None, ca_key, ca=True)
    server = _cert("127.0.0.1", server_key, ca.subject, ca_key, server=True)
    client = _cert("admin", client_key, ca.subject, ca_key)
    pem = serialization.Encoding.PEM
    return Pki(ca.public_bytes(pem), server.public_bytes(pem), _pem_key(server_key), client.public_bytes(pem),
               _pem_key(client_key))


class TlsFront:
    """https://127.0.0.1:PORT in front of `backend` (the stand-in's http URL). `client_ca`: require a client
    certificate signed by the PKI's CA. `handshakes` counts completed handshakes, `refused` failed ones."""

    def __init__(self, backend: str, pki: Pki, folder: Path, *, client_ca: bool = False) -> None:
        host, port = backend.removeprefix("http://").rsplit(":", 1)
        self.backend = (host, int(port))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "server.pem").write_bytes(pki.server_cert)
        (folder / "server.key").write_bytes(pki.server_key)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(folder / "server.pem", folder / "server.key")
        if client_ca:
            self.ctx.verify_mode = ssl.CERT_REQUIRED
            self.ctx.load_verify_locations(cadata=pki.ca_cert.decode())
        self.handshakes = self.refused = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.listener.getsockname()[1]}"
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        try:
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            self.refused += 1
            raw.close()
            return
        self.handshakes += 1
        with tls, socket.create_connection(self.backend, timeout=10) as plain:
            _relay(tls, plain)

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(OSError):
            self.listener.close()


def _relay(tls: ssl.SSLSocket, plain: socket.socket) -> None:
    """Bytes both ways until either side closes; all of the TLS socket's reads and writes on this thread."""
    tls.setblocking(False)
    plain.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(tls, selectors.EVENT_READ)
    sel.register(plain, selectors.EVENT_READ)
    try:
        while True:
            ready = [key.fileobj for key, _ in sel.select(timeout=30)]
            if not ready and not tls.pending():
                return  # idle for 30 s: the client went away without closing
            if tls in ready or tls.pending():
                try:
                    data = tls.recv(65536)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    data = None
                if data == b"":
                    return
                if data:
                    _send(plain, data)
            if plain in ready:
                try:
                    data = plain.recv(65536)
                except BlockingIOError:
                    data = None
                if data == b"":
                    return
                if data:
                    _send(tls, data)
    except (OSError, ssl.SSLError):
        return
    finally:
        sel.close()


def _send(sock: socket.socket, data: bytes) -> None:
    sock.settimeout(10)
    try:
        sock.sendall(data)
    finally:
        sock.setblocking(False)
