"""A seeded corpus of secrets and identifying values planted in a real capture, for the redaction tests.

`build_corpus(root, seed)` writes a 32-host fleet from the evaluation harness (benchmarks/fleetgen.py: RDMA
counters, RoCE `ethtool -S`, NVLink, and an Xid 79 on one GPU, so that analysis has findings to compare) and
rewrites every host's stream (capture format 2) to carry, as a real host would:
- kernel log lines (journal style) with secrets, the host's FQDN, sessions `for user X`;
- a `ps`-like command output with command lines holding passwords and tokens, and `/home/<user>` paths;
- configuration files read as items: an AWS credentials file, a GCP service-account JSON, an app YAML, an env
  file, SSH and RSA private keys;
- a failing command whose stderr (and so the index's `error` field) holds a token;
- `ip addr`, `ibstat`, sysfs `node_guid` and `gids/N` with MACs, IPv4/IPv6 addresses, GUIDs and GIDs;
- the instance id in `board_asset_tag`; and, beside the hosts, placements.json (instance ids, AWS network
  nodes) and an NCCL log given as an input (inputs/nccl-log).
Every secret is a fresh random value recorded with the kind the redactor must count it under; `extra()` gives
bundle extras (findings, a ticket) that carry secrets and host names too.
"""

from __future__ import annotations

import json
import math
import random
import string
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fabricase.capturedir import add_inputs, host_capture_from_stream, write_host, write_placements
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan
from fabricase.models import HostStatus, Placement

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402

__all__ = ["Corpus", "Planted", "build_corpus"]

HOSTS = 32
DOMAIN = "cluster.corp.example.com"
_B64 = string.ascii_letters + string.digits + "+/"
_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Planted:
    kind: str  # the kind redaction.json must count it under
    value: str  # must appear in no member of a bundle


@dataclass
class Corpus:
    root: Path
    hosts: list[str]
    secrets: list[Planted] = field(default_factory=list)
    # kind -> values that pseudonymization must hide (host, ip4, ip6, mac, guid, gid, user)
    identifying: dict[str, set[str]] = field(default_factory=dict)
    instance_ids: list[str] = field(default_factory=list)
    topology_ids: list[str] = field(default_factory=list)
    extra_secrets: list[Planted] = field(default_factory=list)
    # per host: its IPv4 address, and the IPv4-mapped RoCE GID that holds it
    roce: dict[str, tuple[str, str]] = field(default_factory=dict)

    def extra(self, findings_json: str) -> dict[str, bytes]:
        """Bundle extras as the pipeline writes them, with host names, instance ids and two secrets."""
        first, second = self.extra_secrets
        ticket = (f"# Xid 79 on {self.hosts[0]}.{DOMAIN}\n\nInstance {self.instance_ids[0]}; reproduce with\n"
                  f"    curl -H 'Authorization: Bearer {first.value}' https://desk.example.com/api\n"
                  f"    PGPASSWORD={second.value} psql -h db\n")
        return {"findings.json": findings_json.encode(), "ticket.md": ticket.encode(), "summary.md": b"# summary\n"}

    def expected_counts(self, members: dict[str, bytes]) -> Counter[str]:
        """How many times each kind must be redacted: every occurrence of every planted value in `members`
        (the original files and extras; a value can occur twice, as a stderr line and in the index)."""
        counts: Counter[str] = Counter()
        for planted in self.secrets + self.extra_secrets:
            needle = planted.value.encode()
            counts[planted.kind] += sum(data.count(needle) for data in members.values())
        return counts


class _Maker:
    """Fresh random values, never the same twice (so that counting occurrences counts placements)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[str] = set()

    def word(self, alphabet: str, n: int, *, need: tuple[str, ...] = ()) -> str:
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            if value not in self.seen and all(any(c in group for c in value) for group in need):
                self.seen.add(value)
                return value

    def secret(self, n: int) -> str:  # mixed case with digits: what generated credentials look like
        return self.word(_ALNUM, n, need=(string.ascii_uppercase, string.ascii_lowercase, string.digits))

    def b64(self, n: int) -> str:
        return self.word(_B64, n, need=(string.ascii_uppercase, string.ascii_lowercase, string.digits))

    def high_entropy(self, n: int) -> str:
        while True:
            value = self.secret(n)
            counts = Counter(value)
            if -sum(c / n * math.log2(c / n) for c in counts.values()) >= 4.0:
                return value


def _pem(maker: _Maker, label: str, lines: int = 6) -> tuple[str, str]:
    body = [maker.b64(64) for _ in range(lines)]
    return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----\n", body[2]


# Each maker returns (text, [(kind, value)]): one line or block holding exactly the secrets listed.
def _aws_credentials(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    key_id, secret = "AKIA" + m.word(string.ascii_uppercase + string.digits, 16), m.b64(40)
    return (f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\nregion = us-east-1\n",
            [("aws-access-key-id", key_id), ("aws-secret-access-key", secret)])


def _aws_listing(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    # An id with its secret key beside it, no key names: what a credentials dump or a pasted export shows.
    key_id, secret = "ASIA" + m.word(string.ascii_uppercase + string.digits, 16), m.b64(40)
    return f"creds {key_id} {secret}\n", [("aws-access-key-id", key_id), ("aws-secret-access-key", secret)]


def _aws_session(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    token = m.b64(120)
    return f"X-Amz-Security-Token: {token}\n", [("aws-session-token", token)]


def _gcp_service_account(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    key_id = m.word(_HEX, 40)
    pem, line = _pem(m, "PRIVATE KEY")
    doc = {"type": "service_account", "project_id": "fabric-prod", "private_key_id": key_id, "private_key": pem,
           "client_email": "fabricase@fabric-prod.iam.gserviceaccount.com", "client_id": "104242424242424242424",
           "token_uri": "https://oauth2.googleapis.com/token"}
    return json.dumps(doc, indent=2) + "\n", [("gcp-private-key-id", key_id), ("gcp-private-key", line)]


def _ssh_key(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    pem, line = _pem(m, "OPENSSH PRIVATE KEY")
    return pem, [("ssh-private-key", line)]


def _rsa_key(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    pem, line = _pem(m, "RSA PRIVATE KEY")
    return pem, [("private-key", line)]


def _jwt(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    token = f"eyJ{m.word(_ALNUM + '_-', 33)}.eyJ{m.word(_ALNUM + '_-', 45)}.{m.word(_ALNUM + '_-', 43)}"
    return f"auth: Authorization: Bearer {token}\n", [("jwt", token)]


def _azure_client_secret(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    value = m.word(_ALNUM, 3) + str(m.rng.randrange(10)) + "Q~" + m.word(_ALNUM + "_~.-", 34)
    return f"AZURE_CLIENT_SECRET={value}\n", [("azure-client-secret", value)]


def _azure_storage(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    key = m.b64(86) + "=="
    return (f"DefaultEndpointsProtocol=https;AccountName=fabricdiag;AccountKey={key};EndpointSuffix=core.windows.net\n",
            [("azure-storage-key", key)])


def _azure_sas(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    sig = m.word(_ALNUM, 30) + "%2B" + m.word(_ALNUM, 10) + "%3D"
    return (f"upload https://fabricdiag.blob.core.windows.net/bundles/b.tgz?sv=2022-11-02&sr=b&sp=cw&sig={sig}\n",
            [("azure-sas-signature", sig)])


def _github(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    token = "ghp_" + m.secret(36)
    return f"GITHUB_TOKEN={token}\n", [("github-token", token)]


def _slack(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    token = f"xoxb-{m.word(string.digits, 12)}-{m.word(string.digits, 13)}-{m.secret(24)}"
    return (f"curl -s -d 'token={token}' -d channel=C01 https://slack.com/api/chat.postMessage\n",
            [("slack-token", token)])


def _google(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    key = "AIza" + m.word(_ALNUM + "_-", 35)
    return f"GET https://maps.googleapis.com/maps/api/geocode/json?key={key}\n", [("google-api-key", key)]


def _basic(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    value = m.b64(28)
    return f"curl -H 'Authorization: Basic {value}' http://bmc/redfish/v1\n", [("basic-auth", value)]


def _bearer(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    token = m.secret(48)
    return f"http: Authorization: Bearer {token}\n", [("bearer-token", token)]


def _cookie(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    value = m.secret(32)
    return f"Cookie: sessionid={value}\n", [("cookie", value)]


def _url_password(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    password = m.secret(14)
    return f"DATABASE_URL=postgres://jobs:{password}@db.internal:5432/jobs\n", [("url-password", password)]


def _password(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    password = m.secret(m.rng.randrange(10, 17))
    text = m.rng.choice((
        "/usr/bin/mysql -h db -uroot -p{} jobs\n",
        "/usr/bin/mysqldump --single-transaction -u backup -p {} jobs\n",
        "python3 /opt/etl/load.py --password {} --batch 64\n",
        "PGPASSWORD={} psql -h db -U etl\n",
        "sshpass -p {} ssh bmc@10.255.0.1\n",
        "  password: {}\n",
        '  "db_password": "{}",\n',
        "password = {}\n",
    ))
    return text.format(password), [("password", password)]


def _secret(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    value = m.secret(m.rng.randrange(18, 31))
    text = m.rng.choice((
        "api_key: {}\n",
        "/opt/agent/bin/agent --token {} --interval 30\n",
        "client_token = {}\n",
        '  "apikey": "{}",\n',
        "WANDB_API_KEY={}\n",
    ))
    return text.format(value), [("secret", value)]


def _high_entropy(m: _Maker) -> tuple[str, list[tuple[str, str]]]:
    value = m.high_entropy(26)
    return f"JOB_SECRET_SALT={value}\n", [("high-entropy-secret", value)]


_LINES = (_aws_listing, _aws_session, _jwt, _azure_client_secret, _azure_storage, _azure_sas, _github, _slack,
          _google, _basic, _bearer, _cookie, _url_password, _password, _secret, _high_entropy)


def _frame(collector: str, kind: str, rc: int, source: str, content: bytes) -> bytes:
    times = "1000.0 1000.1" if kind != "file" else "- -"
    return f"@@FC1 I {collector} {kind} 0 {rc} {len(content)} 0 {times} {source}\n".encode() + content + b"\n"


def _mac(rng: random.Random) -> str:
    return ":".join(f"{b:02x}" for b in [0x0C, 0x42, 0xA1, *(rng.randrange(256) for _ in range(3))])


class _Host:
    """One host's additions: the items (with the values they plant)."""

    def __init__(self, corpus: Corpus, maker: _Maker, host: str, index: int) -> None:
        self.corpus, self.m, self.host, self.rng, self.index = corpus, maker, host, maker.rng, index
        self.user = f"{self.rng.choice(('alice', 'bob', 'carol', 'dave', 'erin'))}{index:02d}"
        self.frames: list[bytes] = []
        self.kernel: list[str] = []

    def plant(self, maker) -> str:
        text, planted = maker(self.m)
        self.corpus.secrets += [Planted(kind, value) for kind, value in planted]
        return text

    def identify(self, kind: str, value: str) -> str:
        self.corpus.identifying.setdefault(kind, set()).add(value)
        return value

    def build(self, n: int) -> None:
        rng, host = self.rng, self.host
        fqdn = f"{host}.{DOMAIN}"
        self.identify("host", host)
        self.identify("user", self.user)
        ts = "2026-11-29T23:5{}:{:02d}.000001+0000"
        # Kernel log (journal): secrets logged by services, the FQDN, a session for the user.
        for i in range(n):
            line = self.plant(_LINES[(i + n * self.index) % len(_LINES)]).rstrip("\n")
            self.kernel.append(f"{ts.format(i % 10, i)} {host} app[{4000 + i}]: {line}")
        self.kernel.append(f"{ts.format(9, 58)} {host} systemd-logind[812]: New session 7 of user {self.user}.")
        self.kernel.append(f"{ts.format(9, 59)} {host} sshd[9311]: pam_unix(sshd:session): session opened for user "
                           f"{self.user}(uid=1{rng.randrange(100, 999)}) by (uid=0)")
        self.kernel.append(f"{ts.format(9, 59)} {host} slurmd[2211]: launched job on {fqdn}")
        # `ps`: command lines with passwords and tokens, the user's home.
        ps = ["USER         PID %CPU %MEM COMMAND"]
        for i in range(2):
            line = self.plant(rng.choice((_password, _secret, _slack, _basic))).rstrip("\n")
            ps.append(f"root     {2000 + i:>7} 0.0 0.1 {line}")
        ps.append(f"{self.user:<8} {31337:>7} 99.0 4.2 python /home/{self.user}/train.py --nodes 64")
        self.command("identity", "ps", "\n".join(ps) + "\n")
        # Configuration files read as items.
        self.file("/root/.aws/credentials", self.plant(_aws_credentials))
        self.file("/etc/fabric/app.yaml", "service: trainer\n" + self.plant(_password) + self.plant(_secret))
        path, maker = (("/etc/gcp/service-account.json", _gcp_service_account),
                       (f"/home/{self.user}/.ssh/id_ed25519", _ssh_key),
                       ("/etc/ssl/private/fabric.key", _rsa_key))[self.index % 3]
        self.file(path, self.plant(maker))
        # A command that failed: its stderr's first line becomes the index's `error`.
        self.command("identity", "upload", "", rc=22,
                     stderr=f"curl: (22) 403 Forbidden for {self.plant(_azure_sas).strip()}\n")
        # Addresses: ip addr, sysfs GUID and GIDs, ibstat.
        ip4 = self.identify("ip4", f"10.{rng.randrange(1, 250)}.{rng.randrange(1, 250)}.{rng.randrange(2, 250)}")
        mac = self.identify("mac", _mac(rng))
        ip6 = self.identify("ip6", f"2001:db8:{rng.randrange(1, 0xFFFF):x}::{rng.randrange(1, 0xFFFF):x}")
        guid_groups = ["0c42", "a103", f"{rng.randrange(0x10000):04x}", f"{rng.randrange(1, 0x10000):04x}"]
        guid = self.identify("guid", "0x" + "".join(guid_groups))
        self.identify("guid", ":".join(guid_groups))
        gid = self.identify("gid", "fe80:0000:0000:0000:" + ":".join(guid_groups))
        a, b, c, d = map(int, ip4.split("."))
        mapped = self.identify("gid", f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}")
        self.corpus.roce[host] = (ip4, mapped)
        self.command("netdev", "ip-addr", (
            f"2: ens1f0np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP group default qlen 1000\n"
            f"    link/ether {mac} brd ff:ff:ff:ff:ff:ff\n"
            f"    inet {ip4}/24 brd {a}.{b}.{c}.255 scope global ens1f0np0\n"
            f"    inet6 {ip6}/64 scope global\n"
            f"    inet6 fe80::e42:a1ff:fe{rng.randrange(256):02x}:{rng.randrange(1, 0xFFFF):x}/64 scope link\n"
            f"    inet 127.0.0.1/8 scope host lo\n"))
        self.file("/sys/class/infiniband/mlx5_0/node_guid", ":".join(guid_groups) + "\n")
        self.file("/sys/class/infiniband/mlx5_0/ports/1/gids/0", gid + "\n")
        self.file("/sys/class/infiniband/mlx5_0/ports/1/gids/3", mapped + "\n")
        self.command("rdma", "ibstat", (
            "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
            f"\tNode GUID: {guid}\n\tSystem image GUID: {guid}\n\tPort 1:\n\t\tState: Active\n"
            "\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 0\n\t\tLMC: 0\n\t\tSM lid: 0\n"
            f"\t\tCapability mask: 0x00010000\n\t\tPort GUID: {guid}\n\t\tLink layer: Ethernet\n"))
        instance = "i-0" + self.m.word(_HEX, 16)
        self.corpus.instance_ids.append(instance)
        self.file("/sys/class/dmi/id/board_asset_tag", instance + "\n")

    def file(self, path: str, text: str) -> None:
        self.frames.append(_frame("identity", "file", 0, path, text.encode()))

    def command(self, collector: str, name: str, out: str, rc: int = 0, stderr: str = "") -> None:
        self.frames.append(_frame(collector, "command", rc, f"cmd:{name}", out.encode()))
        if stderr:
            self.frames.append(_frame(collector, "stderr", rc, f"cmd:{name}", stderr.encode()))


def _rewrite(raw: bytes, additions: _Host) -> bytes:
    """The harness stream with the kernel log extended and the host's items added before END."""
    kernel = next(i for i in parse_stream(raw).items if i.source == "cmd:kernel-log")
    header_start = raw.rfind(b"\n", 0, kernel.offset - 1) + 1
    content = kernel.content + ("\n".join(additions.kernel) + "\n").encode()
    fields = raw[header_start:kernel.offset - 1].split(b" ", 10)
    fields[6] = str(len(content)).encode()
    raw = raw[:header_start] + b" ".join(fields) + b"\n" + content + b"\n" + raw[kernel.offset + len(kernel.content)
                                                                                + 1:]
    end = raw.rindex(b"@@FC1 END\n")
    return raw[:end] + b"".join(additions.frames) + raw[end:]


def build_corpus(root: Path, seed: int = 6, secrets_per_log: int = 3) -> Corpus:
    """Write the corpus capture at `root` (a new folder) and say what was planted where."""
    scenario = next(s for s in fleetgen.scenarios(HOSTS, 1, 0) if s.kind == "xid-79")
    fleetgen.build(scenario, root, seed)
    rng = random.Random(seed)
    maker = _Maker(rng)
    corpus = Corpus(root=root, hosts=list(scenario.hosts))
    plan = CapturePlan(collectors=tuple(select_collectors(["rdma", "ethtool"])), interval_s=fleetgen.INTERVAL_S)
    placements = []
    for index, host in enumerate(corpus.hosts):
        additions = _Host(corpus, maker, host, index)
        additions.build(secrets_per_log)
        raw = _rewrite((root / "hosts" / host / "stream.fc1").read_bytes(), additions)
        hc = host_capture_from_stream(host, parse_stream(raw), plan)
        hc.status, hc.transport = HostStatus.OK, "harness"
        write_host(root, hc, raw)
        nodes = [f"network-node:nn-{maker.word(_HEX, 17)}" for _ in range(3)]
        corpus.topology_ids += [n.split(":", 1)[1] for n in nodes]
        placements.append(Placement(host=host, provider="aws", instance_id=corpus.instance_ids[index],
                                    instance_type="p5.48xlarge", region="us-east-1", zone="us-east-1a",
                                    topology=nodes, extra={"PrivateIpAddress": corpus.roce[host][0]},
                                    source="provider:aws"))
    write_placements(root, placements)
    # An NCCL log given on the command line: bootstrap addresses, host names, and the job's environment.
    nccl = root.parent / f"{root.name}-nccl.log"
    ip4 = corpus.roce[corpus.hosts[1]][0]
    wandb = maker.secret(40 - 8)
    corpus.secrets.append(Planted("secret", wandb))
    nccl.write_text(f"{corpus.hosts[1]}:4242:4242 [0] NCCL INFO Bootstrap : Using ens1f0np0:{ip4}<0>\n"
                    f"{corpus.hosts[1]}:4242:4242 [0] NCCL INFO env WANDB_API_KEY={wandb}\n")
    add_inputs(root, "nccl-log", [nccl])
    nccl.unlink()
    corpus.extra_secrets = [Planted("bearer-token", maker.secret(48)), Planted("password", maker.secret(15))]
    return corpus
