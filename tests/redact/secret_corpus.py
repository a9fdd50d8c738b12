"""A seeded corpus of secrets in the formats fabricase must redact, look-alikes it must leave, and adversarial
texts for the rules' linearity (issue 14).

    from secret_corpus import Secret, LookAlike, secret_corpus, lookalikes
    for s in secret_corpus(seed=7):      # >= 300 secrets in >= 40 formats
        s.kind, s.value, s.text          # the kind it is counted under, the value, a line that carries it
    for la in lookalikes(seed=7):        # >= 100 texts that must come back unchanged
        la.kind, la.text

Every value is built at run time from the seeded generator (no literal credential is stored here); `text` is a
realistic carrier (a kernel or NCCL log line, an env or YAML line, a command line, JSON, a URL, a key file).
The same seed gives the same corpus. `carrier_lines(value)` puts a value in every carrier;
`adversarial_texts(rule, size)` gives the texts the linearity test and
benchmarks/bench_redact.py run each rule's regex on.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

from fabricase.redact.secrets import SecretRule

__all__ = ["LookAlike", "Secret", "adversarial_texts", "carrier_lines", "lookalikes", "secret_corpus"]

_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_LOWER_DIGITS = string.ascii_lowercase + string.digits
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "_-"


@dataclass(frozen=True)
class Secret:
    kind: str  # the kind redaction counts it under (`[REDACTED:<kind>]`)
    value: str  # must not appear in the redacted text
    text: str  # a realistic line (or block) that carries it


@dataclass(frozen=True)
class LookAlike:
    kind: str  # what it is (digest, gpu-uuid, counter...)
    text: str  # must come back from redaction unchanged


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def word(self, alphabet: str, n: int) -> str:
        # Mixed classes where the alphabet has them, so that a value never reads as a number or a word.
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            digits = not any(c.isdigit() for c in alphabet) or any(c.isdigit() for c in value)
            if digits and (not any(c.isupper() for c in alphabet) or any(c.isupper() for c in value)):
                return value

    def alnum(self, n: int) -> str:
        return self.word(_ALNUM, n)

    def hex(self, n: int) -> str:
        return self.word(_HEX, n)

    def b64(self, n: int) -> str:
        return self.word(_B64, n)

    def urlsafe(self, n: int) -> str:
        return self.word(_URLSAFE, n)

    def digits(self, n: int) -> str:
        return str(self.rng.randrange(1, 10)) + "".join(self.rng.choice(string.digits) for _ in range(n - 1))

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def host(self) -> str:
        return f"gpu{self.rng.randrange(1, 512):03d}"

    def pick(self, options):
        return self.rng.choice(options)


# -- carriers: where a bare token is found -------------------------------------------------------------------

def _carriers(g: _Gen, key: str, value: str) -> list[str]:
    host, pid = g.host(), g.rng.randrange(1000, 65000)
    return [
        f"{key}={value}",
        f'export {key}="{value}"',
        f"2026-11-30T01:02:{g.rng.randrange(60):02d}.000004+0000 {host} python[{pid}]: loaded credential {value}",
        f"{host}:{pid}:{pid} [0] NCCL INFO env {key}={value}",
        f"docker run --gpus all -e {key}={value} nvcr.io/nvidia/pytorch:24.10-py3 python train.py",
        json.dumps({"job": "pretrain-7b", key.lower(): value, "nodes": 64}),
        f"  {key.lower()}: {value}",
        f"client = Client(api_key='{value}', timeout=30)",
        f"curl -s -H 'Authorization: Bearer {value}' https://api.example.com/v1/models",
        f"[{host}] rotate {value} before Friday",
    ]


def carrier_lines(value: str, key: str = "API_TOKEN", seed: int = 0) -> list[str]:
    """Every carrier a bare token is planted in (an env, NCCL or kernel log line, a command line, JSON, YAML,
    code, a header, prose), holding `value` under `key` where the carrier has a key."""
    return _carriers(_Gen(seed), key, value)


def _bare(g: _Gen, kind: str, key: str, make: Callable[[_Gen], str], n: int = 5) -> list[Secret]:
    out = []
    for _ in range(n):
        value = make(g)
        out.append(Secret(kind, value, g.pick(_carriers(g, key, value))))
    return out


def _pem(g: _Gen, label: str) -> tuple[str, str]:
    body = [g.b64(64) for _ in range(5)]
    return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----\n", body[2]


# -- the formats ----------------------------------------------------------------------------------------------

_VENDOR: list[tuple[str, str, Callable[[_Gen], str]]] = [
    ("aws-session-token", "AWS_SESSION_TOKEN_B64", lambda g: "IQoJb3JpZ2luX2Vj" + g.b64(300)),
    ("aws-bedrock-api-key", "AWS_BEARER_TOKEN_BEDROCK", lambda g: "ABSK" + g.word(_ALNUM, 132)),
    ("gcp-oauth-client-secret", "GOOGLE_CLIENT_SECRET_JSON", lambda g: "GOCSPX-" + g.urlsafe(28)),
    ("gcp-oauth-token", "GCE_ACCESS", lambda g: "ya29." + g.urlsafe(120)),
    ("digitalocean-token", "DIGITALOCEAN_ACCESS", lambda g: g.pick(("dop", "doo", "dor")) + "_v1_" + g.hex(64)),
    ("alibaba-access-key-id", "ALIBABA_CLOUD_AK", lambda g: "LTAI" + g.alnum(20)),
    ("heroku-api-key", "HEROKU_KEY_V2", lambda g: "HRKU-AA" + g.urlsafe(58)),
    ("vault-token", "VAULT_TOKEN_VALUE", lambda g: "hvs." + g.urlsafe(92)),
    ("databricks-token", "DATABRICKS_HOST_PAT", lambda g: "dapi" + g.hex(32)),
    ("nvidia-api-key", "NGC_CLI_API", lambda g: "nvapi-" + g.urlsafe(64)),
    ("huggingface-token", "HF_TOKEN", lambda g: "hf_" + g.alnum(34)),
    ("anthropic-api-key", "ANTHROPIC_API_KEY", lambda g: "sk-ant-api03-" + g.urlsafe(93) + "AA"),
    ("openai-api-key", "OPENAI_API_KEY", lambda g: "sk-proj-" + g.urlsafe(156)),
    ("openai-api-key", "OPENAI_KEY_LEGACY", lambda g: "sk-" + g.alnum(20) + "T3BlbkFJ" + g.alnum(20)),
    ("replicate-api-token", "REPLICATE_API_TOKEN", lambda g: "r8_" + g.alnum(37)),
    ("groq-api-key", "GROQ_API_KEY", lambda g: "gsk_" + g.alnum(52)),
    ("langsmith-api-key", "LANGSMITH_API_KEY", lambda g: f"lsv2_pt_{g.hex(32)}_{g.hex(10)}"),
    ("github-token", "GH_PAT", lambda g: g.pick(("ghp_", "gho_", "ghs_")) + g.alnum(36)),
    ("github-token", "GH_FINE_GRAINED", lambda g: "github_pat_" + g.alnum(22) + "_" + g.alnum(59)),
    ("gitlab-token", "GITLAB_PAT", lambda g: "glpat-" + g.alnum(20)),
    ("circleci-token", "CIRCLECI_CLI", lambda g: f"CCIPAT_{g.alnum(22)}_{g.hex(40)}"),
    ("buildkite-token", "BUILDKITE_API", lambda g: "bkua_" + g.hex(40)),
    ("npm-token", "NPM_AUTH", lambda g: "npm_" + g.alnum(36)),
    ("pypi-token", "TWINE_PASSWORD_VALUE", lambda g: "pypi-AgEIcHlwaS5vcmc" + g.urlsafe(70)),
    ("rubygems-token", "GEM_HOST_API", lambda g: "rubygems_" + g.hex(48)),
    ("dockerhub-token", "DOCKERHUB_PAT", lambda g: "dckr_pat_" + g.urlsafe(27)),
    ("nuget-api-key", "NUGET_API", lambda g: "oy2" + g.word(_LOWER_DIGITS, 43)),
    ("slack-token", "SLACK_BOT", lambda g: f"xoxb-{g.digits(12)}-{g.digits(13)}-{g.alnum(24)}"),
    ("slack-webhook", "SLACK_WEBHOOK_URL",
     lambda g: f"T{g.word(_UPPER_DIGITS, 10)}/B{g.word(_UPPER_DIGITS, 10)}/{g.alnum(24)}"),
    ("discord-webhook", "DISCORD_WEBHOOK_URL", lambda g: f"{g.digits(19)}/{g.urlsafe(68)}"),
    ("discord-bot-token", "DISCORD_BOT",
     lambda g: f"M{g.alnum(25)}.{g.urlsafe(6)}.{g.urlsafe(38)}"),
    ("teams-webhook", "TEAMS_WEBHOOK_URL",
     lambda g: f"{g.uuid()}@{g.uuid()}/IncomingWebhook/{g.hex(32)}/{g.uuid()}"),
    ("telegram-bot-token", "TELEGRAM_BOT", lambda g: f"{g.digits(10)}:AA{g.urlsafe(33)}"),
    ("stripe-key", "STRIPE_SECRET", lambda g: g.pick(("sk_live_", "rk_live_", "sk_test_")) + g.alnum(99)),
    ("square-token", "SQUARE_ACCESS", lambda g: "sq0atp-" + g.urlsafe(22)),
    ("braintree-token", "BRAINTREE_ACCESS",
     lambda g: f"access_token$production${g.word(_LOWER_DIGITS, 16)}${g.hex(32)}"),
    ("twilio-key", "TWILIO_SID", lambda g: g.pick(("SK", "AC")) + g.hex(32)),
    ("sendgrid-api-key", "SENDGRID_API", lambda g: f"SG.{g.urlsafe(22)}.{g.urlsafe(43)}"),
    ("mailgun-api-key", "MAILGUN_API", lambda g: "key-" + g.hex(32)),
    ("mailchimp-api-key", "MAILCHIMP_API", lambda g: f"{g.hex(32)}-us{g.rng.randrange(1, 21)}"),
    ("shopify-token", "SHOPIFY_ADMIN", lambda g: "shpat_" + g.hex(32)),
    ("sentry-token", "SENTRY_USER", lambda g: "sntryu_" + g.hex(64)),
    ("age-secret-key", "SOPS_AGE_KEY",
     lambda g: "AGE-SECRET-KEY-1" + g.word("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    ("artifactory-token", "JFROG_API", lambda g: "AKCp" + g.alnum(69)),
    ("atlassian-token", "JIRA_API", lambda g: "ATATT3" + g.urlsafe(186)),
    ("brevo-api-key", "BREVO_API", lambda g: f"xkeysib-{g.hex(64)}-{g.alnum(16)}"),
    ("cloudflare-origin-ca-key", "CF_ORIGIN_CA", lambda g: f"v1.0-{g.hex(24)}-{g.hex(146)}"),
    ("doppler-token", "DOPPLER_SVC", lambda g: "dp.st." + g.alnum(43)),
    ("dynatrace-token", "DT_API", lambda g: f"dt0c01.{g.word(_UPPER_DIGITS, 24)}.{g.word(_UPPER_DIGITS, 64)}"),
    ("flyio-token", "FLY_API", lambda g: "fo1_" + g.urlsafe(43)),
    ("grafana-token", "GRAFANA_SA", lambda g: f"glsa_{g.alnum(32)}_{g.hex(8)}"),
    ("linear-api-key", "LINEAR_API", lambda g: "lin_api_" + g.alnum(40)),
    ("newrelic-api-key", "NEW_RELIC_USER", lambda g: "NRAK-" + g.word(_UPPER_DIGITS, 27)),
    ("notion-token", "NOTION_INTEGRATION", lambda g: "ntn_" + g.alnum(46)),
    ("onepassword-token", "OP_SERVICE_ACCOUNT", lambda g: "ops_eyJ" + g.b64(300)),
    ("perplexity-api-key", "PPLX_API", lambda g: "pplx-" + g.alnum(48)),
    ("pinecone-api-key", "PINECONE_API", lambda g: f"pcsk_{g.alnum(6)}_{g.alnum(64)}"),
    ("postman-api-key", "POSTMAN_API", lambda g: f"PMAK-{g.hex(24)}-{g.hex(34)}"),
    ("prefect-api-key", "PREFECT_API", lambda g: "pnu_" + g.alnum(36)),
    ("pulumi-token", "PULUMI_ACCESS", lambda g: "pul-" + g.hex(40)),
    ("sonar-token", "SONAR_LOGIN", lambda g: "sqp_" + g.hex(40)),
    ("terraform-api-token", "TFE_API", lambda g: f"{g.alnum(14)}.atlasv1.{g.urlsafe(67)}"),
    ("xai-api-key", "XAI_API", lambda g: "xai-" + g.alnum(80)),
]

# URL-shaped vendor values: the carrier must hold the URL, the value is the part after the host.
_URL_PREFIX = {
    "slack-webhook": "https://hooks.slack.com/services/",
    "discord-webhook": "https://discord.com/api/webhooks/",
    "teams-webhook": "https://contoso.webhook.office.com/webhookb2/",
}


def _vendor(g: _Gen) -> list[Secret]:
    out = []
    for kind, key, make in _VENDOR:
        prefix = _URL_PREFIX.get(kind)
        if prefix is None:
            out += _bare(g, kind, key, make)
            continue
        for _ in range(5):
            value = make(g)
            url = prefix + value
            out.append(Secret(kind, value, g.pick([
                f"{key}={url}", f"curl -X POST -d @payload.json {url}", json.dumps({"webhook": url}),
                f"2026-11-30T00:00:01Z alertmanager[911]: notify {url} failed: 429"])))
    return out


def _cloud(g: _Gen) -> list[Secret]:
    out = []
    for _ in range(5):
        key_id, secret = "AKIA" + g.word(_UPPER_DIGITS, 16), g.b64(40)
        out.append(Secret("aws-access-key-id", key_id, f"aws_access_key_id = {key_id}"))
        out.append(Secret("aws-secret-access-key", secret,
                          g.pick([f"aws_secret_access_key = {secret}", f'"SecretAccessKey": "{secret}",',
                                  f"AWS_SECRET_ACCESS_KEY={secret} aws s3 ls"])))
        token = g.b64(200)
        out.append(Secret("aws-session-token", token, f"export AWS_SESSION_TOKEN={token}"))
        api = "AIza" + g.urlsafe(35)
        out.append(Secret("google-api-key", api, f"GET https://generativelanguage.googleapis.com/v1/models?key={api}"))
        key_id = g.hex(40)
        pem, line = _pem(g, "PRIVATE KEY")
        sa = json.dumps({"type": "service_account", "project_id": "fabric-prod", "private_key_id": key_id,
                         "private_key": pem, "client_email": "diag@fabric-prod.iam.gserviceaccount.com"}, indent=2)
        out.append(Secret("gcp-private-key-id", key_id, sa))
        out.append(Secret("gcp-private-key", line, sa))
        azure = g.alnum(3) + str(g.rng.randrange(10)) + "Q~" + g.word(_ALNUM + "_~.-", 34)
        out.append(Secret("azure-client-secret", azure, f"AZURE_CLIENT_SECRET={azure}"))
        storage = g.b64(86) + "=="
        out.append(Secret("azure-storage-key", storage,
                          f"DefaultEndpointsProtocol=https;AccountName=diag;AccountKey={storage};"
                          f"EndpointSuffix=core.windows.net"))
        sig = g.alnum(30) + "%2B" + g.alnum(10) + "%3D"
        out.append(Secret("azure-sas-signature", sig,
                          f"https://diag.blob.core.windows.net/b/x.tgz?sv=2022-11-02&sp=cw&sig={sig}"))
        ibm = g.urlsafe(44)
        out.append(Secret("secret", ibm, f"IBMCLOUD_API_KEY={ibm}"))
        ali = g.alnum(30)
        out.append(Secret("secret", ali, f"ALIBABA_CLOUD_ACCESS_KEY_SECRET={ali}"))
    return out


def _keyed(g: _Gen) -> list[Secret]:
    """Values with no shape of their own: known by the key they stand under."""
    out = []
    for key in ("WANDB_API_KEY", "COHERE_API_KEY", "CO_API_KEY", "TRAVIS_API_TOKEN", "CIRCLE_TOKEN",
                "BUILDKITE_AGENT_TOKEN", "MISTRAL_API_KEY", "TOGETHER_API_KEY", "DD_API_KEY", "HEROKU_API_KEY"):
        value = g.hex(40) if key == "WANDB_API_KEY" else g.alnum(40)
        out.append(Secret("secret", value, g.pick([f"{key}={value}", f"{g.host()}:77:77 [3] NCCL INFO env "
                                                   f"{key}={value}", f'  "{key.lower()}": "{value}",'])))
    for _ in range(3):
        value = g.hex(40)
        out.append(Secret("secret", value, f"wandb login --relogin {value}"))
    for _ in range(3):
        value = g.alnum(26)
        out.append(Secret("high-entropy-secret", value, f"JOB_SECRET_SALT={value}"))
    return out


def _files(g: _Gen) -> list[Secret]:
    """Key material and credential files."""
    out = []
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "PRIVATE KEY",
                  "PGP PRIVATE KEY BLOCK"):
        pem, line = _pem(g, label)
        out.append(Secret("private-key", line, pem))
    for _ in range(2):
        pem, line = _pem(g, "OPENSSH PRIVATE KEY")
        out.append(Secret("ssh-private-key", line, pem))
    for version in (2, 3):
        lines = [g.b64(64) for _ in range(4)]
        text = (f"PuTTY-User-Key-File-{version}: ssh-rsa\nEncryption: none\nComment: rsa-key-20261130\n"
                f"Public-Lines: 2\n{g.b64(64)}\n{g.b64(40)}\nPrivate-Lines: 4\n" + "\n".join(lines)
                + f"\nPrivate-MAC: {g.hex(40)}\n")
        out.append(Secret("putty-private-key", lines[1], text))
    for _ in range(4):
        auth = base64.b64encode(f"robot:{g.alnum(20)}".encode()).decode()
        text = json.dumps({"auths": {"nvcr.io": {"auth": auth}, "ghcr.io": {"auth": auth}}}, indent=g.pick((None, 2)))
        out.append(Secret("docker-auth", auth, text))
    for _ in range(3):
        npm = base64.b64encode(f"ci:{g.alnum(16)}".encode()).decode()
        out.append(Secret("npm-token", npm, f"//registry.example.com/:_auth={npm}"))
    for _ in range(5):
        pw = g.alnum(14)
        out.append(Secret("password", pw, g.pick([f"machine api.wandb.ai login user password {pw}",
                                                   f"machine github.com\n  login ci\n  password {pw}\n"])))
    for _ in range(2):
        pw = g.alnum(16)
        out.append(Secret("password", pw, f'<add key="ClearTextPassword" value="{pw}" />'))
    return out


def _passwords(g: _Gen) -> list[Secret]:
    out = []
    specials = "!#%^*()[]{},.~"
    for _ in range(3):
        for template in ("mysql -h db -u root -p'{}' jobs", 'mysql -h db -uroot -p"{}" jobs',
                         "mysqldump --single-transaction -u backup --password='{}' jobs",
                         'app --password "{}" --batch 64'):
            pw = g.alnum(8) + " " + g.alnum(6)  # a quoted password may hold a space
            out.append(Secret("password", pw, template.format(pw)))
        for template in ("PGPASSWORD={} psql -h db -U etl", "mysql -h db -uroot -p{} jobs",
                         "ipmitool -I lanplus -H 10.255.0.7 -U admin -P {} chassis status",
                         "curl -u admin:{} https://bmc.example.com/redfish/v1/Systems",
                         "openssl pkcs12 -in cert.p12 -passin pass:{} -nokeys", "redis-cli -h cache -a {} ping"):
            pw = g.alnum(10) + g.pick(specials) + g.alnum(4)
            out.append(Secret("password", pw, template.format(pw)))
        pw = g.alnum(14)
        out.append(Secret("url-password", pw, f"psql 'postgresql://etl:{pw}@db.internal:5432/jobs'"))
        # A URL password with `/` and `@` in it: up to the last `@` before the host.
        pw = f"{g.alnum(5)}/{g.alnum(4)}@{g.alnum(5)}"
        out.append(Secret("url-password", pw, f"git clone https://ci:{pw}@git.example.com/fabric/tools.git"))
        pw = f"{g.alnum(6)}@{g.alnum(6)}"
        out.append(Secret("url-password", pw, f"DATABASE_URL=postgres://jobs:{pw}@db.internal:5432/jobs"))
    return out


def _http(g: _Gen) -> list[Secret]:
    out = []
    for _ in range(3):
        jwt = f"eyJ{g.urlsafe(30)}.eyJ{g.urlsafe(40)}.{g.urlsafe(43)}"
        out.append(Secret("jwt", jwt, f"2026-11-30T00:00:00Z {g.host()} api[77]: token={jwt}"))
        basic = g.b64(28)
        out.append(Secret("basic-auth", basic, f"curl -H 'Authorization: Basic {basic}' http://bmc/redfish/v1"))
        bearer = g.alnum(48)
        out.append(Secret("bearer-token", bearer, f"Authorization: Bearer {bearer}"))
        cookie = g.alnum(32)
        out.append(Secret("cookie", cookie, f"Cookie: sessionid={cookie}"))
    return out


def secret_corpus(seed: int = 14) -> list[Secret]:
    """At least 300 secrets in at least 40 formats, fresh random values, each in a realistic carrier."""
    g = _Gen(seed)
    return _vendor(g) + _cloud(g) + _keyed(g) + _files(g) + _passwords(g) + _http(g)


# -- look-alikes ------------------------------------------------------------------------------------------------

def lookalikes(seed: int = 14) -> list[LookAlike]:
    """At least 100 texts that look a little like secrets (digests, GUIDs, UUIDs, GPU UUIDs, firmware, PCI ids,
    MACs, counters, base64 data) and must come back from redaction unchanged."""
    g = _Gen(seed + 1)
    out: list[LookAlike] = []

    def add(kind: str, text: str) -> None:
        out.append(LookAlike(kind, text))

    for _ in range(4):
        sha256, sha1, uuid = g.hex(64), g.hex(40), g.uuid()
        guid = "0x" + g.hex(16)
        groups = ":".join(g.hex(4) for _ in range(4))
        fw = f"{g.rng.randrange(20, 33)}.{g.rng.randrange(30, 45)}.{g.rng.randrange(1000, 3000)}"
        pci = f"0000:{g.hex(2)}:{g.hex(2)}.{g.rng.randrange(8)}"
        mac = ":".join(g.hex(2) for _ in range(6))
        add("digest-under-secret-key", f"token_digest={sha256}")
        add("digest-under-secret-key", f'"secret_sha256": "sha256:{sha256}",')
        add("digest-under-secret-key", f"api_key_hash: {sha1}")
        add("digest-under-secret-key", f"credential_fingerprint={sha1.upper()}")
        add("gpu-uuid-under-secret-key", f"access_key_id: GPU-{uuid}")
        add("gpu-uuid-under-secret-key", f"token_device=MIG-{g.uuid()}")
        add("uuid-under-secret-key", f"secret_uuid: {uuid}")
        add("guid-under-secret-key", f"token_guid={guid}")
        add("guid-under-secret-key", f"credential_port_guid: {groups}")
        add("firmware-under-secret-key", f"private_key_fw_version={fw}")
        add("pci-under-secret-key", f"secret_pci_bus: {pci}")
        add("mac-under-secret-key", f"auth_key_mac={mac}")
        add("sha256", f'{{"path": "capture/hosts/gpu001/stream.fc1", "sha256": "{sha256}", "bytes": 1234}}')
        add("gpu-uuid", f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-{g.uuid()})")
        add("gpu-uuid", f"{g.host()} kernel: NVRM: GPU at PCI:{pci[:-2]}: GPU-{g.uuid()}")
        add("guid", f"\tNode GUID: {guid}")
        add("firmware", f"mlx5_core {pci}: firmware version: {fw}")
        add("mac", f"    link/ether {mac} brd ff:ff:ff:ff:ff:ff")
        add("counter", f"     rx_prio{g.rng.randrange(8)}_pause_duration: {g.rng.randrange(10**9)}")
        add("commit", f"commit {sha1}")
        add("image-digest", f"nvcr.io/nvidia/pytorch@sha256:{sha256}")
    for n in (4096, 8192, 128000):
        add("count", f"max_tokens={n}")
        add("count", f"token_count: {n % 97}")
        add("count", f'"num_tokens": {n},')
        add("count", f"secret_count = {n % 13}")
    for _ in range(4):
        data = base64.b64encode(g.rng.randbytes(60)).decode()
        add("base64-data", f'"thumbnail": "{data}"')
        add("base64-data", f"payload: {data}")
    for text in ("disk-by-uuid", "task-1234567890abcdef1234567890abcdef", "Started Forward Password Requests to Wall.",
                 "sshd[1]: Failed password for root from 10.0.0.1 port 22 ssh2", "Enter password:",
                 "MPTCP token hash table entries: 65536 (order: 8, 1048576 bytes, linear)",
                 "https://example.com/users/@alice/repos", "mail me at ops@example.com",
                 "--password-file /etc/pw --token-file /etc/tok", "mysql -h db -u root -p",
                 "key-value store ready", "ACPI: SSDT 0x00000000BF7B6000 000A3C (v02 INTEL  CpuPm  00004000 INTL)",
                 "nccl-tests: all_reduce_perf -b 8 -e 8G -f 2 -g 8",
                 "Loaded X.509 cert 'Build time autogenerated kernel key: 3b4f1c6e8a7d9e0f1a2b3c4d5e6f708192a3b4c5'",
                 "rx_vport_rdma_unicast_packets: 123456789012", "ib_write_bw -d mlx5_0 --report_gbits -F",
                 "GR00T-N1 model loaded", "hf_hub_download(repo_id='meta-llama/Llama-3.1-8B')",
                 "sk-learn 1.5.2", "x-ghp_token_rotation_enabled: true"):
        add("prose", text)
    return out


# -- adversarial texts ------------------------------------------------------------------------------------------

_CHARS = ("a", "A", "0", "=", " ", '"', "'", "-", "/", "@", ":", ".", "\\", "_", "+", "\t", "\n", "\x00", "aA0")
_SHAPES = ("://a:", "-----BEGIN ", "-----END ", "-- ", "a=", "a: ", '"a":"', "\\\"", "eyJa.", "login a ",
           "Private-Lines: 1\n", "Bearer ", "mysql -p", "a=b&")


def adversarial_texts(rule: SecretRule, size: int) -> dict[str, str]:
    """Texts of about `size` characters that make a backtracking regex slow if it can be: long runs of single
    characters and of the rule's own anchors (alone, before `=`, `: `, quotes, and before a long run)."""
    texts = {f"run {c!r}": (c * (size // len(c) + 1))[:size] for c in _CHARS}
    # A rule with no anchor (a token with no literal in it) gets the starts of such tokens.
    probes = list(rule.anchors) or ["MTA", "SK0", "AC0", "0a.", "0-"]
    for shape in _SHAPES:
        texts[f"repeat {shape!r}"] = (shape * (size // len(shape) + 1))[:size]
    for probe in probes:
        k = size // (len(probe) + 3) + 1
        texts[f"{probe!r} repeated"] = (probe * k)[:size]
        texts[f"{probe!r}= repeated"] = ((probe + "=") * k)[:size]
        texts[f"{probe!r}: repeated"] = ((probe + ": ") * k)[:size]
        texts[f"{probe!r} then blanks"] = probe + ": a" + " " * size + "b"
        texts[f"{probe!r} then a run"] = probe + "=" + "aA0" * (size // 3)
        texts[f"{probe!r} then a quote"] = probe + '="' + "a" * size
    return texts
