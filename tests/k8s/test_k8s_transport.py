"""The k8s transport with the real `kubernetes` client against the API server stand-in (standin.py).

The stand-in's runner here runs each exec's command on this machine (no nsenter, no root): these tests are
about the API path, its statuses and the bytes; tests/k8s/test_k8s_lab.py captures real lab hosts."""

from __future__ import annotations

import os
import time

import pytest

from fabricase.errors import TransportError
from fabricase.k8s.api import KubeConfig, load_api
from fabricase.k8s.exec import exec_in_pod, exit_code_of
from fabricase.models import HostStatus
from fabricase.transports import get_transport
from fabricase.transports.k8s import K8sTransport, debug_pod_spec

from .conftest import Cluster
from .standin import write_kubeconfig


def _run(hosts: list[str], script: str, timeout_s: float = 10, **kw) -> dict:
    transport = K8sTransport(**kw)
    return {r.host: r for r in transport.run(hosts, script, timeout_s=timeout_s)}


def test_binary_output_comes_back_byte_for_byte(cluster: Cluster) -> None:
    cluster.add_node("n1")
    payload = bytes(range(256)) * 64 + b"\x00\xff\x00"
    script = "i=0; while [ $i -lt 64 ]; do printf '" + "".join(f"\\{b:03o}" for b in range(256)) + \
             "'; i=$((i+1)); done; printf '\\000\\377\\000'\n"
    runs = _run(["n1"], script)
    assert runs["n1"].status == HostStatus.OK, runs["n1"].reason
    assert runs["n1"].stdout == payload
    assert cluster.state.execs[0]["command"] == ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "sh",
                                                 "-s"]


def test_script_goes_on_stdin_whole_even_past_the_argv_limit(cluster: Cluster) -> None:
    """300 KiB of script (past the 128 KiB of one argv string) arrives whole and runs."""
    cluster.add_node("n1")
    filler = "".join(f": filler line {i} {'x' * 60}\n" for i in range(4500))
    script = filler + "echo done\n"
    assert len(script) > 300 * 1024
    runs = _run(["n1"], script)
    assert (runs["n1"].status, runs["n1"].stdout) == (HostStatus.OK, b"done\n")
    assert cluster.state.execs[0]["stdin_bytes"] == len(script)


def test_v4_protocol_without_stdin_close_still_ends(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.state.protocols = ("v4.channel.k8s.io",)
    runs = _run(["n1"], "echo four; exit 0\n", timeout_s=5)
    assert (runs["n1"].status, runs["n1"].stdout) == (HostStatus.OK, b"four\n")
    assert cluster.state.execs[0]["v5"] is False


def test_exit_status_and_stderr(cluster: Cluster) -> None:
    cluster.add_node("n1")
    runs = _run(["n1"], "echo partial; echo 'lspci: not found' >&2; exit 7\n")
    run = runs["n1"]
    assert (run.status, run.rc, run.stdout) == (HostStatus.FAILED, 7, b"partial\n")
    assert run.reason == "capture script exited 7: lspci: not found"


def test_each_failure_says_why(cluster: Cluster) -> None:
    cluster.add_node("ready")
    cluster.add_node("down", ready=False)
    cluster.add_node("bare", pod=False)
    cluster.add_node("starting", phase="Pending")
    runs = _run(["ready", "down", "bare", "starting", "ghost"], "echo ok\n")
    assert runs["ready"].status == HostStatus.OK
    assert runs["down"].status == HostStatus.UNREACHABLE
    assert runs["down"].reason == "node NotReady (KubeletNotReady: Kubelet stopped posting node status.)"
    assert runs["bare"].status == HostStatus.UNREACHABLE
    assert runs["bare"].reason == ("no fabricase-node pod on node bare (namespace fabricase): apply "
                                   "deploy/kubernetes/ or pass --k8s-debug-pods")
    assert runs["starting"].status == HostStatus.UNREACHABLE
    assert "fabricase-node-starting on starting is Pending, not Running" in runs["starting"].reason
    assert runs["ghost"].status == HostStatus.UNREACHABLE
    assert runs["ghost"].reason.startswith("no node named ghost in the cluster")
    assert [e["node"] for e in cluster.state.execs] == ["ready"]  # nothing was exec'd where it could not run


def test_exec_refused_by_rbac_is_auth_failed(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.state.deny_exec = True
    run = _run(["n1"], "echo ok\n")["n1"]
    assert run.status == HostStatus.AUTH_FAILED
    assert run.reason == "exec refused by the API server: HTTP 403 (needs create on pods/exec in namespace fabricase)"


def test_hanging_capture_times_out_within_the_timeout(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_node("n2")
    runs = _run(["n1", "n2"], "echo first; sleep 60\n", timeout_s=1.5)
    for host in ("n1", "n2"):
        assert runs[host].status == HostStatus.TIMED_OUT
        assert runs[host].reason == "capture did not finish within 1.5s"
        assert runs[host].stdout == b"first\n"  # what came back before is kept
    # The stand-in ends the exec's process when the client goes away, as the kubelet does.
    for _ in range(100):
        if len(cluster.state.execs) == 2:
            break
        time.sleep(0.1)
    assert [e["rc"] for e in cluster.state.execs] == [-9, -9]


def test_wrong_token_fails_the_transport_once(cluster: Cluster) -> None:
    write_kubeconfig(cluster.kubeconfig, cluster.server.url, "not-the-token")
    cluster.add_node("n1")
    with pytest.raises(TransportError, match="HTTP 401"):
        _run(["n1"], "echo\n")


def test_exec_credential_plugin_token_is_used(cluster: Cluster) -> None:
    """The client's own loader runs the kubeconfig's exec plugin; its token reaches the exec websocket too."""
    write_kubeconfig(cluster.kubeconfig, cluster.server.url, cluster.state.token, exec_plugin=True)
    cluster.add_node("n1")
    run = _run(["n1"], "echo via-plugin\n")["n1"]
    assert (run.status, run.stdout) == (HostStatus.OK, b"via-plugin\n")


def test_kubeconfig_and_context_options(cluster: Cluster, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other-kubeconfig"
    write_kubeconfig(other, cluster.server.url, cluster.state.token, context="prod")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    cluster.add_node("n1")
    transport = get_transport("k8s", kubeconfig=str(other), k8s_context="prod", fanout=4)
    assert transport.run(["n1"], "echo ctx\n", timeout_s=5)[0].stdout == b"ctx\n"
    with pytest.raises(TransportError, match="cannot load the Kubernetes config"):
        get_transport("k8s", kubeconfig=str(other), k8s_context="staging").run(["n1"], "echo\n", timeout_s=5)


def test_debug_pod_fallback_creates_execs_and_deletes(cluster: Cluster) -> None:
    cluster.add_node("bare", pod=False)
    run = _run(["bare"], "echo debug\n", debug_pods=True)["bare"]
    assert (run.status, run.stdout) == (HostStatus.OK, b"debug\n")
    assert len(cluster.state.created) == 1 and cluster.state.deleted == cluster.state.created
    assert not any(p["metadata"]["name"].startswith("fabricase-debug") for p in cluster.state.pods.values())


def test_debug_pod_is_what_kubectl_debug_sysadmin_creates() -> None:
    spec = debug_pod_spec("gpu-a1", "fabricase", "busybox:1.36")["spec"]
    assert spec["nodeName"] == "gpu-a1" and spec["hostPID"] and spec["hostNetwork"] and spec["hostIPC"]
    container = spec["containers"][0]
    assert container["securityContext"] == {"privileged": True}
    assert container["volumeMounts"] == [{"name": "host-root", "mountPath": "/host", "readOnly": True}]
    assert spec["volumes"] == [{"name": "host-root", "hostPath": {"path": "/"}}]
    assert spec["tolerations"] == [{"operator": "Exists"}]


def test_node_records_reach_the_capture(cluster: Cluster) -> None:
    cluster.add_node("n1", provider_id="aws:///us-east-1a/i-0123456789abcdef0",
                     labels={"topology.kubernetes.io/zone": "us-east-1a",
                             "node.kubernetes.io/instance-type": "p5.48xlarge"})
    cluster.add_node("n2", ready=False)
    transport = K8sTransport()
    transport.run(["n1", "n2"], "echo\n", timeout_s=5)
    assert transport.node_records() == [
        {"node": "n1", "provider_id": "aws:///us-east-1a/i-0123456789abcdef0", "zone": "us-east-1a",
         "instance_type": "p5.48xlarge", "ready": True},
        {"node": "n2", "provider_id": None, "zone": None, "instance_type": None, "ready": False}]


def test_standin_refuses_what_the_api_server_refuses(cluster: Cluster) -> None:
    """No command: 400; unknown pod: 404 (the client reports a refused upgrade with its HTTP status)."""
    from kubernetes.client.rest import ApiException

    from fabricase.k8s.api import api_status

    cluster.add_node("n1")
    api = load_api(KubeConfig())
    deadline = time.monotonic() + 5
    with pytest.raises(ApiException) as err:
        exec_in_pod(api.configuration, "fabricase", "fabricase-node-n1", [], b"", deadline=deadline)
    assert api_status(err.value) == 400
    with pytest.raises(ApiException) as err:
        exec_in_pod(api.configuration, "fabricase", "no-such-pod", ["sh"], b"", deadline=deadline)
    assert api_status(err.value) == 404


def test_exit_code_of_status_objects() -> None:
    assert exit_code_of(b'{"metadata":{},"status":"Success"}') == (0, None)
    failure = (b'{"status":"Failure","message":"command terminated with non-zero exit code: exit status 2",'
               b'"reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"2"}]}}')
    assert exit_code_of(failure)[0] == 2
    start = b'{"status":"Failure","message":"exec: \\"nsenter\\": executable file not found in $PATH"}'
    assert exit_code_of(start) == (None, 'exec: "nsenter": executable file not found in $PATH')


def test_missing_client_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_kubernetes(name, *args, **kw):
        if name == "kubernetes" or name.startswith("kubernetes."):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_kubernetes)
    with pytest.raises(TransportError, match=r"pip install 'fabricase\[k8s\]'"):
        load_api(KubeConfig(kubeconfig=os.devnull))
