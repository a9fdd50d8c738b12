"""Run one command in a pod through the API server's `exec` websocket, bytes in and bytes out.

The client's own WSClient (kubernetes.stream.ws_client) is used, with `binary=True` so frames are never
decoded as text (a NUL or 0xff in a captured file comes back as it was). It is built directly rather than
through `kubernetes.stream.stream()` for two reasons: stream() swaps `call_api` on the ApiClient it is given
for the length of the call, which is not safe when many hosts exec at once through one client, and it keeps
a second copy of all output (capture_all) that a 256 MiB capture must not have. The auth header is the one
the client's configuration gives (an exec plugin's token is refreshed there); client certificates and the CA
are taken from the same configuration by WSClient itself.

Channel protocol (v5.channel.k8s.io preferred, v4 accepted): every binary frame starts with a channel byte,
0 stdin, 1 stdout, 2 stderr, 3 the final Status (JSON), 255 a v5 close of the channel in the next byte. With
v5, stdin is closed after the script; with v4 (no way to close stdin), the script ends with `exit` so sh
never waits for an end of file that cannot come.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["ExecResult", "exec_in_pod", "exit_code_of"]

STDIN_CHUNK = 64 * 1024


@dataclass
class ExecResult:
    stdout: bytes
    stderr: bytes
    rc: int | None  # None: no Status came back (timed out, cut off, connection lost)
    timed_out: bool = False
    truncated: bool = False
    status_message: str | None = None  # the Status' message when it is a Failure


def exit_code_of(status_json: bytes) -> tuple[int | None, str | None]:
    """(exit code, failure message) from channel 3's Status. Success is 0; NonZeroExitCode carries the code
    in details.causes[reason=ExitCode]; any other Failure (the command could not start) is (None, message)."""
    try:
        status = json.loads(status_json.decode("utf-8", "replace") or "{}")
    except ValueError:
        return None, "unreadable exec status"
    if status.get("status") == "Success":
        return 0, None
    causes = (status.get("details") or {}).get("causes") or []
    code = next((c.get("message") for c in causes if c.get("reason") == "ExitCode"), None)
    if code is not None and str(code).lstrip("-").isdigit():
        return int(code), status.get("message")
    return None, (status.get("message") or "exec failed")[:200]


def _read(ws: Any, channel: int) -> bytes:
    """A channel's buffered bytes; clients before 33 answer an empty channel with "" even in binary mode."""
    data = ws.read_channel(channel)
    return data.encode() if isinstance(data, str) else data


def _headers(configuration: Any) -> dict[str, str]:
    token = (configuration.auth_settings().get("BearerToken") or {}).get("value")
    return {"authorization": token} if token else {}


def exec_url(configuration: Any, namespace: str, pod: str, command: list[str], container: str | None) -> str:
    from kubernetes.stream.ws_client import get_websocket_url

    query: list[tuple[str, Any]] = [("command", command), ("stdin", "true"), ("stdout", "true"),
                                    ("stderr", "true"), ("tty", "false")]
    if container:
        query.append(("container", container))
    return get_websocket_url(f"{configuration.host}/api/v1/namespaces/{namespace}/pods/{pod}/exec", query)


def exec_in_pod(configuration: Any, namespace: str, pod: str, command: list[str], stdin: bytes, *,
                deadline: float, container: str | None = None, max_output_bytes: int = 256 * 2**20) -> ExecResult:
    """Run `command` in the pod with `stdin`; return what came back by the monotonic `deadline`. An HTTP
    refusal of the upgrade (403, 404 ...) raises the client's ApiException (see api.api_status)."""
    from kubernetes.client.rest import ApiException
    from kubernetes.stream import ws_client
    from kubernetes.stream.ws_client import WSClient

    # v5 (and closing stdin) came with client 33; 30.1 to 32 speak v4 only.
    v5_name = getattr(ws_client, "V5_CHANNEL_PROTOCOL", None)

    try:
        ws = WSClient(configuration, exec_url(configuration, namespace, pod, command, container),
                      _headers(configuration), capture_all=False, binary=True)
    except Exception as exc:  # websocket-client's handshake errors carry the HTTP status in their text
        raise ApiException(status=getattr(exc, "status_code", 0) or 0, reason=str(exc)[:300]) from exc
    out, err, status = bytearray(), bytearray(), bytearray()
    result = ExecResult(b"", b"", None)
    try:
        v5 = v5_name is not None and ws.subprotocol == v5_name and hasattr(ws, "close_channel")
        body = stdin if v5 else stdin + b"\nexit\n"
        for start in range(0, len(body), STDIN_CHUNK):
            ws.write_stdin(body[start:start + STDIN_CHUNK])
        if v5:
            ws.close_channel(0)
        while ws.is_open():
            left = deadline - time.monotonic()
            if left <= 0:
                result.timed_out = True
                break
            try:
                ws.update(timeout=min(left, 1.0))
            except Exception as exc:  # the connection dropped mid-stream: keep what came, no exit status
                result.status_message = f"connection lost ({type(exc).__name__})"
                break
            out += _read(ws, 1)
            err += _read(ws, 2)
            status += _read(ws, 3)
            if len(out) > max_output_bytes:
                del out[max_output_bytes:]
                result.truncated = True
                break
        out += _read(ws, 1)
        err += _read(ws, 2)
        status += _read(ws, 3)
    finally:
        ws.close()
    result.stdout, result.stderr = bytes(out[:max_output_bytes]), bytes(err[-65536:])
    if status and not result.timed_out:
        result.rc, message = exit_code_of(bytes(status))
        result.status_message = message or result.status_message
    return result
