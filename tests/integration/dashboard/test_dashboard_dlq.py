"""Dead letters of a write-only ``%DLQ%`` topic can be read, resent and exported (dashboard and CLI);
the dashboard answers unknown names with 404, bad parameters with 400, and pages time searches.

Method: one standalone and one dashboard; 5 messages of ``DlqOrders`` are sent back by group
``CG_DLQ`` with delay level -1, which moves them to ``%DLQ%CG_DLQ`` (created perm 2, as RocketMQ
4.x does). Then the dashboard's pages over HTTP, and ``orbitmq admin`` as a subprocess.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import subprocess
import sys

import pytest

from orbitmq.client import Message, Producer
from orbitmq.client._group_api import send_back
from orbitmq.client.admin import AdminClient
from orbitmq.client.dead_letters import DeadLetters
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.admin_bodies import decode_query_consume_queue
from orbitmq.protocol.admin_headers import QueryConsumeQueueRequestHeader
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from tests.integration.dashboard.conftest import Dashboard
from tests.integration.dashboard.test_dashboard_csrf import request

pytestmark = [pytest.mark.integration]

GROUP = "CG_DLQ"
DEAD = 5


async def _dead_letters(namesrv: str) -> list[str]:
    """``DEAD`` messages of DlqOrders moved to %DLQ%CG_DLQ; their msgIds."""
    async with AdminClient(namesrv) as admin:
        await admin.create_topic("DlqOrders", queue_nums=1)
        ids = []
        async with Producer("PG_DLQ", namesrv) as producer:
            for index in range(DEAD):
                message = Message("DlqOrders", b"dead %d" % index)
                message.keys = [f"dead-key-{index}"]
                message.tags = "TagD"
                ids.append(str((await producer.send(message)).msg_id))
        mq = MessageQueue("DlqOrders", "broker-a", 0)
        for offset in range(DEAD):
            stored = await admin.message_at(mq, offset)
            assert stored is not None
            assert await send_back(admin._client, "broker-a", GROUP, stored, delay_level=-1)
        configs = await admin.topic_configs("%DLQ%" + GROUP)
        assert {config.perm for config in configs.values()} == {2}
        return ids


@pytest.fixture(scope="module")
def dead(dashboard: Dashboard) -> list[str]:
    return asyncio.run(_dead_letters(dashboard.namesrv_addr))


def admin_cli(dashboard: Dashboard, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orbitmq.cli", "admin", "-n", dashboard.namesrv_addr, *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def _pages(namesrv: str) -> list[list[str]]:
    async with AdminClient(namesrv) as admin:
        dead = DeadLetters(admin)
        first = await dead.page(GROUP, page_size=2)
        pages = [[m.msg_id for m in first.messages]]
        for number in range(2, first.pages + 1):
            pages.append([m.msg_id for m in (await dead.page(GROUP, page=number, page_size=2)).messages])
        return pages


def test_dead_letters_of_a_write_only_topic_are_read_page_by_page(
    dashboard: Dashboard, dead: list[str]
) -> None:
    pages = asyncio.run(_pages(dashboard.namesrv_addr))
    assert [len(page) for page in pages] == [2, 2, 1]
    assert sorted(msg_id for page in pages for msg_id in page) == sorted(dead)


def test_admin_print_msg_and_consume_message_read_a_dlq_topic(dashboard: Dashboard, dead: list[str]) -> None:
    printed = admin_cli(dashboard, "printMsg", "-t", "%DLQ%" + GROUP)
    assert printed.returncode == 0, printed.stderr
    assert all(msg_id in printed.stdout for msg_id in dead)
    consumed = admin_cli(dashboard, "consumeMessage", "-t", "%DLQ%" + GROUP, "-c", "2", "--json")
    assert consumed.returncode == 0, consumed.stderr
    assert [m["msgId"] for m in json.loads(consumed.stdout)] == dead[:2]


def test_admin_dlq_verbs_list_export_and_resend(dashboard: Dashboard, dead: list[str]) -> None:
    listed = admin_cli(dashboard, "dlqList", "-g", GROUP, "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert document["total"] == DEAD and {m["msgId"] for m in document["messages"]} == set(dead)
    assert {m["originalTopic"] for m in document["messages"]} == {"DlqOrders"}
    exported = admin_cli(dashboard, "dlqExport", "-g", GROUP, "-f", "csv")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert sorted(row["msgId"] for row in rows) == sorted(dead)
    assert {row["body"] for row in rows} == {f"dead {i}" for i in range(DEAD)}
    resent = admin_cli(dashboard, "dlqResend", "-g", GROUP, "-i", dead[0], "--json")
    assert resent.returncode == 0, resent.stderr
    [result] = json.loads(resent.stdout)
    assert result["to"] == "DlqOrders"
    found = admin_cli(dashboard, "queryMsgById", "-t", "DlqOrders", "-i", result["newMsgId"], "--json")
    assert found.returncode == 0, found.stderr
    assert "dead 0" in found.stdout
    missing = admin_cli(dashboard, "dlqResend", "-g", GROUP, "-i", "F" * 32)
    assert missing.returncode == 3 and "no dead letter" in missing.stderr


def test_dashboard_dlq_page_lists_exports_and_resends(dashboard: Dashboard, dead: list[str]) -> None:
    port = dashboard.server.port
    status, _, page = request(port, "GET", f"/dlq/{GROUP}?size=2")
    assert status == 200, page
    assert len(re.findall(r'class="msg-id"', page)) == 2 and "Page 1 of 3" in page
    status, _, listing = request(port, "GET", "/dlq")
    assert f'href="/dlq/{GROUP}"' in listing
    status, _, group_page = request(port, "GET", f"/groups/{GROUP}")
    assert status == 200 and f'href="/dlq/{GROUP}"' in group_page
    status, headers, exported = request(port, "GET", f"/dlq/{GROUP}/export?format=json")
    assert status == 200 and "attachment" in headers["content-disposition"]
    assert sorted(row["msgId"] for row in json.loads(exported)) == sorted(dead)
    status, _, exported_csv = request(port, "GET", f"/dlq/{GROUP}/export?format=csv")
    assert len(list(csv.DictReader(io.StringIO(exported_csv)))) == DEAD
    # A resend through the page's own form (token and cookie from the page).
    _, headers, page = request(port, "GET", f"/dlq/{GROUP}")
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
    assert token is not None
    cookie = headers["set-cookie"].split(";")[0]
    form = {"csrf_token": token.group(1), "msg_id": dead[1], "to": "original", "which": "picked"}
    status, headers, _ = request(port, "POST", f"/dlq/{GROUP}/resend", form, {"Cookie": cookie})
    assert status == 303 and "Resent+1+dead+letters" in headers["location"], headers
    # The messages page's time search of a DLQ topic goes to the DLQ page.
    status, headers, _ = request(port, "GET", "/messages?mode=time&topic=%25DLQ%25" + GROUP)
    assert status == 303 and headers["location"].startswith(f"/dlq/{GROUP}?")


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("/topics/NoSuchTopicHere", 404, "Topic NoSuchTopicHere does not exist"),
        ("/groups/CG_NO_SUCH_GROUP", 404, "Consumer group CG_NO_SUCH_GROUP does not exist"),
        ("/messages?mode=time&topic=DlqOrders&begin=garbage", 400, "begin &#39;garbage&#39; is not a time"),
        ("/messages?mode=time&topic=DlqOrders&end=2026-13-45", 400, "is not a time"),
        ("/messages?mode=time&topic=DlqOrders&page=x", 400, "page &#39;x&#39; is not a whole number"),
        ("/dlq/CG_DLQ?begin=nope", 400, "is not a time"),
        ("/no/such/page", 404, "no page"),
    ],
)
def test_dashboard_answers_unknown_names_404_and_bad_parameters_400(
    dashboard: Dashboard, dead: list[str], path: str, status: int, text: str
) -> None:
    got, _, page = request(dashboard.server.port, "GET", path)
    assert got == status, page[:500]
    assert text in page
    assert "Traceback" not in dashboard.server.log()


async def _many(namesrv: str, count: int) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic("PagedTopic", queue_nums=2)
    async with Producer("PG_PAGED", namesrv) as producer:
        for index in range(count):
            await producer.send(Message("PagedTopic", b"paged %d" % index))


def test_dashboard_time_search_pages_past_the_newest_64(dashboard: Dashboard) -> None:
    asyncio.run(_many(dashboard.namesrv_addr, 150))
    port = dashboard.server.port
    seen: list[str] = []
    for number in (1, 2, 3):
        status, _, page = request(port, "GET", f"/messages?mode=time&topic=PagedTopic&begin=0&page={number}")
        assert status == 200, page[:500]
        assert f"Page {number} of 3" in page and "150 messages in the range" in page
        seen += re.findall(r'href="/messages/PagedTopic/([0-9A-F]{32})"', page)
    assert len(seen) == 150 and len(set(seen)) == 150


async def _query_cq(
    namesrv: str, topic: str, queue_id: int, index: int, count: int
) -> tuple[int, str, bytes]:
    async with AdminClient(namesrv) as admin:
        addr = (await admin.master_addresses())["broker-a"]
        header = QueryConsumeQueueRequestHeader(topic, queue_id, index, count)
        request_ = RemotingCommand.request(RequestCode.QUERY_CONSUME_QUEUE, header.to_ext())
        response = await admin._client.remoting.invoke(addr, request_, 10_000)
        return response.code, response.remark or "", bytes(response.body or b"")


def test_broker_query_consume_queue_reads_a_write_only_queue(dashboard: Dashboard, dead: list[str]) -> None:
    namesrv = dashboard.namesrv_addr
    code, _, body = asyncio.run(_query_cq(namesrv, "%DLQ%" + GROUP, 0, 1, 2))
    assert code == ResponseCode.SUCCESS
    answer = decode_query_consume_queue(body)
    assert (answer.min_queue_index, answer.max_queue_index) == (0, DEAD)
    assert len(answer.queue_data) == 2
    assert all(entry.physic_size > 0 and entry.physic_offset >= 0 for entry in answer.queue_data)
    code, _, body = asyncio.run(_query_cq(namesrv, "%DLQ%" + GROUP, 0, 0, 100_000))
    assert code == ResponseCode.SUCCESS and len(decode_query_consume_queue(body).queue_data) == DEAD
    code, remark, _ = asyncio.run(_query_cq(namesrv, "NoSuchTopicForCq", 0, 0, 1))
    assert code == ResponseCode.SYSTEM_ERROR and "not exist" in remark
    code, remark, _ = asyncio.run(_query_cq(namesrv, "%DLQ%" + GROUP, 5, 0, 1))
    # RocketMQ's remark for a queue the store does not have.
    assert code == ResponseCode.SYSTEM_ERROR and f"5@%DLQ%{GROUP} is not exist!" in remark
