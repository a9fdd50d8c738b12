"""Each failure is one line naming the provider and the operation, throttling and 5xx are retried within a bound,
and a CreateCase whose answer was lost is found again instead of filed twice."""

from __future__ import annotations

import boto3
import pytest
from awsfakes import REGION, answer_once, stub_codes, write_config
from test_aws_case import draft, moto_cases

from fabricase.errors import ProviderError
from fabricase.providers.aws import AwsProvider

_THROTTLED = {"__type": "ThrottlingException", "message": "Rate exceeded"}
_SERVER = {"__type": "InternalServerError", "message": "internal error"}


def test_missing_credentials_is_one_line(paths, moto, monkeypatch):
    write_config(paths.config, moto)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    provider = AwsProvider(paths, sleep=lambda s: None)  # its own clients, from config.toml
    with pytest.raises(ProviderError) as info:
        provider.locate([{"host": "gpu001", "identity": {"board_asset_tag": "i-0123456789abcdef0"}}])
    assert str(info.value).startswith("aws: DescribeInstances: no AWS credentials found")
    assert "\n" not in str(info.value)


def test_no_support_plan_fails_before_filing(provider, clients, moto):
    clients.stub("support").add_client_error("describe_services", "SubscriptionRequiredException",
                                             "AWS Premium Support Subscription is required to use this service.", 400)
    with pytest.raises(ProviderError, match=r"^aws: DescribeServices: no AWS support plan with API access"):
        provider.file_case(escalation_id="FC-1", draft=draft(), bundle_path=None)
    assert moto_cases(moto) == []


def test_permission_denied_on_create_case_is_one_line_and_not_retried(provider, clients, moto):
    stub_codes(clients)
    denied = answer_once(clients.clients["support"], "CreateCase", 400, {
        "__type": "AccessDeniedException", "message": "User is not authorized to perform: support:CreateCase"})
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-1", draft=draft(), bundle_path=None)
    assert str(info.value) == ("aws: CreateCase: permission denied (AccessDeniedException): User is not authorized to "
                               "perform: support:CreateCase")
    assert denied == [400] and moto_cases(moto) == []


def test_throttled_create_case_is_retried_with_backoff_and_files_once(paths, clients, moto):
    slept: list[float] = []
    provider = AwsProvider(paths, sleep=slept.append)
    stub_codes(clients)
    throttled = answer_once(clients.clients["support"], "CreateCase", 400, _THROTTLED, times=2)
    result = provider.file_case(escalation_id="FC-1", draft=draft(), bundle_path=None)
    assert throttled == [400, 400] and len(slept) == 2 and 0 <= slept[0] <= 0.5 and 0 <= slept[1] <= 1.0
    assert [c["caseId"] for c in moto_cases(moto)] == [result.case_id]


def test_a_lost_create_case_answer_is_reconciled_not_filed_twice(provider, clients, moto):
    """The first CreateCase opened the case but its answer was a 503: the retry finds it by its marker."""
    stub_codes(clients)
    side = boto3.client("support", region_name=REGION, endpoint_url=moto)

    def opened_anyway() -> None:
        side.create_case(subject="[fabricase FC-1] what the first try opened", communicationBody="x")

    lost = answer_once(clients.clients["support"], "CreateCase", 503, _SERVER, before=opened_anyway)
    result = provider.file_case(escalation_id="FC-1", draft=draft(), bundle_path=None)
    cases = moto_cases(moto)
    assert lost == [503] and len(cases) == 1 and result.case_id == cases[0]["caseId"]


def test_persistent_5xx_gives_up_after_the_bound(provider, clients, moto):
    stub_codes(clients)
    failed = answer_once(clients.clients["support"], "CreateCase", 500, _SERVER, times=99)
    with pytest.raises(ProviderError, match=r"^aws: CreateCase: AWS server error 500 \(InternalServerError\) "
                                            r"\(after 5 attempts\)$"):
        provider.file_case(escalation_id="FC-1", draft=draft(), bundle_path=None)
    assert len(failed) == 5 and moto_cases(moto) == []


def test_an_expired_upload_link_is_one_line_and_nothing_is_filed(paths, clients, moto, uploads, tmp_path):
    write_config(paths.config, moto, attachments="upload-links")
    provider = AwsProvider(paths, sleep=lambda s: None)
    bundle = tmp_path / "b.tar.gz"
    bundle.write_bytes(b"x" * 1000)
    stub_codes(clients)
    clients.stub("support").add_response("get_attachment_upload_links", {
        "uploadId": "upl-9", "partSizeBytes": 1000, "totalParts": 1,
        "uploadUrls": [{"url": f"{uploads.url}/upl-9/part1", "partIndex": 1,
                        "expiryDate": "2026-12-01T00:00:00Z"}]}, None)
    uploads.fail = [403]
    with pytest.raises(ProviderError, match=r"^aws: PUT upload part: HTTP 403 from the upload link$"):
        provider.file_case(escalation_id="FC-1", draft=draft(), bundle_path=bundle)
    assert moto_cases(moto) == []


def test_bad_configuration_is_one_line(paths, moto):
    write_config(paths.config, moto, attachments="carrier-pigeon")
    with pytest.raises(Exception, match="attachments must be one of auto, upload-links, attachment-set") as info:
        AwsProvider(paths).file_case(escalation_id="FC-1", draft=draft(), bundle_path=None)
    assert "\n" not in str(info.value)


def test_no_region_anywhere_is_one_line(paths):
    (paths.config / "config.toml").write_text("[providers.aws]\n")
    with pytest.raises(ProviderError, match="no AWS region: set region in \\[providers.aws\\] or AWS_DEFAULT_REGION"):
        AwsProvider(paths).locate([{"host": "a", "identity": {"board_asset_tag": "i-0123456789abcdef0"}}])
