"""The one retry and reconcile policy (providers.retry), against the local fakes of GCP, AWS (moto), Jira and
Zendesk: a create whose answer is a 504 AFTER the case was made is found by its marker, not filed twice; an
answer that is not the API's (an HTML 500, an HTML 404, a 501) is not retried and says "not implemented by this
endpoint"; Retry-After is read by one parser; reads retry inside the SDKs (botocore adaptive, google-api-core
Retry, azure-core RetryPolicy) and writes never do."""

from __future__ import annotations

import json
import random
import sys
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from fabricase.config import Paths
from fabricase.errors import ProviderError
from fabricase.models import Severity, TicketDraft
from fabricase.providers.retry import (
    SDK_RETRIED,
    call_with_retries,
    is_transient,
    mark_sdk_retried,
    not_an_api_response,
    retry_after,
)

HERE = Path(__file__).parent
for folder in (HERE, HERE / "gcp", HERE / "aws"):
    sys.path.insert(0, str(folder))
import awsfakes  # noqa: E402
import gcp_fake  # noqa: E402  (points the metadata server at a dead loopback port first)
from desks.fakes import JIRA_EMAIL, JIRA_TOKEN, ZENDESK_EMAIL, ZENDESK_TOKEN, FakeJira, FakeZendesk  # noqa: E402

from loopback import moto_server, random_aws_keys  # noqa: E402

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
NOT_IMPLEMENTED = "not implemented by this endpoint"


def draft(provider: str) -> TicketDraft:
    return TicketDraft(provider=provider, title="[fabricase] symbol errors on mlx5_3 port 1 on 1 host",
                       body="## Summary\n\none link\n", severity=Severity.MAJOR, hosts=["gpu001"],
                       components=["rdma:mlx5_3/1"])


# --- Retry-After: one parser ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("source", "seconds"), [
    ("7", 7.0), (" 120 ", 120.0), ("0", 0.0), ("1.5", 1.5), (b"5", 5.0), (3, 3.0),
    ("-1", None), ("soon", None), ("", None), (None, None), ("inf", None), ("nan", None),
    (format_datetime(NOW + timedelta(seconds=30), usegmt=True), 30.0),
    (format_datetime(NOW - timedelta(hours=1), usegmt=True), 0.0),  # a date gone by: no wait
    ("Tue, 01 Dec 2026 10:01:00", 60.0),  # no zone: GMT, as RFC 9110 dates are
    ({"Retry-After": "7"}, 7.0), ({"retry-after": "9"}, 9.0), (httpx.Headers({"RETRY-AFTER": "3"}), 3.0),
    ({"Content-Type": "application/json"}, None), ({}, None),
])
def test_retry_after_reads_delta_seconds_and_http_dates(source, seconds):
    assert retry_after(source, now=NOW) == seconds


# --- the classification table --------------------------------------------------------------------------------

def _http_error(status: int, body: str = '{"error": "x"}', content_type: str = "application/json",
                headers: dict[str, str] | None = None) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/x")
    response = httpx.Response(status, headers={"Content-Type": content_type, **(headers or {})}, content=body,
                              request=request)
    return httpx.HTTPStatusError(f"HTTP {status}", request=request, response=response)


def _client_error(status: int, code: str):
    import botocore.exceptions

    return botocore.exceptions.ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {
        "HTTPStatusCode": status, "HTTPHeaders": {"content-type": "application/x-amz-json-1.1"}}}, "CreateCase")


def _unreached():
    from fabricase.providers.gcp_support import UploadError

    exc = UploadError("cannot reach http://127.0.0.1/upload", None)
    exc.__cause__ = httpx.ConnectError("refused")
    return exc


def _transient_cases():
    import botocore.exceptions
    from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError, ServiceResponseError
    from google.api_core import exceptions as google

    yes = [408, 425, 429, 500, 502, 503, 504, _http_error(503), _http_error(502, "<html>bad gateway</html>",
                                                                              "text/html"),
           httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), ConnectionResetError(104, "reset"),
           botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1"),
           _client_error(400, "ThrottlingException"), _client_error(503, "ServiceUnavailable"),
           google.ServiceUnavailable("down"), google.GatewayTimeout("slow"), google.DeadlineExceeded("late"),
           google.TooManyRequests("quota"), ServiceRequestError("no route"), ServiceResponseError("reset"),
           _unreached()]
    no = [200, 400, 401, 403, 404, 409, 422, 501, _http_error(400), _http_error(404), _http_error(501),
          _http_error(500, "<!DOCTYPE html><html>oops</html>", "text/html"), _client_error(403, "AccessDenied"),
          google.NotFound("gone"), google.PermissionDenied("no"), ClientAuthenticationError("no credential"),
          google.RetryError("Timeout of 60.0s exceeded", google.ServiceUnavailable("down")), ValueError("bad")]
    return yes, no


def test_one_table_says_what_is_transient():
    yes, no = _transient_cases()
    assert [x for x in yes if not is_transient(x)] == []
    assert [x for x in no if is_transient(x)] == []


def test_an_error_the_sdk_already_retried_is_final():
    exc = _http_error(503)
    mark_sdk_retried(exc.response)
    assert not is_transient(exc) and not is_transient(_marked(_client_error(503, "ServiceUnavailable")))


def _marked(exc):
    exc.response[SDK_RETRIED] = True  # as make_client's hook marks a read botocore gave up on
    return exc


@pytest.mark.parametrize(("exc", "said"), [
    (_http_error(500, "<!DOCTYPE html><html><body>Internal Server Error</body></html>", "text/html"),
     "HTTP 500 with an HTML page"),
    (_http_error(500, "<html><body>oops</body></html>", "application/octet-stream"), "HTTP 500 with an HTML page"),
    (_http_error(404, "<html>Not Found</html>", "text/html"), "HTTP 404 with an HTML page"),
    (_http_error(501), "HTTP 501"),
    (_client_error(404, "404"), "HTTP 404 without the API's error"),  # botocore found no error in the body
    (_http_error(500), None), (_http_error(404), None), (_client_error(404, "ResourceNotFound"), None),
    (_http_error(503, "<html>maintenance</html>", "text/html"), None),  # a gateway's page: transient
])
def test_an_answer_that_is_not_the_apis(exc, said):
    got = not_an_api_response(exc)
    if said is None:
        assert got is None
    else:
        assert got.startswith(said) and got.endswith(NOT_IMPLEMENTED)


# --- call_with_retries: reconcile, Retry-After, not the API ----------------------------------------------------

class Lost(ConnectionResetError):
    pass


def test_a_create_is_retried_only_after_the_search_found_nothing():
    made, searched = [], []

    def create():
        made.append(1)
        if len(made) == 1:
            raise Lost(104, "reset after the case was made")
        return "case-2"

    def find():
        searched.append(1)
        return "case-1" if len(searched) >= 2 else None

    assert call_with_retries(create, provider="p", operation="create", sleep=lambda s: None,
                             reconcile=find) == "case-2"
    assert (len(made), len(searched)) == (2, 1)
    made.clear()
    searched.clear()
    searched.append(1)  # this time the search finds what the lost try made
    assert call_with_retries(create, provider="p", operation="create", sleep=lambda s: None,
                             reconcile=find) == "case-1"
    assert len(made) == 1


def test_a_failed_search_sends_nothing_again():
    made = []

    def create():
        made.append(1)
        raise Lost(104, "reset")

    def find():
        raise ProviderError("search: permission denied", where="p")

    with pytest.raises(ProviderError, match="not sent again, since looking for what it may have created failed: "
                                            "search: permission denied"):
        call_with_retries(create, provider="p", operation="create", sleep=lambda s: None, reconcile=find)
    assert len(made) == 1


def test_retry_after_is_the_least_wait_and_a_long_one_is_not_waited():
    slept, calls = [], []

    def throttled():
        calls.append(1)
        if len(calls) < 3:
            raise _http_error(429, headers={"Retry-After": "7"})
        return "ok"

    assert call_with_retries(throttled, provider="p", operation="op", sleep=slept.append,
                             rng=random.Random(1)) == "ok"
    assert slept == [7.0, 7.0]

    def down():
        raise _http_error(503, headers={"Retry-After": "3600"})

    with pytest.raises(ProviderError, match="asks to wait 3600 s, try again later"):
        call_with_retries(down, provider="p", operation="op", sleep=lambda s: pytest.fail("waited"))


def test_an_answer_that_is_not_the_apis_is_not_retried():
    calls = []

    def html():
        calls.append(1)
        raise _http_error(500, "<!DOCTYPE html><html>oops</html>", "text/html")

    with pytest.raises(ProviderError) as info:
        call_with_retries(html, provider="p", operation="cases.create", sleep=lambda s: pytest.fail("slept"),
                          reconcile=lambda: pytest.fail("searched"))
    assert str(info.value) == f"p: cases.create: HTTP 500 with an HTML page instead of the API's answer: " \
                              f"{NOT_IMPLEMENTED}"
    assert calls == [1]


# --- GCP: cases.create answered 504 after the case was made ----------------------------------------------------

@pytest.fixture
def google():
    with gcp_fake.serving() as g:
        yield g


@pytest.fixture
def gcp(tmp_path, google):
    from google.auth.credentials import AnonymousCredentials

    from fabricase.providers.gcp import GcpProvider

    paths = Paths(data=tmp_path / "data", config=tmp_path / "config")
    gcp_fake.write_profile(paths.config, google.base, classification_id=gcp_fake.CLASSIFICATION_GPU, timeout_s=10)
    slept: list[float] = []
    provider = GcpProvider(paths, credentials=AnonymousCredentials(), sleep=slept.append)
    provider.slept = slept
    return provider


def test_gcp_a_504_after_the_case_was_made_leaves_exactly_one_case(gcp, google):
    google.fail("POST", r"/cases$", 504, "Deadline exceeded", after=True)
    result = gcp.file_case(escalation_id="FC-1", draft=draft("gcp"), bundle_path=None)
    assert len(google.cases) == 1 and result.case_id == next(iter(google.cases))
    assert len(google.seen("POST", r"/cases$")) == 1  # found by its marker, not created again


@pytest.mark.parametrize(("status", "html", "said"), [
    (500, True, "HTTP 500 with an HTML page instead of the API's answer"),
    (501, False, "HTTP 501"),
    (404, True, "HTTP 404 with an HTML page instead of the API's answer"),
])
def test_gcp_an_answer_that_is_not_the_apis_is_not_retried(gcp, google, status, html, said):
    google.fail("POST", r"/cases$", status, "Not Implemented", times=9, html=html)
    with pytest.raises(ProviderError) as info:
        gcp.file_case(escalation_id="FC-1", draft=draft("gcp"), bundle_path=None)
    assert str(info.value) == f"gcp: cloudsupport.cases.create: {said}: {NOT_IMPLEMENTED}"
    assert len(google.seen("POST", r"/cases$")) == 1 and google.cases == {} and gcp.slept == []


def test_gcp_reads_retry_in_google_api_core_and_writes_do_not(gcp, google):
    case = gcp.file_case(escalation_id="FC-1", draft=draft("gcp"), bundle_path=None)
    google.fail("GET", r"/cases/\d+$", 503, "backend error")
    assert gcp._case(case.case_id)["name"] == case.case_id
    assert len(google.seen("GET", r"/cases/\d+$")) == 2 and gcp.slept == []  # the SDK's Retry, not ours
    google.fail("POST", r"/comments$", 503, "backend error")
    gcp.comment(case.case_id, "still failing")
    assert len(google.seen("POST", r"/comments$")) == 2 and len(gcp.slept) == 1  # ours


# --- Jira and Zendesk ------------------------------------------------------------------------------------------

CREDENTIALS = {"FABRICASE_JIRA_EMAIL": JIRA_EMAIL, "FABRICASE_JIRA_TOKEN": JIRA_TOKEN,
               "FABRICASE_ZENDESK_EMAIL": ZENDESK_EMAIL, "FABRICASE_ZENDESK_TOKEN": ZENDESK_TOKEN}


@pytest.fixture(params=["jira", "zendesk"])
def desk(request, tmp_path, monkeypatch):
    from fabricase.providers.desks import make_desk

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    fake = FakeJira() if request.param == "jira" else FakeZendesk()
    base = fake.start()
    settings = {"base_url": base, **({"service_desk_id": "10", "request_type_id": 42}
                                     if request.param == "jira" else {})}
    slept: list[float] = []
    made = make_desk(Paths(data=tmp_path / "d", config=tmp_path / "c"), {"desk": request.param,
                                                                        request.param: settings},
                     env=CREDENTIALS, now=lambda: NOW, sleep=slept.append)
    create = r"^/rest/servicedeskapi/request$" if request.param == "jira" else r"^/api/v2/tickets$"
    yield made, fake, create, slept
    fake.stop()


def _cases(fake) -> int:
    return len(fake.requests if isinstance(fake, FakeJira) else fake.tickets)


def test_desk_a_504_after_the_case_was_made_leaves_exactly_one_case(desk):
    made, fake, create, _ = desk
    if isinstance(fake, FakeZendesk):
        fake.honours_idempotency = False  # the search must do it on its own
    fake.fail("POST", create, 504, process=True)
    result = made.file("FC-1", draft("static"), None)
    assert _cases(fake) == 1 and result.case_id in ("GPU-1", "101")
    assert sum(1 for call in fake.calls if call[0] == "POST" and call[1] in ("/rest/servicedeskapi/request",
                                                                             "/api/v2/tickets")) == 1


@pytest.mark.parametrize(("status", "html", "said"), [
    (500, True, "HTTP 500 with an HTML page instead of the API's answer"),
    (501, False, "HTTP 501"),
    (404, True, "HTTP 404 with an HTML page instead of the API's answer"),
])
def test_desk_an_answer_that_is_not_the_apis_is_not_retried(desk, status, html, said):
    made, fake, create, slept = desk
    fake.fail("POST", create, status, times=9, html=html)
    with pytest.raises(ProviderError) as info:
        made.file("FC-1", draft("static"), None)
    operation = "create request" if isinstance(fake, FakeJira) else "create ticket"
    assert str(info.value).endswith(f": {operation}: {said}: {NOT_IMPLEMENTED}")
    assert _cases(fake) == 0 and slept == []


# --- AWS (moto): CreateCase lost, an HTML 500, and botocore's retries for reads only ----------------------------

@pytest.fixture(scope="module")
def moto_url():
    with moto_server() as url:
        yield url


@pytest.fixture
def aws(tmp_path, monkeypatch, moto_url):
    from fabricase.providers import aws as module

    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_ENDPOINT_URL", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    key_id, secret = random_aws_keys()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    httpx.post(f"{moto_url}/moto-api/reset").raise_for_status()
    home = tmp_path / "home"
    profile = awsfakes.write_config(home, moto_url)
    clients = awsfakes.Clients(profile)
    monkeypatch.setattr(module, "make_client", clients.factory)
    awsfakes.stub_codes(clients)
    slept: list[float] = []
    provider = module.AwsProvider(Paths(data=home, config=home).ensure(), sleep=slept.append)
    return provider, clients, slept, moto_url


def _moto_cases(moto_url: str) -> list[dict]:
    import boto3

    support = boto3.client("support", region_name=awsfakes.REGION, endpoint_url=moto_url)
    return support.describe_cases(includeResolvedCases=True)["cases"]


def test_aws_a_504_after_the_case_was_made_leaves_exactly_one_case(aws):
    import boto3

    provider, clients, _, moto_url = aws
    side = boto3.client("support", region_name=awsfakes.REGION, endpoint_url=moto_url)
    marker = provider._case_payload("FC-1", draft("aws"), None)["subject"].split("]")[0] + "]"

    def made_anyway() -> None:
        side.create_case(subject=f"{marker} what the first try opened", communicationBody="x")

    lost = awsfakes.answer_once(clients.clients["support"], "CreateCase", 504,
                                {"__type": "InternalServerError", "message": "gateway timeout"}, before=made_anyway)
    result = provider.file_case(escalation_id="FC-1", draft=draft("aws"), bundle_path=None)
    cases = _moto_cases(moto_url)
    assert lost == [504] and len(cases) == 1 and result.case_id == cases[0]["caseId"]


def test_aws_an_html_500_is_not_retried(aws):
    provider, clients, slept, moto_url = aws
    answered = awsfakes.answer_once(clients.clients["support"], "CreateCase", 500,
                                    "<html><body><h1>500 Internal Server Error</h1></body></html>", times=9)
    with pytest.raises(ProviderError) as info:
        provider.file_case(escalation_id="FC-1", draft=draft("aws"), bundle_path=None)
    assert str(info.value) == f"aws: CreateCase: HTTP 500 with an HTML page instead of the API's answer: " \
                              f"{NOT_IMPLEMENTED}"
    assert answered == [500] and slept == [] and _moto_cases(moto_url) == []


def test_aws_reads_retry_in_botocores_adaptive_mode_and_writes_do_not(aws):
    provider, clients, slept, moto_url = aws
    support = clients.clients["support"]
    assert support.meta.config.retries["mode"] == "adaptive"
    read = awsfakes.answer_once(support, "DescribeCases", 503, {"__type": "ServiceUnavailable", "message": "busy"})
    assert provider.find_case("FC-1") is None
    assert read == [503] and slept == []  # retried inside botocore, not by providers.retry
    html = awsfakes.answer_once(support, "DescribeCases", 500, "<html><body>500</body></html>")  # a retry: moto
    with pytest.raises(ProviderError, match=f"DescribeCases: HTTP 500 with an HTML page .*: {NOT_IMPLEMENTED}$"):
        provider.find_case("FC-1")
    assert html == [500] and slept == []  # not the API's answer: botocore does not retry it either
    write = awsfakes.answer_once(support, "CreateCase", 503, {"__type": "ServiceUnavailable", "message": "busy"},
                                 times=99)
    with pytest.raises(ProviderError, match=r"\(after 5 attempts\)$"):
        provider.file_case(escalation_id="FC-2", draft=draft("aws"), bundle_path=None)
    assert len(write) == 5 and len(slept) == 4  # ours alone: botocore sent each CreateCase once


# --- Azure: azure-core's RetryPolicy retries reads only ----------------------------------------------------------

@pytest.fixture
def canned():
    """A local HTTP server answering each request with the next (status, content type, body) of `answers`."""
    state = {"answers": [], "seen": []}

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state["seen"].append(self.command)
            status, kind, body = state["answers"].pop(0) if state["answers"] else (200, "application/json", "{}")
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = _serve

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/x"
    yield state
    server.shutdown()
    server.server_close()


def _azure_send(method: str, url: str, slept: list[float]):
    from azure.core.pipeline import Pipeline
    from azure.core.pipeline.transport import RequestsTransport
    from azure.core.rest import HttpRequest

    from fabricase.providers.azure_sdk import read_retry_policy

    with Pipeline(transport=RequestsTransport(), policies=[read_retry_policy(slept.append)]) as pipeline:
        return pipeline.run(HttpRequest(method, url, json={} if method != "GET" else None)).http_response


def test_azure_reads_retry_in_azure_core_and_writes_do_not(canned):
    busy = (503, "application/json", json.dumps({"error": {"code": "ServerBusy", "message": "busy"}}))
    slept: list[float] = []
    canned["answers"] = [busy, busy]
    assert _azure_send("GET", canned["url"], slept).status_code == 200
    assert canned["seen"] == ["GET"] * 3 and len(slept) == 2
    canned["seen"].clear()
    canned["answers"] = [busy]
    response = _azure_send("PUT", canned["url"], slept)
    assert response.status_code == 503 and canned["seen"] == ["PUT"]  # a write: left to providers.retry
    canned["seen"].clear()
    canned["answers"] = [(500, "text/html", "<!DOCTYPE html><html>oops</html>")]
    response = _azure_send("GET", canned["url"], slept)
    assert response.status_code == 500 and canned["seen"] == ["GET"]  # not the API's answer: not retried
    assert getattr(response, SDK_RETRIED) is True  # the SDK had its say: providers.retry does not start again
