"""AdminClient and BlockingAdminClient against a real standalone and a two-broker cluster."""

from __future__ import annotations

import asyncio
import time

import pytest

from orbitmq.client import AdminClient, Producer
from orbitmq.client.blocking import BlockingAdminClient
from orbitmq.errors import SubscriptionGroupNotExistError, TopicNotExistError
from orbitmq.model.message import Message, MessageQueue
from tests.integration.client.test_producer import wait_for_brokers
from tests.integration.conftest import Cluster
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration


async def test_admin_create_route_and_delete_topic(cluster: Cluster) -> None:
    async with AdminClient(cluster.namesrv_addr) as admin:
        await wait_for_brokers(admin, 2)
        info = await admin.cluster_info()
        assert info.cluster_addr_table["DefaultCluster"] == {"broker-a", "broker-b"}
        await admin.create_topic("AdminTopic", 3)
        route = await admin.topic_route("AdminTopic")
        assert sorted((q.broker_name, q.write_queue_nums) for q in route.queue_datas) == [
            ("broker-a", 3),
            ("broker-b", 3),
        ]
        queues = await admin.fetch_queues("AdminTopic")
        assert len(queues) == 6 and queues == sorted(queues)
        assert "AdminTopic" in await admin.list_topics()
        await admin.delete_topic("AdminTopic")
        with pytest.raises(TopicNotExistError):
            await admin.topic_route("AdminTopic")


async def test_admin_topic_status_and_consumer_progress(standalone: ServerProcess) -> None:
    async with AdminClient(standalone.addr) as admin:
        await wait_for_brokers(admin)
        await admin.create_topic("StatusTopic", 2)
        before_ms = int(time.time() * 1000)
        async with Producer("PG_STATUS", standalone.addr) as producer:
            for i in range(6):
                await producer.send(Message("StatusTopic", b"s%d" % i))
        status = await admin.topic_status("StatusTopic")
        assert sorted(s.max_offset for s in status.values()) == [3, 3]
        assert all(
            s.min_offset == 0 and s.last_update_timestamp_ms >= before_ms - 1000 for s in status.values()
        )
        mq = MessageQueue("StatusTopic", "broker-a", 0)
        await admin.update_consumer_offset("CG_STATUS", mq, 1)
        assert await admin.committed_offset("CG_STATUS", mq) == 1
        progress = await admin.consumer_progress("CG_STATUS", "StatusTopic")
        assert (
            progress[mq].committed_offset == 1 and progress[mq].broker_offset == 3 and progress[mq].lag == 2
        )
        everything = await admin.consumer_progress("CG_STATUS")
        assert everything[mq].lag == 2


async def test_admin_reset_offset_by_time(standalone: ServerProcess) -> None:
    async with AdminClient(standalone.addr) as admin:
        await wait_for_brokers(admin)
        await admin.create_topic("ResetTopic", 1)
        mq = MessageQueue("ResetTopic", "broker-a", 0)
        async with Producer("PG_RESET", standalone.addr) as producer:
            for i in range(3):
                await producer.send(Message("ResetTopic", b"old%d" % i))
            await asyncio.sleep(0.05)
            middle_ms = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            for i in range(2):
                await producer.send(Message("ResetTopic", b"new%d" % i))
        await admin.update_consumer_offset("CG_RESET", mq, 5)
        offsets = await admin.reset_offset_by_time("CG_RESET", "ResetTopic", middle_ms)
        assert offsets == {mq: 3}
        assert await admin.committed_offset("CG_RESET", mq) == 3
        assert await admin.search_offset(mq, 0) == 0


async def test_admin_reset_offset_by_time_refuses_a_group_nobody_knows(standalone: ServerProcess) -> None:
    # The broker resets any group it is asked to, as RocketMQ's does; the admin client checks
    # the name first so that a mistyped group gets no offsets written for it.
    async with AdminClient(standalone.addr) as admin:
        await wait_for_brokers(admin)
        await admin.create_topic("ResetNobodyTopic", 1)
        with pytest.raises(SubscriptionGroupNotExistError, match="CG_NOBODY_KNOWS"):
            await admin.reset_offset_by_time("CG_NOBODY_KNOWS", "ResetNobodyTopic", 0)
        mq = MessageQueue("ResetNobodyTopic", "broker-a", 0)
        assert await admin.committed_offset("CG_NOBODY_KNOWS", mq, zero_if_not_found=False) is None
        with pytest.raises(TopicNotExistError):
            await admin.reset_offset_by_time("CG_NOBODY_KNOWS", "NoSuchResetTopic", 0)


def test_blocking_admin_client_lists_and_creates(standalone: ServerProcess) -> None:
    with BlockingAdminClient(standalone.addr) as admin:
        for _ in range(200):
            if admin.cluster_info().broker_addr_table:
                break
            time.sleep(0.05)
        admin.create_topic("BlockingAdminTopic", 2)
        assert "BlockingAdminTopic" in admin.list_topics()
        assert len(admin.fetch_queues("BlockingAdminTopic")) == 2
        status = admin.topic_status("BlockingAdminTopic")
        assert all(s.max_offset == 0 and s.last_update_timestamp_ms == 0 for s in status.values())
