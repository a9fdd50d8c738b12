"""The rules, table-tested: each secret kind in the forms it takes, what must never be touched, and how
pseudonyms are formed (canonical values, one token per value and key)."""

from __future__ import annotations

import json
import re
import secrets
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricase.errors import BundleError
from fabricase.redact import PSEUDONYM_KINDS, SECRET_KINDS, Redactor
from fabricase.redact.lines import WINDOW_MIN, on_lines
from fabricase.redact.secrets import redact_secrets

KEY = b"k" * 32
REAL = Path(__file__).parents[1] / "fixtures" / "real"

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example secret
# A temporary (STS) key id of the real shape, made at run time: never a committed literal.
ASIA_ID = "ASIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"

# (kind, text, redacted text)
SECRETS = [
    ("aws-access-key-id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
     "aws_access_key_id = [REDACTED:aws-access-key-id]"),
    ("aws-access-key-id", f"key {ASIA_ID} used", "key [REDACTED:aws-access-key-id] used"),
    ("aws-secret-access-key", f"aws_secret_access_key = {AWS_SECRET}",
     "aws_secret_access_key = [REDACTED:aws-secret-access-key]"),
    ("aws-secret-access-key", f'{{"SecretAccessKey": "{AWS_SECRET}"}}',
     '{"SecretAccessKey": "[REDACTED:aws-secret-access-key]"}'),
    ("aws-session-token", "export AWS_SESSION_TOKEN=FwoGZXIvYXdzEJr//////////wEaDH1Kx",
     "export AWS_SESSION_TOKEN=[REDACTED:aws-session-token]"),
    ("aws-session-token", "GET /b?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2F&X-Amz-Date=20261130",
     "GET /b?X-Amz-Security-Token=[REDACTED:aws-session-token]&X-Amz-Date=20261130"),
    ("gcp-private-key-id", '"private_key_id": "3f2a9c0b1d2e3f405162738495a6b7c8d9e0f1a2",',
     '"private_key_id": "[REDACTED:gcp-private-key-id]",'),
    ("gcp-private-key", f'"private_key": "-----BEGIN PRIVATE KEY-----\\n{PEM_BODY}\\n-----END PRIVATE KEY-----\\n",',
     '"private_key": "[REDACTED:gcp-private-key]",'),
    ("ssh-private-key", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----\nnext",
     "[REDACTED:ssh-private-key]\nnext"),
    ("private-key", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
     "[REDACTED:private-key]"),
    ("private-key", f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n{PEM_BODY[:20]}",  # cut short by a byte cap
     "[REDACTED:private-key]"),
    ("jwt", "id_token=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
     "id_token=[REDACTED:jwt]"),
    ("jwt", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.abcDEF123",
     "Authorization: Bearer [REDACTED:jwt]"),
    ("azure-client-secret", "AZURE_CLIENT_SECRET=Zs18Q~Qm6Yq1DkXxJcWfBnV0rT9uL2pA5sE7gH3k",
     "AZURE_CLIENT_SECRET=[REDACTED:azure-client-secret]"),
    ("azure-client-secret", "client_secret: s3cr3tV4lue-from-portal", "client_secret: [REDACTED:azure-client-secret]"),
    ("azure-storage-key", "AccountName=diag;AccountKey=" + "Ab1+" * 21 + "xY==;EndpointSuffix=core.windows.net",
     "AccountName=diag;AccountKey=[REDACTED:azure-storage-key];EndpointSuffix=core.windows.net"),
    ("azure-sas-signature", "https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=AbCdEf0123456789%2Bxyz%3D&sp=r",
     "https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=[REDACTED:azure-sas-signature]&sp=r"),
    ("github-token", "GITHUB_TOKEN=ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r", "GITHUB_TOKEN=[REDACTED:github-token]"),
    ("slack-token", "-d token=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
     "-d token=[REDACTED:slack-token]"),
    ("google-api-key", "?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "?key=[REDACTED:google-api-key]"),
    ("basic-auth", "-H 'Authorization: Basic YWRtaW46cGFzc3dvcmQ='", "-H 'Authorization: Basic [REDACTED:basic-auth]'"),
    ("bearer-token", '{"Authorization": "Bearer 8f14e45fceea167a5a36dedd4bea2543"}',
     '{"Authorization": "Bearer [REDACTED:bearer-token]"}'),
    ("cookie", "Cookie: sessionid=38afes7a8; csrftoken=77a\nnext", "Cookie: [REDACTED:cookie]\nnext"),
    ("cookie", "Set-Cookie: id=a3fWa; Expires=Wed, 21 Oct 2026 07:28:00 GMT", "Set-Cookie: [REDACTED:cookie]"),
    ("cookie", "curl --cookie 'sid=AbC123xyz' https://x", "curl --cookie '[REDACTED:cookie]' https://x"),
    ("url-password", "mongodb://admin:Tr0ub4dor3@10.0.0.5:27017/db",
     "mongodb://admin:[REDACTED:url-password]@10.0.0.5:27017/db"),
    ("password", "mysql -h db -uroot -pS3cretPw jobs", "mysql -h db -uroot -p[REDACTED:password] jobs"),
    ("password", "/usr/bin/mysqldump -u backup -p S3cretPw jobs",
     "/usr/bin/mysqldump -u backup -p [REDACTED:password] jobs"),
    ("password", "sshpass -p hunter2x ssh bmc", "sshpass -p [REDACTED:password] ssh bmc"),
    ("password", "app --password hunter2x --batch 4", "app --password [REDACTED:password] --batch 4"),
    ("password", "app --db-password=hunter2x", "app --db-password=[REDACTED:password]"),
    ("password", "PGPASSWORD=hunter2x psql -h db", "PGPASSWORD=[REDACTED:password] psql -h db"),
    ("password", "MYSQL_PWD='hunter 2'", "MYSQL_PWD='[REDACTED:password]'"),
    ("password", "  password: correct horse battery staple\n", "  password: [REDACTED:password]\n"),
    ("password", "passwd = two words ; comment", "passwd = [REDACTED:password]"),
    ("password", '{"password": "a\\"b c", "user": "x"}', '{"password": "[REDACTED:password]", "user": "x"}'),
    ("password", "mysql\x00-uroot\x00-pS3cret\x00jobs\x00", "mysql\x00-uroot\x00-p[REDACTED:password]\x00jobs\x00"),
    ("password", "pass=1 PGPASSWORD=12345678\x00HOME=/root", "pass=1 PGPASSWORD=[REDACTED:password]\x00HOME=/root"),
    ("secret", "api_key: 0c8f2e9b7a", "api_key: [REDACTED:secret]"),
    ("secret", "agent --token tok_live_0a9f8e7d --interval 30", "agent --token [REDACTED:secret] --interval 30"),
    ("secret", "WANDB_API_KEY=0123abcdef", "WANDB_API_KEY=[REDACTED:secret]"),
    ("secret", "[auth]\nclient_token = abc def\n", "[auth]\nclient_token = [REDACTED:secret]\n"),
    ("high-entropy-secret", "JOB_SECRET_SALT=q8ZtK2mW9xR4vB7nL3pY6sD1",
     "JOB_SECRET_SALT=[REDACTED:high-entropy-secret]"),
]

# Text that looks a little like a secret and must come back exactly as it was.
UNTOUCHED = [
    "17\n",
    "4: ACTIVE\n",
    "400 Gb/sec (4X NDR)\n",
    "     rx_prio3_pause_duration: 123456789\n",
    "0000:3b:00.0",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, Ch 00000008",
    "2026-11-30T00:00:00.000001+0000 gpu001 kernel: mlx5_core 0000:3b:00.0: Link up",
    "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
    '{"sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b", "bytes": 12}',
    "MPTCP token hash table entries: 65536 (order: 8, 1048576 bytes, linear)",
    "max_token: 4096\nsecret_count = 12\n",
    "TcpExt: SyncookiesSent SyncookiesRecv TCPReqQFullDoCookies",
    "Started Forward Password Requests to Wall Directory Watch.",
    "sshd[1]: Failed password for root from 10.0.0.1 port 22 ssh2",
    "Enter password: \nBearer authentication required\n",
    "Loaded X.509 cert 'Canonical Ltd. Master Certificate Authority: ad91990bc22ab1f517048c23b6655a268e345a63'",
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 AKIA",  # a 40-hex sha1 is no AWS secret key
    "--password-file /etc/pw --token-file /etc/tok",
    "mysql -h db -u root -p\n",
    "net.ipv4.tcp_fastopen_key = 00000000-00000000-00000000-00000000",
]


@pytest.mark.parametrize(("kind", "text", "redacted"), SECRETS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRETS)])
def test_each_secret_form_is_redacted_and_counted(kind, text, redacted):
    redactor = Redactor()
    assert redactor.redact_text("m", text) == redacted
    assert redactor.report()["totals"] == {kind: redacted.count(f"[REDACTED:{kind}]")}
    # Redacting again changes nothing and counts nothing: markers are never matched.
    again = Redactor()
    assert again.redact_text("m", redacted) == redacted
    assert again.report()["totals"] == {}


def test_every_secret_kind_has_a_case():
    # every kind is exercised by tests/redact/test_secret_formats.py; these cases are a subset
    assert {kind for kind, _, _ in SECRETS} <= set(SECRET_KINDS)


def test_aws_secret_key_needs_its_key_id_nearby():
    near = f"creds AKIAIOSFODNN7EXAMPLE {AWS_SECRET}"
    far = f"creds AKIAIOSFODNN7EXAMPLE {'x' * 300} {AWS_SECRET}"
    assert Redactor().redact_text("m", near) == "creds [REDACTED:aws-access-key-id] [REDACTED:aws-secret-access-key]"
    assert AWS_SECRET in Redactor().redact_text("m", far)


@pytest.mark.parametrize("text", UNTOUCHED)
def test_look_alikes_are_not_touched(text):
    redactor = Redactor(pseudonymize=False)
    assert redactor.redact_text("m", text) == text, redactor.report()


def test_every_real_fixture_comes_through_unchanged():
    """Counters, kernel logs, nvidia-smi, ethtool, ibv_devinfo, NCCL logs from real machines hold no secret:
    not one byte of them may change."""
    redactor = Redactor()
    files = [p for p in sorted(REAL.rglob("*")) if p.is_file()]
    assert len(files) > 500
    changed = [str(p.relative_to(REAL)) for p in files if redactor.redact(p.name, p.read_bytes()) != p.read_bytes()]
    assert changed == []


def test_json_documents_stay_valid_json():
    doc = {"password": 'p"w\\d', "nested": {"api_key": "k3y-v@lue", "token_count": 12},
           "cmd": "mysql -pS3cret db", "private_key": "-----BEGIN PRIVATE KEY-----\nABC\n", "list": ["Cookie: a=b"]}
    for text in (json.dumps(doc), json.dumps(doc, indent=2)):
        out = json.loads(Redactor().redact_text("m", text))
        assert out["password"] == "[REDACTED:password]"
        assert out["nested"] == {"api_key": "[REDACTED:secret]", "token_count": 12}
        assert out["cmd"] == "mysql -p[REDACTED:password] db"
        assert out["private_key"] == "[REDACTED:gcp-private-key]"
        assert out["list"] == ["Cookie: [REDACTED:cookie]"]


def test_binary_content_is_scanned_byte_for_byte():
    head, tail = bytes(range(256)) * 4, b"\xff\xfe\x00\x80" * 64
    data = head + b"\npassword=hunter2xyz\n" + tail
    out = Redactor().redact("blob", data)
    assert out == head + b"\npassword=[REDACTED:password]\n" + tail
    assert Redactor().redact("blob", head + tail) == head + tail


def test_big_texts_are_redacted_as_small_ones():
    """Megabyte outputs are searched line by line around candidate anchors: the result is the same as the
    plain pass over every line."""
    lines = [f"2026-11-30T00:00:{i % 60:02d} gpu001 kernel: eth{i % 8}: rx {i} packets" for i in range(400)]
    lines[17] = "app: password=hunter2xyz token: abcdef123456"
    lines[203] = "curl -H 'Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543' Cookie: a=b"
    lines[399] = "-----BEGIN RSA PRIVATE KEY-----"  # cut at the end: to the end of the text
    text = "\n".join(lines) + "\n" + PEM_BODY
    assert len(text) > WINDOW_MIN
    whole = Redactor().redact_text("m", text)
    assert whole.splitlines()[:399] == [Redactor().redact_text("m", line) for line in lines[:399]]
    assert whole.endswith("\n[REDACTED:private-key]")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["x", "key=abc", "", "password: a b", "17", "é ü", "AKIA"]), max_size=400))
def test_line_windows_splice_back_exactly(lines):
    text = "\n".join(lines)
    marked = on_lines(text, lambda t: [m.start() for m in re.finditer("password", t)],
                      lambda t: t.replace("password: a b", "password: ***"))
    assert marked == text.replace("password: a b", "password: ***")


def test_redact_secrets_counts_by_kind():
    from collections import Counter

    counts: Counter[str] = Counter()
    out = redact_secrets("a AKIAIOSFODNN7EXAMPLE b AKIAIOSFODNN7EXAMPLF password=x1", counts)
    assert out == "a [REDACTED:aws-access-key-id] b [REDACTED:aws-access-key-id] password=[REDACTED:password]"
    assert counts == {"aws-access-key-id": 2, "password": 1}


# -- pseudonyms --------------------------------------------------------------------------------------------


def pseudo(hosts=("gpu001", "gpu002", "node7.cluster.local"), key=KEY) -> Redactor:
    return Redactor(pseudonymize=True, key=key, hosts=list(hosts))


def tokens(text: str) -> list[str]:
    return re.findall(rf"(?:{'|'.join(PSEUDONYM_KINDS)})-[0-9a-f]{{10}}", text)


@pytest.mark.parametrize(("forms", "kind"), [
    (["fe80::e42:a1ff:fe12:3456", "FE80::0E42:A1FF:FE12:3456", "fe80:0:0:0:e42:a1ff:fe12:3456"], "ip6"),
    # Eight groups of four is how GIDs are printed: a gid token, with the hex of the same address.
    (["2001:db8::1", "2001:0db8:0000:0000:0000:0000:0000:0001"], None),
    (["0c:42:a1:12:34:56", "0C-42-A1-12-34-56"], "mac"),
    (["0x0c42a10300123456", "0c42:a103:0012:3456", "0c:42:a1:03:00:12:34:56"], "guid"),
    (["Node GUID: 0x0c42a10300123456", "S-0c42a10300123456"], None),
])
def test_one_value_in_any_form_gets_one_token(forms, kind):
    redactor = pseudo()
    found = [tokens(redactor.redact_text("m", f)) for f in forms]
    assert all(len(t) == 1 for t in found), found
    assert len({t[0].split("-", 1)[1] for t in found}) == 1  # the same hex, whatever the form
    if kind:
        assert all(t[0].startswith(kind + "-") for t in found)


def test_a_roce_gid_shares_the_hex_of_its_address():
    redactor = pseudo()
    ip4 = redactor.redact_text("m", "inet 10.1.2.3/24")
    gid = redactor.redact_text("m", "0000:0000:0000:0000:0000:ffff:0a01:0203")
    mapped = redactor.redact_text("m", "::ffff:10.1.2.3")
    link = redactor.redact_text("m", "fe80:0000:0000:0000:0e42:a1ff:fe12:3456 fe80::e42:a1ff:fe12:3456")
    assert ip4.startswith("inet ip4-") and gid == "gid-" + ip4[9:19] and mapped == "ip6-" + ip4[9:19]
    assert link.split()[0][4:] == link.split()[1][4:]


@pytest.mark.parametrize("text", [
    "lo 127.0.0.1 mask 255.255.255.0 any 0.0.0.0 bcast 255.255.255.255",
    "::1 and :: and 12:34:56 and 0000:3b:00.0 and 00000000:3B:00.0",
    "brd ff:ff:ff:ff:ff:ff zero 00:00:00:00:00:00 guid 0x0000000000000000",
    "gid 0000:0000:0000:0000:0000:0000:0000:0000",
    "2026-11-30T00:00:00.000001+0000 v1.2.3.4 1.2.3.4.5",
    "user=root uid=0(root) for user root",
    "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
    "gpu0010 xgpu001 gpu001x",
])
def test_what_identifies_nothing_keeps_its_value(text):
    assert pseudo().redact_text("m", text) == text


def test_host_names_fqdns_and_aliases():
    redactor = pseudo()
    out = redactor.redact_text("m", "gpu001 GPU001 gpu001.cluster.example.com x-gpu002-ib gpu001.json node7 "
                                    "node7.cluster.local")
    g1, g2, n7 = (redactor.host_pseudonym(h) for h in ("gpu001", "gpu002", "node7.cluster.local"))
    assert out == f"{g1} {g1} {g1} x-{g2}-ib {g1}.json {n7} {n7}"
    assert redactor.host_pseudonym("GPU001") == g1
    assert redactor.redact_path("capture/hosts/gpu001/stream.fc1") == f"capture/hosts/{g1}/stream.fc1"
    with pytest.raises(BundleError, match="not one of the capture's hosts"):
        redactor.host_pseudonym("gpu999")


def test_user_names_in_their_forms_and_wherever_else_they_stand_alone():
    redactor = pseudo()
    text = ("alice  31337 python /home/alice/train.py\nsession opened for user bob(uid=1001) by (uid=0)\n"
            "uid=1002(carol) gid=1002(carol)\nUSER=dave SUDO_USER=dave\nAccepted publickey for erin from 10.0.0.1 "
            "port 22\nInvalid user mallory from 10.0.0.2\nhttps://frank@git.example.com/x\n")
    out = redactor.redact_text("m", text)
    for name in ("alice", "bob", "carol", "dave", "erin", "mallory", "frank"):
        assert name not in out
    assert out.count(redactor.redact_text("x", "/home/alice")[6:]) == 2  # /home/alice and the ps column


def test_the_same_key_gives_the_same_tokens_and_another_key_others():
    text = "gpu001 10.1.2.3 0c:42:a1:12:34:56 /home/alice"
    assert pseudo().redact_text("a", text) == pseudo().redact_text("b", text)
    assert pseudo(key=b"x" * 32).redact_text("a", text) != pseudo().redact_text("a", text)
    assert set(tok.split("-")[0] for tok in tokens(pseudo().redact_text("a", text))) == {"host", "ip4", "mac", "user"}


def test_protected_ids_are_left_even_when_they_look_like_a_host():
    redactor = pseudo(hosts=("gpu001",))
    text = ('{"host": "gpu001", "instance_id": "gpu001", "topology": ["network-node:nn-0a1b2c3d4e5f60718", '
            '"block:gpu001-b", "subblock:10.1.2.3"]}')
    out = json.loads(redactor.redact_text("placements.json", text))
    assert out == {"host": redactor.host_pseudonym("gpu001"), "instance_id": "gpu001",
                   "topology": ["network-node:nn-0a1b2c3d4e5f60718", "block:gpu001-b", "subblock:10.1.2.3"]}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"pseudonymize": True}, "needs a key"),
    ({"pseudonymize": True, "key": b"short"}, "needs a key"),
    ({"pseudonymize": "yes", "key": KEY}, "true or false"),
    ({"hosts": ["gpu001", ""]}, "non-empty strings"),
])
def test_bad_arguments_are_one_line_errors(kwargs, message):
    with pytest.raises(BundleError, match=message) as err:
        Redactor(**kwargs)
    assert "\n" not in str(err.value)


def test_report_counts_never_values():
    redactor = pseudo()
    redactor.redact_text("capture/hosts/gpu001/stream.fc1", "gpu001 password=hunter2xyz 10.1.2.3")
    report = redactor.report()
    member = f"capture/hosts/{redactor.host_pseudonym('gpu001')}/stream.fc1"
    assert report["members"] == {member: {"host": 1, "ip4": 1, "password": 1}}
    assert report["totals"] == {"host": 1, "ip4": 1, "password": 1}
    assert re.fullmatch(r"[0-9a-f]{16}", report["key_id"])
    assert report["key_id"] != pseudo(key=b"y" * 32).report()["key_id"]
    text = json.dumps(report)
    assert "hunter2xyz" not in text and "gpu001" not in text and "10.1.2.3" not in text
    redactor.reset()
    assert redactor.report()["totals"] == {} and Redactor().report()["key_id"] is None


_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec=None, exclude_categories=()), max_size=64), st.integers(0, 5000),
       st.binary(min_size=0, max_size=64))
def test_ascii_lower_lowers_a_to_z_only_whatever_the_text(head, pad, raw):
    """Long latin-1 text (the gate reads a binary file so) is lowered as bytes: it must change A-Z alone and
    keep every position, as str.translate does, for any text: surrogates, characters past U+00FF included."""
    from fabricase.redact.lines import ascii_lower

    for text in (head + "Ab\xe9" * pad, raw.decode("latin-1") * (pad // 8 + 1), head * (pad // 16 + 1)):
        assert ascii_lower(text) == text.translate(_LOWER)


def test_a_binary_file_is_redacted_where_its_text_holds_a_secret(tmp_path):
    """The gate reads a binary file (a core, a pcap) as latin-1: a key in it is found, and the other bytes are
    kept, whatever their case."""
    from fabricase.redact import gate

    key = "AKIA" + "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16))
    head, tail = bytes(range(256)) * 40, bytes(range(255, -1, -1)) * 40
    core = tmp_path / "core.bin"
    core.write_bytes(head + f" aws_access_key_id={key} ".encode() + tail)
    with gate.files([core]) as (sent,):
        out = sent.read_bytes()
    assert key.encode() not in out and b"[REDACTED:aws-access-key-id]" in out
    assert out.startswith(head) and out.endswith(tail) and core.read_bytes().count(key.encode()) == 1
