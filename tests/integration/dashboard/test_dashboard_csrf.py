"""The dashboard's forms cannot be driven by another web page, and every answer carries security headers.

Method: one standalone and one dashboard (another with ``--auth``); each state-changing route
gets the POST a hostile page would make its visitor's browser send (a form with no token, an
``Origin`` of another site, the visitor's basic credentials resent by the browser), which must
be a 403 that changes nothing in the cluster. The same route with the page's own token and
cookie must still work (the browser tests drive the forms themselves).
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from orbitmq.client import Message, Producer, PullConsumer
from orbitmq.client.admin import AdminClient
from orbitmq.errors import TopicNotExistError
from orbitmq.model.message import MessageQueue
from tests.integration.dashboard.conftest import Dashboard, start_dashboard
from tests.support.processes import ServerProcess

pytestmark = [pytest.mark.integration]

EVIL = "http://evil.example"
AUTH = "Basic " + base64.b64encode(b"ops:s3cret").decode()


def request(
    port: int,
    method: str,
    path: str,
    body: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        sent = dict(headers or {})
        data = None
        if body is not None:
            data = urlencode(body).encode()
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    finally:
        conn.close()


async def _prepare(namesrv: str) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic("CsrfTarget", queue_nums=2)
    async with Producer("PG_CSRF", namesrv) as producer:
        for index in range(4):
            await producer.send(Message("CsrfTarget", b"m%d" % index))
    consumer = PullConsumer("CG_CSRF", namesrv)
    await consumer.start()
    try:
        await consumer.commit_sync({MessageQueue("CsrfTarget", "broker-a", q): 0 for q in range(2)})
    finally:
        await consumer.shutdown()


async def _cluster_state(namesrv: str) -> tuple[bool, bool, int, int]:
    """(CsrfNew exists, CsrfTarget exists, messages in CsrfTarget, CG_CSRF's committed sum)."""
    async with AdminClient(namesrv) as admin:
        try:
            await admin.topic_route("CsrfNew")
            created = True
        except TopicNotExistError:
            created = False
        status = await admin.topic_status("CsrfTarget")
        stored = sum(s.max_offset for s in status.values())
        committed = [await admin.committed_offset("CG_CSRF", mq) for mq in status]
        return created, True, stored, sum(offset or 0 for offset in committed)


FORMS = [
    ("/topics", {"topic": "CsrfNew", "queues": "4", "perm": "6"}),
    ("/topics/CsrfTarget/delete", {"confirm": "on"}),
    ("/topics/CsrfTarget/send", {"body": "forged", "tags": "", "keys": ""}),
    ("/groups/CG_CSRF/reset", {"topic": "CsrfTarget", "skip": "on"}),
    ("/dlq/resend", {"topic": "%DLQ%CG_CSRF", "msg_id": "0" * 32}),
]


@pytest.fixture(scope="module")
def prepared(dashboard: Dashboard) -> Dashboard:
    asyncio.run(_prepare(dashboard.namesrv_addr))
    return dashboard


@pytest.fixture(scope="module")
def with_auth(prepared: Dashboard, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_dashboard(tmp_path_factory.mktemp("auth"), prepared.namesrv_addr, "--auth", "ops:s3cret")
    try:
        yield server
    finally:
        server.stop()


def _assert_untouched(namesrv: str) -> None:
    created, exists, stored, committed = asyncio.run(_cluster_state(namesrv))
    assert (created, exists, stored, committed) == (False, True, 4, 0)


@pytest.mark.parametrize("origin", [EVIL, None, "null"])
def test_dashboard_refuses_a_cross_site_form_post_without_a_token(
    prepared: Dashboard, origin: str | None
) -> None:
    for path, form in FORMS:
        headers = {"Origin": origin} if origin else {}
        status, response_headers, text = request(prepared.server.port, "POST", path, form, headers)
        assert status == 403, (path, status, text)
        assert text.startswith("Refused: ") and "\n" not in text.strip()
        assert response_headers["x-frame-options"] == "DENY"
    _assert_untouched(prepared.namesrv_addr)


def test_dashboard_refuses_a_post_whose_token_belongs_to_another_browser(prepared: Dashboard) -> None:
    port = prepared.server.port
    _, headers_a, page_a = request(port, "GET", "/topics")
    _, headers_b, _ = request(port, "GET", "/topics")
    token_a = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page_a)
    assert token_a is not None
    cookie_b = headers_b["set-cookie"].split(";")[0]
    assert cookie_b != headers_a["set-cookie"].split(";")[0]
    form = {**FORMS[0][1], "csrf_token": token_a.group(1)}
    status, _, text = request(port, "POST", "/topics", form, {"Cookie": cookie_b})
    assert status == 403, text
    # A page's own token from another site: Sec-Fetch-Site says where the form was.
    cookie_a = headers_a["set-cookie"].split(";")[0]
    status, _, _ = request(
        port, "POST", "/topics", form, {"Cookie": cookie_a, "Sec-Fetch-Site": "cross-site"}
    )
    assert status == 403
    _assert_untouched(prepared.namesrv_addr)


def test_dashboard_with_auth_refuses_a_cross_site_post_carrying_the_credentials(
    prepared: Dashboard, with_auth: ServerProcess
) -> None:
    for path, form in FORMS:
        status, _, text = request(with_auth.port, "POST", path, form, {"Authorization": AUTH, "Origin": EVIL})
        assert status == 403, (path, status, text)
        status, _, text = request(with_auth.port, "POST", path, form, {"Authorization": AUTH})
        assert status == 403, (path, status, text)
    _assert_untouched(prepared.namesrv_addr)


def test_dashboard_accepts_a_form_with_its_own_token(prepared: Dashboard, with_auth: ServerProcess) -> None:
    for port, extra in ((prepared.server.port, {}), (with_auth.port, {"Authorization": AUTH})):
        _, headers, page = request(port, "GET", "/topics", headers=extra)
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
        assert token is not None
        form = {"topic": "CsrfOwn", "queues": "2", "perm": "6", "csrf_token": token.group(1)}
        own = {
            **extra,
            "Cookie": cookie,
            "Origin": f"http://127.0.0.1:{port}",
            "Sec-Fetch-Site": "same-origin",
        }
        status, response_headers, text = request(port, "POST", "/topics", form, own)
        assert status == 303, text
        assert response_headers["location"].startswith("/topics/CsrfOwn")


@pytest.mark.parametrize("path", ["/", "/topics", "/static/app.js", "/no/such/page"])
def test_dashboard_answers_carry_security_headers(
    prepared: Dashboard, with_auth: ServerProcess, path: str
) -> None:
    for port, extra in ((prepared.server.port, {}), (with_auth.port, {})):
        _, headers, _ = request(port, "GET", path, headers=extra)
        assert "default-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"


def test_dashboard_refuses_an_oversized_form(prepared: Dashboard, tmp_path: Path) -> None:
    status, _, text = request(
        prepared.server.port, "POST", "/topics/CsrfTarget/send", {"body": "x" * (2 << 20)}
    )
    assert status == 413, text
    _assert_untouched(prepared.namesrv_addr)


def test_dashboard_refuses_a_non_ascii_token_without_an_error(prepared: Dashboard) -> None:
    port = prepared.server.port
    _, headers, _ = request(port, "GET", "/topics")
    cookie = headers["set-cookie"].split(";")[0]
    for token in ("ü" * 64, "\x00"):
        status, _, text = request(
            port, "POST", "/topics", {**FORMS[0][1], "csrf_token": token}, {"Cookie": cookie}
        )
        assert status == 403, text
        status, _, text = request(
            port, "POST", "/topics", FORMS[0][1], {"Cookie": cookie, "X-CSRF-Token": "é"}
        )
        assert status == 403, text
    assert "Traceback" not in prepared.server.log()
    _assert_untouched(prepared.namesrv_addr)
