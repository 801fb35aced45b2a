"""Classifying what the kubernetes client raises. Exceptions are built exactly as the client
builds them from a real HTTP response: a urllib3 ``HTTPResponse`` wrapped in the client's
``RESTResponse``, read, then ``ApiException.from_response`` (or ``ApiException(http_resp=...)``)."""
from __future__ import annotations

import json
import socket

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError, ReadTimeoutError

from engine.effects.io.kube_errors import classify, parse_http_date
from tests.harness import ms

PHRASES = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 410: "Gone",
           422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
           503: "Service Unavailable", 504: "Gateway Timeout"}


def status(code: int, reason: str, message: str = "", name: str = "s1-g1", **details) -> bytes:
    det = {"name": name, "kind": "pods", **details} if name else dict(details)
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "details": det, "code": code}).encode()


def raised(code: int, body: bytes, headers: dict | None = None, via: str = "from_response") -> ApiException:
    raw = urllib3.HTTPResponse(body=body, status=code, reason=PHRASES.get(code, "Unknown"),
                               headers={"Content-Type": "application/json", **(headers or {})},
                               preload_content=True)
    resp = RESTResponse(raw)
    resp.read()
    if via == "from_response":
        try:
            ApiException.from_response(http_resp=resp, body=None, data=None)
        except ApiException as exc:
            return exc
        raise AssertionError("the client raises for every non-2xx status")
    return ApiException(http_resp=resp)


@pytest.mark.parametrize("via", ["from_response", "http_resp"])
def test_the_two_409s_are_told_apart_by_the_status_reason_alone(via):
    """Seed 001:9-12: a 409 is told apart by Status.reason: AlreadyExists vs Conflict."""
    exists = raised(409, status(409, "AlreadyExists", 'pods "s1-g1" already exists'), via=via)
    conflict = raised(409, status(409, "Conflict", "Precondition failed: UID in precondition"), via=via)
    assert exists.reason == conflict.reason == "Conflict"   # the HTTP phrase: useless
    assert classify(exists)[:3] == ("already_exists", "AlreadyExists", 409)
    assert classify(conflict)[:3] == ("conflict", "Conflict", 409)


@pytest.mark.parametrize("code,reason,result", [
    (404, "NotFound", "not_found"),
    (410, "Expired", "gone"),
    (410, "Gone", "gone"),
    (403, "Forbidden", "forbidden"),
    (422, "Invalid", "invalid"),
    (400, "BadRequest", "invalid"),
    (500, "InternalError", "transient"),
    (504, "Timeout", "transient"),
    (429, "TooManyRequests", "transient"),
])
def test_a_status_reason_decides_the_result(code, reason, result):
    """Seed 001:424-427: the reasons are the apiserver's spellings."""
    assert classify(raised(code, status(code, reason, "m"))).result == result


def test_the_status_message_is_kept_for_the_operator():
    c = classify(raised(403, status(403, "Forbidden", 'pods is forbidden: User "kfold" cannot delete')))
    assert c.message == 'pods is forbidden: User "kfold" cannot delete'


@pytest.mark.parametrize("code,result", [
    (409, "error"), (404, "error"), (410, "gone"), (403, "forbidden"), (422, "invalid"), (400, "invalid"),
    (503, "transient"), (429, "transient"),
])
def test_an_empty_reason_matches_nothing_and_the_code_class_decides(code, result):
    """Seed 001:400-408: an absent reason matches nothing."""
    c = classify(raised(code, status(code, "", "")))
    assert (c.result, c.status_reason) == (result, "")


@pytest.mark.parametrize("body", [b"<html>404 page not found</html>", b"", b"{not json", b'{"kind":"Pod"}'],
                         ids=["proxy-html", "empty", "garbage", "not-a-status"])
def test_a_404_that_is_not_a_notfound_status_is_no_proof_of_absence(body):
    assert classify(raised(404, body)).result == "error"


def test_a_notfound_naming_no_object_is_a_missing_resource_type_not_an_absent_object():
    body = status(404, "NotFound", "the server could not find the requested resource", name="")
    assert classify(raised(404, body)).result == "error"


def test_retry_after_on_a_429_becomes_milliseconds():
    c = classify(raised(429, status(429, "TooManyRequests", "slow down"), headers={"Retry-After": "7"}))
    assert (c.result, c.retry_after_ms) == ("transient", 7000)


def test_retry_after_seconds_in_the_status_details_count_too():
    c = classify(raised(500, status(500, "ServerTimeout", "busy", retryAfterSeconds=2)))
    assert c.retry_after_ms == 2000


@pytest.mark.parametrize("exc", [
    ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
    MaxRetryError(None, "/api/v1/pods", reason=NewConnectionError(None, "Connection refused")),
    ReadTimeoutError(None, "/api/v1/pods", "Read timed out."),
    ConnectionResetError(104, "Connection reset by peer"),
    socket.gaierror(-2, "Name or service not known"),
    TimeoutError("timed out"),
], ids=["protocol", "max-retry", "read-timeout", "reset", "dns", "timeout"])
def test_transport_errors_are_transient_and_never_not_found(exc):
    """Seed 001:382-386: a transport error carries no reason and is never NotFound."""
    c = classify(exc)
    assert (c.result, c.status_reason, c.code) == ("transient", "", 0)
    assert c.message in ("connection reset", "connection refused", "read timed out", "name resolution failed",
                         "timed out", "connection timed out")


def test_a_refused_connection_is_named_in_words_without_client_class_names():
    class CheckedHTTPSConnection:
        pass
    inner = NewConnectionError(CheckedHTTPSConnection(), "Failed to establish a new connection: [Errno 111] "
                                                         "Connection refused")
    c = classify(MaxRetryError(None, "/api/v1/pods", reason=inner))
    assert c.message == "connection refused"


def test_a_tls_failure_surfaced_as_status_zero_is_transient():
    assert classify(ApiException(status=0, reason="SSLError\ncertificate verify failed")).result == "transient"


def test_anything_else_is_a_permanent_error():
    assert classify(ValueError("bad input")).result == "error"


IMF = ms("1994-11-06T08:49:37Z")


@pytest.mark.parametrize("value", [
    "Sun, 06 Nov 1994 08:49:37 GMT",      # IMF-fixdate
    "Sunday, 06-Nov-94 08:49:37 GMT",     # obsolete RFC 850
    "Sun Nov  6 08:49:37 1994",           # obsolete asctime
], ids=["imf-fixdate", "rfc850", "asctime"])
def test_the_three_http_date_forms_parse_to_epoch_milliseconds(value):
    assert parse_http_date(value) == IMF


@pytest.mark.parametrize("value", [None, "", "   ", "yesterday", "Sun, 32 Nov 1994 08:49:37 GMT",
                                   "Sun, 06 Nov 1994 25:49:37 GMT", 1234])
def test_a_missing_or_malformed_date_is_none(value):
    assert parse_http_date(value) is None
