"""The desks' limits (cloud-apis.md), and the choices made from them: how a bundle travels, file names."""

from __future__ import annotations

import dataclasses
import email.policy
import random
from email.message import EmailMessage

import pytest

from fabricase.bundler.limits import (
    DESK_LIMITS,
    bundle_delivery,
    desk_limits,
    file_name_problem,
    fit_file_name,
    smtp_attachment_bytes,
)
from fabricase.errors import ConfigError

NUMBERS = ("body_max_chars", "attachment_max_bytes", "max_attachments", "file_name_max")


def test_every_desk_is_registered_with_the_documented_limits():
    assert set(DESK_LIMITS) == {"aws", "gcp", "azure", "jira", "zendesk", "email", "outbox", "generic"}
    aws, gcp, azure = DESK_LIMITS["aws"], DESK_LIMITS["gcp"], DESK_LIMITS["azure"]
    assert (aws.body_max_chars, aws.attachment_max_bytes, aws.large_upload_max_bytes) == (8000, 5_000_000, 157_286_400)
    assert aws.max_attachments == 3 and aws.per_file_max == 157_286_400
    assert gcp.body_max_chars == 12_800
    assert (azure.attachment_max_bytes, azure.file_name_max) == (5_242_880, 110)
    assert DESK_LIMITS["zendesk"].attachment_max_bytes == 50_000_000
    assert DESK_LIMITS["jira"].attachment_max_bytes is None  # per instance: read from the desk
    assert all(getattr(DESK_LIMITS["outbox"], n) is None for n in NUMBERS)
    assert all(limits.desk == name for name, limits in DESK_LIMITS.items())


def test_generic_is_the_strictest_of_all():
    generic = DESK_LIMITS["generic"]
    for name in NUMBERS:
        values = [getattr(d, name) for d in DESK_LIMITS.values() if getattr(d, name) is not None]
        assert getattr(generic, name) == min(values), name


def test_overrides_take_what_the_desk_reports():
    jira = desk_limits("jira", attachment_max_bytes=10 * 1024 * 1024)
    assert jira.attachment_max_bytes == 10 * 1024 * 1024 and jira.body_max_chars == 32_767
    assert DESK_LIMITS["jira"].attachment_max_bytes is None  # the registry is not changed
    with pytest.raises(ConfigError, match="unknown desk 'servicenow'; valid: aws, gcp, azure"):
        desk_limits("servicenow")
    with pytest.raises(ConfigError, match="unknown desk limit 'body'; valid: attachment_max_bytes"):
        desk_limits("aws", body=1)
    for bad in (0, -5, True, "8000", 1.5):
        with pytest.raises(ConfigError, match="positive integer"):
            desk_limits("aws", body_max_chars=bad)


@pytest.mark.parametrize("size", [1024 * 1024, 25 * 1024 * 1024])
def test_smtp_attachment_bytes_fit_the_server_size(size):
    data = random.Random(size).randbytes(smtp_attachment_bytes(size))
    msg = EmailMessage()
    msg["Subject"] = "[esc-7] gpu001 rdma:mlx5_3/1 symbol errors"
    msg["From"], msg["To"] = "a@example.com", "b@example.com"
    msg.set_content("x" * 100_000)  # a long ticket body
    msg.add_attachment(data, maintype="application", subtype="gzip", filename="bundle.tar.gz")
    sent = len(msg.as_bytes(policy=email.policy.SMTP))  # CRLF line ends, as on the wire
    assert size - 2 * 256 * 1024 < sent <= size  # the headroom, not more, is left over
    with pytest.raises(ConfigError, match="no room"):
        smtp_attachment_bytes(1000)


def test_bundle_delivery_chooses_the_path():
    aws, azure = DESK_LIMITS["aws"], DESK_LIMITS["azure"]
    assert bundle_delivery(4_000_000, aws).kind == "attach"
    assert bundle_delivery(20_000_000, aws).kind == "large-upload"
    split = bundle_delivery(12_000_000, azure)
    assert (split.kind, split.parts, split.part_bytes) == ("split", 3, 5_242_880)
    assert bundle_delivery(10**12, DESK_LIMITS["outbox"]).kind == "attach"
    with pytest.raises(ConfigError, match="needs 40 parts .* aws takes 3 attachments; upload it"):
        bundle_delivery(200_000_000, aws)
    tight = dataclasses.replace(azure, max_attachments=3)
    assert bundle_delivery(10_000_000, tight).parts == 2
    with pytest.raises(ConfigError, match="needs 3 parts"):
        bundle_delivery(12_000_000, tight)


def test_file_names_the_desk_refuses():
    azure = DESK_LIMITS["azure"]
    assert file_name_problem("report.html", azure) == "azure refuses files ending in .html"
    assert file_name_problem("x" * 111, azure).startswith("azure takes file names of at most 110")
    assert file_name_problem("esc-7.tar.gz.part001-of-003", azure) is None
    assert file_name_problem("report.html", DESK_LIMITS["aws"]) is None


def test_fit_file_name_keeps_the_suffix_and_stays_distinct():
    suffix = ".tar.gz.part001-of-003"
    a = fit_file_name("fabricase-" + "a" * 150 + "-one" + suffix, 110, keep_suffix=suffix)
    b = fit_file_name("fabricase-" + "a" * 150 + "-two" + suffix, 110, keep_suffix=suffix)
    assert len(a) == len(b) == 110 and a.endswith(suffix) and a != b
    assert fit_file_name("short.tar.gz", 110) == "short.tar.gz"
    assert fit_file_name("x" * 200, None) == "x" * 200
    with pytest.raises(ConfigError):
        fit_file_name("x" * 200, 10, keep_suffix=suffix[:0] + "x" * 12)
