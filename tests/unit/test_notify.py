"""The promises of a notification's request (`ipc.notify`) and of its child (`child.notify.post`)
against a real HTTP server on loopback."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
from typing import Any

import pytest

from child.notify import post
from child.worker import beats
from ipc.failures import JobError, PermanentFailure
from ipc.notify import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    USER_AGENT,
    NotifyPayload,
    body_bytes,
    request_headers,
    signature,
    without_credentials,
)
from tests.webhook_server import Answer, webhook_server


def test_the_signature_is_hmac_sha256_of_the_exact_body_keyed_with_the_secret() -> None:
    body = body_bytes({"event": "build.ended", "build": {"project": "wéb"}})
    assert body == '{"event":"build.ended","build":{"project":"wéb"}}'.encode()
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert signature("s3cret", body) == f"sha256={expected}"
    assert signature("s3cret", body + b" ") != signature("s3cret", body)


def test_the_headers_name_the_event_and_delivery_and_sign_only_with_a_secret() -> None:
    body = b"{}"
    signed = request_headers(body, "d-1", "s3cret", "build.ended")
    assert signed == {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Storyshelf-Event": "build.ended",
        DELIVERY_HEADER: "d-1",
        SIGNATURE_HEADER: signature("s3cret", body),
    }
    assert USER_AGENT.startswith("storyshelf/")
    assert SIGNATURE_HEADER not in request_headers(body, "d-1", None, "build.ended")


def payload(url: str, timeout: float = 5.0) -> dict[str, Any]:
    body = body_bytes({"event": "build.ended"})
    request: NotifyPayload = {
        "url": url,
        "body": body,
        "headers": request_headers(body, "d-1", "s3cret", "build.ended"),
        "timeout_seconds": timeout,
        "allow_private": True,  # the test's receiver listens on loopback
    }
    return dict(request)


def test_a_2xx_is_delivered_with_the_body_and_headers_as_made() -> None:
    details: list[dict[str, Any]] = []
    with webhook_server(Answer(202, b"queued")) as server:
        result = post.run(payload(server.url), details.append)
    assert (result["status"], result["reason"]) == (202, "Accepted")
    (received,) = server.received
    assert json.loads(received.body) == {"event": "build.ended"}
    assert received.headers["X-Storyshelf-Signature"] == signature("s3cret", received.body)
    assert received.headers["User-Agent"] == USER_AGENT
    assert len(details) == 2  # before and after the POST


@pytest.mark.parametrize(
    ("answer", "failure", "error"),
    [
        (
            Answer(404, b"no such hook\nsecond line"),
            PermanentFailure,
            "404 Not Found: no such hook",
        ),
        (Answer(401, b""), PermanentFailure, "webhook answered 401 Unauthorized"),
        (Answer(301, b"moved"), PermanentFailure, "webhook answered 301 Moved Permanently: moved"),
        (Answer(503, b"down"), JobError, "webhook answered 503 Service Unavailable: down"),
        (Answer(429, b"slow down"), JobError, "webhook answered 429 Too Many Requests"),
    ],
)
def test_an_answer_other_than_2xx_says_whether_a_retry_could_help(
    answer: Answer, failure: type[Exception], error: str
) -> None:
    with webhook_server(answer) as server, pytest.raises(JobError) as raised:
        post.run(payload(server.url), lambda _detail: None)
    assert type(raised.value) is failure
    assert error in str(raised.value)


def test_a_webhook_slow_to_answer_beats_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress while the POST waits, so a slow webhook is never taken for a hung child."""
    monkeypatch.setattr(beats, "BEAT_SECONDS", 0.05)
    details: list[dict[str, Any]] = []
    with webhook_server(Answer(delay_seconds=0.5)) as server:
        post.run(payload(server.url), details.append)
    assert sum("waiting_seconds" in detail for detail in details) >= 3


def test_the_quoted_line_of_the_answer_is_cut_short() -> None:
    with (
        webhook_server(Answer(400, b"x" * 5000)) as server,
        pytest.raises(PermanentFailure) as raised,
    ):
        post.run(payload(server.url), lambda _detail: None)
    assert str(raised.value) == f"webhook answered 400 Bad Request: {'x' * 200}..."


def test_a_refused_connection_or_a_timeout_is_retried() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(JobError, match=r"cannot reach the webhook: .*[Rr]efused") as raised:
        post.run(payload(f"http://127.0.0.1:{port}/"), lambda _detail: None)
    assert type(raised.value) is JobError
    with webhook_server(Answer(delay_seconds=1.0)) as server, pytest.raises(JobError) as raised:
        post.run(payload(server.url, timeout=0.2), lambda _detail: None)
    assert str(raised.value) == "the webhook did not answer within 0.2 s"


def test_credentials_leave_the_url_for_a_basic_authorization_header() -> None:
    bare, authorization = without_credentials("https://ci%40bot:pa%3As5@hooks.example.com:8443/a?b")
    assert bare == "https://hooks.example.com:8443/a?b"
    assert authorization == f"Basic {base64.b64encode(b'ci@bot:pa:s5').decode()}"
    assert without_credentials("https://token@h.example.com/") == (
        "https://h.example.com/",
        f"Basic {base64.b64encode(b'token:').decode()}",
    )
    assert without_credentials("https://h.example.com/x") == ("https://h.example.com/x", None)


@pytest.mark.parametrize(
    ("url", "allow_private", "error"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            True,
            "webhook refused: 169.254.169.254 is a link-local (cloud metadata) address, never a "
            "webhook target",
        ),
        (
            "http://[::ffff:169.254.169.254]/",
            True,
            "webhook refused: ::ffff:169.254.169.254 is a link-local (cloud metadata) address, "
            "never a webhook target",
        ),
        (
            "http://[fd00:ec2::254]/",
            True,
            "webhook refused: fd00:ec2::254 is a cloud metadata address, never a webhook target",
        ),
        (
            "http://127.0.0.1:9/",
            False,
            "webhook refused: 127.0.0.1 is a loopback address, a webhook target only with "
            "--webhook-allow-private",
        ),
        (
            "http://2130706433:9/",
            False,
            "webhook refused: 2130706433 is a loopback address, a webhook target only with "
            "--webhook-allow-private",
        ),
        (
            "http://0.0.0.0:9/",
            False,
            "webhook refused: 0.0.0.0 is a this-host address, a webhook target only with "
            "--webhook-allow-private",
        ),
    ],
)
def test_a_target_the_project_may_not_reach_fails_at_once_in_one_line(
    url: str, allow_private: bool, error: str
) -> None:
    request = {**payload(url), "allow_private": allow_private}
    with pytest.raises(PermanentFailure) as raised:
        post.run(request, lambda _detail: None)
    assert str(raised.value) == error


def test_a_name_that_resolves_to_loopback_is_refused_without_the_option() -> None:
    with webhook_server() as server:
        port = server.server_address[1]
        request = {**payload(f"http://localhost:{port}/hook"), "allow_private": False}
        with pytest.raises(PermanentFailure) as raised:
            post.run(request, lambda _detail: None)
        assert re.fullmatch(
            r"webhook refused: localhost resolves to (127\.0\.0\.1|::1), which is a loopback "
            r"address, a webhook target only with --webhook-allow-private",
            str(raised.value),
        )
        assert server.received == []
        post.run({**request, "allow_private": True}, lambda _detail: None)
        assert len(server.received) == 1


def test_the_post_connects_to_the_addresses_judged_and_never_resolves_the_name_again() -> None:
    """A name that would answer differently a moment later (DNS rebinding) reaches only what
    was judged: `.invalid` never resolves, yet the POST arrives, with the URL's Host."""
    with webhook_server() as server:
        port = server.server_address[1]
        target = post.Target(
            https=False,
            host="rebound.invalid",
            port=port,
            path="/hooks/storyshelf?x=1",
            addresses=[(socket.AF_INET, ("127.0.0.1", port))],
        )
        status, _ = post.deliver(target, b"{}", {"Content-Type": "application/json"}, 5.0)
    assert status == 200
    (received,) = server.received
    assert received.headers["Host"] == f"rebound.invalid:{port}"
    assert received.path == "/hooks/storyshelf?x=1"
