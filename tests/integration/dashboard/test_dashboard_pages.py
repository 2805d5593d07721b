"""The pages beside rocketmq-dashboard's: a broker's runtime and config, producers, a group's
clients with their queues, and the system-group filter (over HTTP against a live standalone)."""

from __future__ import annotations

import asyncio
import base64
import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from orbitmq.client import Message, Producer, PushConsumer
from orbitmq.client.admin import AdminClient
from orbitmq.client.push_consumer import ConsumeResult
from orbitmq.model.message import MessageExt
from tests.integration.acl.conftest import start_acl_standalone
from tests.integration.dashboard.conftest import Dashboard, start_dashboard
from tests.integration.dashboard.test_dashboard_csrf import request
from tests.support.processes import create_topic, start_standalone, wait_route

pytestmark = [pytest.mark.integration]


def test_dashboard_broker_page_shows_runtime_and_config(dashboard: Dashboard) -> None:
    port = dashboard.server.port
    _, _, cluster = request(port, "GET", "/")
    link = re.search(r'href="/brokers/([^"]+)" class="broker-link"', cluster)
    assert link is not None, cluster[:2000]
    status, _, page = request(port, "GET", f"/brokers/{link.group(1)}")
    assert status == 200, page[:500]
    assert "brokerName" in page and "msgPutTotalTodayNow" in page
    status, _, page = request(port, "GET", "/brokers/" + quote("10.255.255.1:1", safe=""))
    assert status == 404 and "No broker registered" in page


async def _with_clients(dashboard: Dashboard) -> tuple[str, str, str]:
    async with AdminClient(dashboard.namesrv_addr) as admin:
        await admin.create_topic("PagesTopic", queue_nums=2)

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer("CG_PAGES", dashboard.namesrv_addr, listener)
    consumer.subscribe("PagesTopic", "*")
    await consumer.start()
    try:
        async with Producer("PG_PAGES", dashboard.namesrv_addr) as producer:
            await producer.send(Message("PagesTopic", b"x"))
            port = dashboard.server.port
            group_page = ""
            for _ in range(100):
                _, _, group_page = await asyncio.to_thread(request, port, "GET", "/groups/CG_PAGES")
                if "PagesTopic broker-a q1" in group_page:
                    break
                await asyncio.sleep(0.2)
            _, _, producers = await asyncio.to_thread(request, port, "GET", "/producers?group=PG_PAGES")
            _, _, unknown = await asyncio.to_thread(request, port, "GET", "/producers?group=PG_NOBODY")
            return group_page, producers, unknown
    finally:
        await consumer.shutdown()


def test_dashboard_shows_producers_and_a_groups_clients_with_their_queues(dashboard: Dashboard) -> None:
    group_page, producers, unknown = asyncio.run(_with_clients(dashboard))
    assert 'id="clients"' in group_page and "PagesTopic broker-a q0" in group_page
    assert "PagesTopic broker-a q1" in group_page
    assert re.search(r"<td>\d+\.\d+\.\d+\.\d+:\d+</td>", group_page)
    assert 'id="producers"' in producers and "PYTHON" in producers.upper()
    assert "No producer of group PG_NOBODY is connected" in unknown


def test_dashboard_groups_page_hides_system_groups_unless_asked(dashboard: Dashboard) -> None:
    port = dashboard.server.port
    _, _, plain = request(port, "GET", "/groups?q=SELF_TEST")
    _, _, with_system = request(port, "GET", "/groups?q=SELF_TEST&system=on")
    assert "SELF_TEST_C_GROUP" not in plain
    assert "SELF_TEST_C_GROUP" in with_system


def test_dashboard_acl_page_says_acl_is_off(dashboard: Dashboard) -> None:
    status, _, page = request(dashboard.server.port, "GET", "/acl")
    assert status == 200, page[:500]
    assert "acl-off" in page


ACL_ACCOUNTS = """globalWhiteRemoteAddresses: [10.9.9.*]
accounts:
  - accessKey: dashboardAK
    secretKey: dashboardSK
    admin: true
  - accessKey: alice123
    secretKey: alicesecret
    defaultTopicPerm: DENY
    topicPerms: [TopicOk=PUB|SUB]
"""


def test_dashboard_acl_page_lists_accounts_without_secrets(tmp_path: Path) -> None:
    standalone = start_acl_standalone(tmp_path, ACL_ACCOUNTS)
    try:
        server = start_dashboard(
            tmp_path,
            standalone.addr,
            "--auth",
            "ops:pw",
            "--access-key",
            "dashboardAK",
            "--secret-key",
            "dashboardSK",
        )
        try:
            auth = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
            page = ""
            for _ in range(100):  # until the broker has registered
                status, _, page = request(server.port, "GET", "/acl", headers=auth)
                if "acl-accounts" in page:
                    break
                time.sleep(0.2)
            assert status == 200 and "acl-accounts" in page, page[:2000]
            assert "alice123" in page and "TopicOk=PUB|SUB" in page and "10.9.9.*" in page
            assert "alicesecret" not in page and "dashboardSK" not in page
        finally:
            server.stop()
    finally:
        standalone.kill()


def test_dashboard_switches_between_its_name_servers(dashboard: Dashboard, tmp_path: Path) -> None:
    other = start_standalone(tmp_path, "--no-proxy", name="other-standalone")
    try:
        wait_route(other.addr, "TBW102", {"broker-a"})
        create_topic(f"127.0.0.1:{other.extra_ports[0]}", "OnlyInTheOtherCluster", queues=1)
        server = start_dashboard(tmp_path, dashboard.namesrv_addr, "--other-namesrv", other.addr)
        try:
            _, headers, ops = request(server.port, "GET", "/ops")
            assert other.addr in ops and dashboard.namesrv_addr in ops
            token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', ops)
            assert token is not None
            cookie = headers["set-cookie"].split(";")[0]
            refused = request(
                server.port,
                "POST",
                "/ops/namesrv",
                {"namesrv": "10.9.9.9:9876", "csrf_token": token.group(1)},
                {"Cookie": cookie},
            )
            assert refused[0] == 303 and "problem=" in refused[1]["location"]
            status, answer, _ = request(
                server.port,
                "POST",
                "/ops/namesrv",
                {"namesrv": other.addr, "csrf_token": token.group(1)},
                {"Cookie": cookie},
            )
            assert status == 303 and "notice=" in answer["location"]
            _, _, topics = request(server.port, "GET", "/topics?q=OnlyInTheOther")
            assert "OnlyInTheOtherCluster" in topics
        finally:
            server.stop()
    finally:
        other.kill()
