"""The admin client's operations on groups, brokers, messages and the name servers' KV config.

:class:`AdminOperations` is mixed into :class:`~orbitmq.client.admin.AdminClient`; each method
is a thin entry point to the module that implements it (``_admin_groups``, ``_admin_cluster``,
``_admin_messages``), where the requests each one sends are listed. Operations that span
brokers send to all of them at once and merge the answers.
"""

from __future__ import annotations

from typing import cast

from orbitmq.client import _admin_cluster, _admin_groups, _admin_messages
from orbitmq.client._admin_core import AdminCore
from orbitmq.model.message import MessageExt, MessageQueue
from orbitmq.model.subscription_group import SubscriptionGroupConfig
from orbitmq.protocol.admin_bodies import (
    BrokerStatsData,
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    QueryConsumeQueueResponseBody,
    TopicOffset,
)
from orbitmq.protocol.client_bodies import ConsumeMessageDirectlyResult, ConsumerRunningInfo
from orbitmq.protocol.trace_data import TraceRecord

__all__ = ["AdminOperations", "DEFAULT_TRACE_TOPIC"]

DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


class AdminOperations:
    """Group, broker, message and KV operations of the admin client (see the module docstring)."""

    def _core(self) -> AdminCore:
        return cast(AdminCore, self)

    # -- topics and groups ------------------------------------------------------------------------

    async def topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        """Min/max offset and last store time of every queue of ``topic`` (GET_TOPIC_STATS_INFO).

        Raises:
            TopicNotExistError: the name server does not know ``topic``.
        """
        return await _admin_groups.topic_stats(self._core(), topic)

    async def topic_consumers(self, topic: str) -> list[str]:
        """Groups consuming ``topic`` (online or with offsets on it)."""
        return await _admin_groups.topic_consumers(self._core(), topic)

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """``group``'s broker and consumer offsets per queue, and its consume TPS.

        Raises:
            ConsumerNotOnlineError: no broker has an offset of the group.
        """
        return await _admin_groups.consume_stats(self._core(), group, topic)

    async def all_consume_stats(self, cluster: str | None = None) -> dict[str, ConsumeStats]:
        """Every group's consume stats in one request per broker (dashboards, exporters)."""
        return await _admin_groups.all_consume_stats(self._core(), cluster)

    async def consumer_connection(self, group: str) -> ConsumerConnection:
        """Online members of ``group``, their addresses, versions and subscriptions.

        Raises:
            ConsumerNotOnlineError: no member is online.
        """
        return await _admin_groups.consumer_connection(self._core(), group)

    async def producer_connection(self, group: str, topic: str | None = None) -> list[ClientConnection]:
        """Connections of producer ``group`` (on the brokers of ``topic`` when given)."""
        return await _admin_groups.producer_connection(self._core(), group, topic)

    async def subscription_groups(self, cluster: str | None = None) -> dict[str, SubscriptionGroupConfig]:
        """Every consumer group config of every master of ``cluster``."""
        return await _admin_groups.subscription_groups(self._core(), cluster)

    async def create_subscription_group(
        self, config: SubscriptionGroupConfig, cluster: str | None = None
    ) -> list[str]:
        """Create or update a consumer group config on every master; the brokers written."""
        return await _admin_groups.create_subscription_group(self._core(), config, cluster)

    async def update_subscription_group(
        self,
        group: str,
        *,
        consume_message_orderly: bool = False,
        retry_max_times: int = 16,
        cluster: str | None = None,
    ) -> None:
        """Create or update consumer group ``group`` on every master (RocketMQ's ``updateSubGroup``).

        ``consume_message_orderly`` makes POP / 5.x consumers of the group FIFO consumers;
        ``retry_max_times + 1`` deliveries of a message are tried before it is dead-lettered.
        :meth:`create_subscription_group` takes every setting.

        Raises:
            ClientError: unknown cluster or no master.
            BrokerResponseError: a broker refused (an invalid group name).
        """
        config = SubscriptionGroupConfig(
            group, consume_message_orderly=consume_message_orderly, retry_max_times=retry_max_times
        )
        await self.create_subscription_group(config, cluster)

    async def delete_subscription_group(
        self, group: str, cluster: str | None = None, *, clean_offset: bool = False
    ) -> list[str]:
        """Delete a consumer group config (and its offsets with ``clean_offset``).

        Raises:
            SubscriptionGroupNotExistError: no master has the group.
        """
        return await _admin_groups.delete_subscription_group(
            self._core(), group, cluster, clean_offset=clean_offset
        )

    async def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str | None = None, *, offline: bool = False
    ) -> list[str]:
        """Copy ``src_group``'s offsets (of ``topic`` or all) to ``dest_group``."""
        return await _admin_groups.clone_group_offset(
            self._core(), src_group, dest_group, topic, offline=offline
        )

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> ConsumerRunningInfo:
        """What one online consumer is doing, asked through its broker."""
        return await _admin_groups.consumer_running_info(self._core(), group, client_id, jstack=jstack)

    async def consume_message_directly(
        self, group: str, client_id: str, offset_msg_id: str, topic: str | None = None
    ) -> ConsumeMessageDirectlyResult:
        """Have one online consumer consume one stored message now (resend from a DLQ)."""
        return await _admin_groups.consume_message_directly(
            self._core(), group, client_id, offset_msg_id, topic
        )

    async def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group`` on ``topic`` to ``timestamp_ms`` (-1: the end) on the brokers, live.

        Online consumers move without a restart and offline groups start from the new offsets
        (INVOKE_BROKER_TO_RESET_OFFSET; see ``orbitmq.broker.handlers.client_relay``).

        Raises:
            TopicNotExistError, SubscriptionGroupNotExistError: naming the broker.
        """
        return await _admin_groups.reset_offset(self._core(), group, topic, timestamp_ms, force=force)

    # -- brokers ----------------------------------------------------------------------------------

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO of one broker (``mqadmin brokerStatus``)."""
        return await _admin_cluster.broker_runtime_info(self._core(), addr)

    async def broker_runtime_infos(self, cluster: str | None = None) -> dict[str, dict[str, str]]:
        """Runtime info of every master of ``cluster``, by address, asked at once."""
        return await _admin_cluster.broker_runtime_infos(self._core(), cluster)

    async def broker_stats(self, addr: str, stats_name: str, stats_key: str) -> BrokerStatsData | None:
        """One stats item (``TOPIC_PUT_NUMS`` of a topic, ...) of one broker; None if never recorded."""
        return await _admin_cluster.broker_stats(self._core(), addr, stats_name, stats_key)

    async def broker_config(self, addr: str) -> dict[str, str]:
        """Every config key of one broker with its value."""
        return await _admin_cluster.broker_config(self._core(), addr)

    async def update_broker_config(
        self, updates: dict[str, str], *, addr: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """Change live config keys on one broker or every master of ``cluster``; the brokers.

        Raises:
            BrokerResponseError: a key that cannot change live, or a bad value (named).
        """
        return await _admin_cluster.update_broker_config(self._core(), updates, addr=addr, cluster=cluster)

    # -- name server KV config --------------------------------------------------------------------

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        await _admin_cluster.put_kv_config(self._core(), namespace, key, value)

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        return await _admin_cluster.get_kv_config(self._core(), namespace, key)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        await _admin_cluster.delete_kv_config(self._core(), namespace, key)

    async def kv_list(self, namespace: str) -> dict[str, str]:
        return await _admin_cluster.kv_list(self._core(), namespace)

    # -- name servers -----------------------------------------------------------------------------

    async def namesrv_config(self, addrs: list[str] | None = None) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG of each name server (``mqadmin getNamesrvConfig``), by address."""
        return await _admin_cluster.namesrv_config(self._core(), addrs)

    async def update_namesrv_config(
        self, updates: dict[str, str], addrs: list[str] | None = None
    ) -> list[str]:
        """UPDATE_NAMESRV_CONFIG on each name server; the servers changed.

        Raises:
            BrokerResponseError: an unknown key or bad value (INVALID_PARAMETER) or a key that
                needs a restart (NO_PERMISSION), named.
        """
        return await _admin_cluster.update_namesrv_config(self._core(), updates, addrs)

    async def set_write_perm(self, namesrv_addr: str, broker_name: str, *, writable: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (or ADD_...) on one name server; the topics it changed."""
        return await _admin_cluster.set_write_perm(self._core(), namesrv_addr, broker_name, writable)

    async def query_consume_queue(
        self, addr: str, topic: str, queue_id: int, index: int, count: int = 10, group: str | None = None
    ) -> QueryConsumeQueueResponseBody:
        """Consume queue entries of one queue on one broker (``mqadmin queryCq``)."""
        return await _admin_cluster.query_consume_queue(
            self._core(), addr, topic, queue_id, index, count, group
        )

    # -- messages ---------------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt | None:
        """The message an offsetMsgId names (None when there is none)."""
        return await _admin_messages.view_message(self._core(), offset_msg_id)

    async def query_message_by_id(self, msg_id: str, topic: str | None = None) -> list[MessageExt]:
        """The message with this offsetMsgId or UNIQ_KEY (searching every user topic without ``topic``)."""
        return await _admin_messages.query_message_by_id(self._core(), msg_id, topic)

    async def query_messages(
        self, topic: str, key: str, *, max_num: int = 64, begin_ms: int = 0, end_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` with ``key`` among their KEYS, newest first."""
        return await _admin_messages.query_messages(
            self._core(), topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms
        )

    async def message_at(self, mq: MessageQueue, queue_offset: int) -> MessageExt | None:
        """The message at one queue offset (None when there is none)."""
        return await _admin_messages.message_at(self._core(), mq, queue_offset)

    async def messages_from(
        self, mq: MessageQueue, queue_offset: int, max_count: int, end_offset: int | None = None
    ) -> list[MessageExt]:
        """Up to ``max_count`` messages of one queue from ``queue_offset`` (none committed)."""
        return await _admin_messages.messages_from(self._core(), mq, queue_offset, max_count, end_offset)

    async def query_trace(
        self, msg_id: str, trace_topic: str = DEFAULT_TRACE_TOPIC
    ) -> list[tuple[TraceRecord, MessageExt]]:
        """Trace records of ``msg_id`` with the trace message each came in (oldest first)."""
        return await _admin_messages.query_trace(self._core(), msg_id, trace_topic)
