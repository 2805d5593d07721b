"""The admin client: topics, routes, queue offsets and consumer-group progress.

What each operation sends (RocketMQ's ``mqadmin`` equivalents):

======================  ===================================================================
operation               requests
======================  ===================================================================
create_topic            GET_BROKER_CLUSTER_INFO, then UPDATE_AND_CREATE_TOPIC to each master
update_topic            GET_ALL_TOPIC_CONFIG from each master (the current settings), then
                        UPDATE_AND_CREATE_TOPIC with the changed ones
delete_topic            GET_ALL_TOPIC_LIST_FROM_NAMESERVER and GET_ALL_TOPIC_CONFIG (does it
                        exist?), DELETE_TOPIC_IN_BROKER to each master, DELETE_TOPIC_IN_NAMESRV
                        to every name server
topic_status            GET_TOPIC_STATS_INFO to each master of the topic's route
queue_statuses_of       GET_MIN_OFFSET and GET_MAX_OFFSET of each queue, to one member (master
                        or slave) of a broker group
consumer_progress       per queue QUERY_CONSUMER_OFFSET (``setZeroIfNotFound=false``),
                        GET_MIN_OFFSET and GET_MAX_OFFSET; GET_SUBSCRIPTIONGROUP_CONFIG and
                        GET_CONSUMER_LIST_BY_GROUP to each master when the group committed
                        nothing
cluster_members         GET_BROKER_CLUSTER_INFO, then GET_BROKER_HA_STATUS to every broker
reset_offset_by_time    INVOKE_BROKER_TO_RESET_OFFSET to each master of the topic's route
acl.*                   the ACL admin requests 50-54 (``client.acl_admin``)
======================  ===================================================================

A consumer group exists, for these operations, when some broker holds its subscription group
config, an online member of it or an offset it committed (OrbitMQ brokers do not serve
GET_CONSUME_STATS, RocketMQ's question for this). Operations on a group or topic that does not exist raise
:class:`~orbitmq.errors.SubscriptionGroupNotExistError` or
:class:`~orbitmq.errors.TopicNotExistError`, naming it, instead of answering with nothing.

Resetting offsets is live: the brokers record the new offsets, answer the group's next pull of
each queue with PULL_OFFSET_MOVED, and tell online consumers (RESET_CONSUMER_CLIENT_OFFSET), so
neither online consumers nor offline groups need a restart. The operations on groups, broker
statistics and config, messages and KV config are listed in ``orbitmq.client._admin_api``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from orbitmq.client._admin_api import AdminOperations
from orbitmq.client._admin_core import AdminCore
from orbitmq.client._admin_views import AdminViews
from orbitmq.client._cluster_status import MemberStatus, member_statuses
from orbitmq.client._group_progress import QueueProgress, consumer_progress, require_group
from orbitmq.client._instance import ClientInstance
from orbitmq.client._topic_names import check_topic_perm, is_internal_topic
from orbitmq.client.acl_admin import AclAdminClient
from orbitmq.client.config import ClientConfig, split_config
from orbitmq.errors import (
    ClientError,
    ClientStateError,
    ConnectError,
    OrbitError,
    TopicNotExistError,
    error_for_code,
)
from orbitmq.model.message import MessageQueue
from orbitmq.model.route import ClusterInfo, TopicConfig, TopicRouteData
from orbitmq.protocol.admin_bodies import decode_subscription_group_wrapper
from orbitmq.protocol.bodies import decode_cluster_info, decode_topic_config_wrapper, decode_topic_list
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from orbitmq.protocol.message_codec import decode_stored_messages

__all__ = ["AdminClient", "AdminConfig", "MemberStatus", "QueueProgress", "QueueStatus"]

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
"""Group named in the admin's own pulls (RocketMQ's tools use the same name); it commits nothing."""

_ROUTE_WAIT_S = 5.0
_PULL_FLAG_SUBSCRIPTION = 0x4  # the pull carries its own subscription; nothing is committed


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """Settings of the admin client itself (it has none beyond ClientConfig yet)."""


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """Offsets of one queue; ``last_update_timestamp_ms`` is 0 for an empty queue."""

    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int


class AdminClient(AdminOperations, AdminViews):
    """Administers topics, groups, offsets and brokers through the name servers and brokers.

    Operations on consumer groups, broker statistics and config, stored messages and the name
    servers' KV config come from :class:`~orbitmq.client._admin_api.AdminOperations`.

    Args:
        namesrv_addr: name servers as ``"host:port;host:port"``.
        **config: :class:`ClientConfig` fields (``request_timeout_ms``, ``instance_name``, ...).

    Raises:
        ConfigError: an unknown option or an invalid value.
    """

    def __init__(self, namesrv_addr: str, **config: Any) -> None:
        config.setdefault("instance_name", f"admin-{time.time_ns()}")
        client_config, _ = split_config(namesrv_addr, config, AdminConfig)
        self.client_config: ClientConfig = client_config
        self._instance: ClientInstance | None = None
        self.acl = AclAdminClient(self)
        """Account management on the brokers (see ``orbitmq.client.acl_admin``)."""

    async def start(self) -> None:
        """Open the client instance (connections are made on first use)."""
        if self._instance is not None:
            raise ClientStateError("admin client already started")
        instance = ClientInstance.get_or_create(self.client_config)
        await instance.start()
        self._instance = instance

    async def close(self) -> None:
        """Release the client instance and its connections."""
        instance, self._instance = self._instance, None
        if instance is not None:
            await instance.close()

    async def __aenter__(self) -> AdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _core(self) -> AdminCore:
        # Returned as itself, so the type checker verifies AdminClient provides AdminCore.
        return self

    @property
    def _client(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError("admin client is not started")
        return self._instance

    # -- name server -----------------------------------------------------------------------------

    async def _namesrv(self, code: int, ext: dict[str, str] | None = None) -> RemotingCommand:
        response = await self._client.invoke_namesrv(RemotingCommand.request(code, ext or {}))
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, response.remark)
        return response

    async def cluster_info(self) -> ClusterInfo:
        """Every broker the name server knows, grouped by cluster."""
        response = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        return decode_cluster_info(response.body)

    async def cluster_members(self) -> list[MemberStatus]:
        """Every broker with its role and, for a slave, its replication lag and in-sync flag."""
        info = await self.cluster_info()
        addrs = sorted(
            {addr for broker in info.broker_addr_table.values() for addr in broker.broker_addrs.values()}
        )
        answers = await asyncio.gather(*(self._ha_status(addr) for addr in addrs))
        return member_statuses(info, dict(zip(addrs, answers, strict=True)))

    async def _ha_status(self, addr: str) -> dict[str, Any] | None:
        request = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS, {})
        try:
            response = await self._client.remoting.invoke(
                addr, request, self.client_config.request_timeout_ms
            )
            if response.code != ResponseCode.SUCCESS:
                return None
            status = orjson.loads(response.body)
        except (OrbitError, orjson.JSONDecodeError):
            return None
        return status if isinstance(status, dict) else None

    async def controller_state(self, controller_addrs: Sequence[str]) -> dict[str, Any]:
        """The controller leader's view (CONTROLLER_GET_SYNC_STATE_DATA): every broker group's
        master, epoch and SyncStateSet with each replica's liveness, plus the Raft status.

        Asks every controller; the leader's answer wins (a follower's liveness view is its own).

        Raises:
            OrbitError: no controller answered.
        """
        request_code = RequestCode.CONTROLLER_GET_SYNC_STATE_DATA

        async def ask(addr: str) -> dict[str, Any] | None:
            try:
                response = await self._client.remoting.invoke(
                    addr, RemotingCommand.request(request_code, {}), self.client_config.request_timeout_ms
                )
                if response.code != ResponseCode.SUCCESS:
                    return None
                state = orjson.loads(response.body)
            except (OrbitError, orjson.JSONDecodeError):
                return None
            return state if isinstance(state, dict) else None

        answers = [
            answer for answer in await asyncio.gather(*(ask(addr) for addr in controller_addrs)) if answer
        ]
        if not answers:
            raise ConnectError(f"no controller of {';'.join(controller_addrs)} answered")
        leaders = [answer for answer in answers if answer.get("controller", {}).get("isLeader")]
        return leaders[0] if leaders else answers[0]

    async def list_topics(self) -> list[str]:
        """Every topic the name server knows, sorted."""
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(decode_topic_list(response.body).topic_list)

    async def user_topics(self) -> list[str]:
        """The topics users made, sorted: every topic the name server knows but the internal ones
        (retry, dead-letter and system topics, and those a broker names after its cluster and
        itself; see :mod:`orbitmq.client._topic_names`)."""
        info = await self.cluster_info()
        return [name for name in await self.list_topics() if not is_internal_topic(name, info)]

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The current route of ``topic``.

        Raises:
            TopicNotExistError: the name server does not know ``topic``.
        """
        route = await self._client.get_route(topic, refresh=True)
        self._client.forget_topic(topic)
        if route is None:
            raise TopicNotExistError(
                ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic}: it does not exist"
            )
        return route

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted by broker name and queue id.

        Raises:
            TopicNotExistError: the name server does not know ``topic``.
        """
        route = await self.topic_route(topic)
        return sorted(
            MessageQueue(topic, data.broker_name, queue_id)
            for data in route.queue_datas
            if data.readable
            for queue_id in range(data.read_queue_nums)
        )

    # -- topics ----------------------------------------------------------------------------------

    async def _master_addrs(self, cluster: str | None) -> list[str]:
        info = await self.cluster_info()
        if cluster is None:
            names = set(info.broker_addr_table)
        elif cluster in info.cluster_addr_table:
            names = info.cluster_addr_table[cluster]
        else:
            raise ClientError(f"cluster {cluster} is unknown to the name server")
        addrs = [
            info.broker_addr_table[name].master_addr
            for name in sorted(names)
            if name in info.broker_addr_table
        ]
        masters = [addr for addr in addrs if addr is not None]
        if not masters:
            raise ClientError(f"no master broker in cluster {cluster or '(any)'}")
        return masters

    async def _broker(
        self, addr: str, code: int, ext: dict[str, str], what: str, body: bytes = b""
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, ext, body)
        response = await self._client.remoting.invoke(addr, request, self.client_config.request_timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"{what} on broker {addr}: {response.remark}")
        return response

    async def create_topic(
        self,
        topic: str,
        queue_nums: int = 8,
        *,
        cluster: str | None = None,
        perm: int = 6,
        order: bool = False,
        read_queue_nums: int | None = None,
        write_queue_nums: int | None = None,
        broker_addr: str | None = None,
        attributes: str | None = None,
    ) -> None:
        """Create or update ``topic`` on every master of ``cluster`` (all clusters when None), or
        on the one broker at ``broker_addr`` (``mqadmin updateTopic -b``); ``attributes`` are
        RocketMQ 5 attribute changes (``+message.type=FIFO``, ``model.topic_attributes``).

        ``queue_nums`` sets both queue counts; ``read_queue_nums`` / ``write_queue_nums`` set one
        each (unequal counts are allowed, as when a topic is shrunk: producers write to the first
        ``write_queue_nums`` queues, consumers read the first ``read_queue_nums``).
        Waits (up to 5 s) until the name server routes the topic to those brokers.

        Raises:
            ClientError: an invalid ``perm`` (see :func:`check_topic_perm`), an unknown cluster
                or no master.
            BrokerResponseError: a broker refused (reserved or invalid topic name).
        """
        check_topic_perm(topic, perm)
        header = CreateTopicRequestHeader(
            topic=topic,
            read_queue_nums=queue_nums if read_queue_nums is None else read_queue_nums,
            write_queue_nums=queue_nums if write_queue_nums is None else write_queue_nums,
            perm=perm,
            order=order,
            attributes=attributes,
        )
        masters = [broker_addr] if broker_addr else await self._master_addrs(cluster)
        for addr in masters:
            await self._broker(
                addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext(), f"create topic {topic}"
            )
        await self._wait_for_route(topic, len(masters))

    async def topic_configs(
        self, topic: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, TopicConfig]:
        """``topic``'s settings on each master of ``cluster`` (all when None) that has it, by
        address; only the broker at ``broker_addr`` when given."""
        configs: dict[str, TopicConfig] = {}
        for addr in [broker_addr] if broker_addr else await self._master_addrs(cluster):
            response = await self._broker(addr, RequestCode.GET_ALL_TOPIC_CONFIG, {}, "list topic configs")
            config = decode_topic_config_wrapper(response.body).topic_config_table.get(topic)
            if config is not None:
                configs[addr] = config
        return configs

    async def update_topic(
        self,
        topic: str,
        *,
        queue_nums: int | None = None,
        perm: int | None = None,
        order: bool | None = None,
        cluster: str | None = None,
        read_queue_nums: int | None = None,
        write_queue_nums: int | None = None,
        broker_addr: str | None = None,
        attributes: str | None = None,
    ) -> dict[str, TopicConfig]:
        """Change the given settings of an existing ``topic`` and keep the others, on each master
        (on the broker at ``broker_addr`` only, when given). ``queue_nums`` sets both queue
        counts, ``read_queue_nums`` / ``write_queue_nums`` one each; ``attributes`` changes the
        named attributes (``+message.type=FIFO``, ``-reserve.time``) and keeps the others.

        Returns:
            The settings each master holds afterwards, by broker address.

        Raises:
            TopicNotExistError: no master of ``cluster`` has ``topic``.
            ClientError: an invalid ``perm``, an unknown cluster or no master.
            BrokerResponseError: a broker refused.
        """
        if perm is not None:
            check_topic_perm(topic, perm)
        current = await self.topic_configs(topic, cluster=cluster, broker_addr=broker_addr)
        if not current:
            where = f"broker {broker_addr}" if broker_addr else f"any master of {cluster or 'any cluster'}"
            raise TopicNotExistError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on {where}")
        read = queue_nums if read_queue_nums is None else read_queue_nums
        write = queue_nums if write_queue_nums is None else write_queue_nums
        for addr, config in current.items():
            header = CreateTopicRequestHeader(
                topic=topic,
                read_queue_nums=config.read_queue_nums if read is None else read,
                write_queue_nums=config.write_queue_nums if write is None else write,
                perm=config.perm if perm is None else perm,
                topic_filter_type=config.topic_filter_type,
                topic_sys_flag=config.topic_sys_flag,
                order=config.order if order is None else order,
                attributes=attributes,
            )
            await self._broker(
                addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext(), f"update topic {topic}"
            )
        await self._wait_for_route(topic, len(current))
        return await self.topic_configs(topic, cluster=cluster, broker_addr=broker_addr)

    async def _wait_for_route(self, topic: str, broker_count: int) -> None:
        deadline = time.monotonic() + _ROUTE_WAIT_S
        while time.monotonic() < deadline:
            route = await self._client.get_route(topic, refresh=True)
            if route is not None and len(route.queue_datas) >= broker_count:
                break
            await asyncio.sleep(0.05)
        self._client.forget_topic(topic)

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """Delete ``topic`` from every master of ``cluster`` (all when None) and the name servers.

        Raises:
            TopicNotExistError: neither the name server nor a master of ``cluster`` has ``topic``.
            ClientError: unknown cluster or no master.
            BrokerResponseError: a broker or name server refused.
        """
        # A half-deleted topic (gone from the brokers, still routed, or the reverse) is deleted
        # again; only a topic nobody has is an error, as a mistyped name must not say "deleted".
        if topic not in await self.list_topics() and not await self.topic_configs(topic, cluster=cluster):
            raise TopicNotExistError(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic {topic} does not exist (no name server route, no broker of "
                f"{cluster or 'any cluster'} has it)",
            )
        for addr in await self._master_addrs(cluster):
            await self._broker(
                addr,
                RequestCode.DELETE_TOPIC_IN_BROKER,
                DeleteTopicRequestHeader(topic).to_ext(),
                f"delete {topic}",
            )
        ext = DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext()
        for addr in self.client_config.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
            response = await self._client.remoting.invoke(
                addr, request, self.client_config.request_timeout_ms
            )
            if response.code != ResponseCode.SUCCESS:
                raise error_for_code(
                    response.code, f"delete topic {topic} on name server {addr}: {response.remark}"
                )

    # -- queue offsets ---------------------------------------------------------------------------

    async def _queue_call(self, mq: MessageQueue, code: int, ext: dict[str, str]) -> RemotingCommand:
        if self._client.find_broker_addr(mq.broker_name, only_this=True) is None:
            await self._client.get_route(mq.topic, refresh=True)
            self._client.forget_topic(mq.topic)
        response = await self._client.invoke_broker(mq.broker_name, RemotingCommand.request(code, ext))
        if response.code not in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND):
            raise error_for_code(
                response.code,
                f"request {code} for {mq.topic} queue {mq.queue_id} on {mq.broker_name}: {response.remark}",
            )
        return response

    async def max_offset(self, mq: MessageQueue) -> int:
        """The next queue offset to be written in ``mq``."""
        response = await self._queue_call(
            mq, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(mq.topic, mq.queue_id).to_ext()
        )
        return int(response.ext_fields.get("offset", "0"))

    async def min_offset(self, mq: MessageQueue) -> int:
        """The oldest queue offset still stored in ``mq``."""
        response = await self._queue_call(
            mq, RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(mq.topic, mq.queue_id).to_ext()
        )
        return int(response.ext_fields.get("offset", "0"))

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The queue offset of the first message of ``mq`` stored at or after ``timestamp_ms``."""
        header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms)
        response = await self._queue_call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())
        return int(response.ext_fields.get("offset", "0"))

    async def last_store_timestamp(self, mq: MessageQueue, max_offset: int) -> int:
        """Store time (ms) of the message at ``max_offset - 1`` of ``mq``; 0 when there is none."""
        if max_offset <= 0:
            return 0
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=max_offset - 1,
            max_msg_nums=1,
            sys_flag=_PULL_FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription="*",
            expression_type="TAG",
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await self._client.invoke_broker(mq.broker_name, request)
        if response.code != ResponseCode.SUCCESS or not response.body:
            return 0
        messages = decode_stored_messages(response.body, decode_body=False)
        return messages[-1].store_timestamp if messages else 0

    async def queue_statuses_of(
        self, queues: Sequence[MessageQueue], broker_id: int
    ) -> dict[MessageQueue, QueueStatus]:
        """Min/max offset of ``queues`` (all of one broker name) as member ``broker_id`` answers.

        A slave answers too, so offsets can be learned while the master is away. The address is
        the one the last route read named (``topic_route``); ``last_update_timestamp_ms`` is 0
        (not asked). Every request is in flight at once.

        Raises:
            NoRouteError: the route names no broker ``broker_id`` of that broker name.
            RemotingError: the member could not be reached or did not answer in time.
            BrokerResponseError: the member refused.
        """

        async def one(mq: MessageQueue, code: int, ext: dict[str, str]) -> int:
            request = RemotingCommand.request(code, ext)
            response = await self._client.invoke_broker(
                mq.broker_name, request, None, broker_id, only_this=True
            )
            if response.code != ResponseCode.SUCCESS:
                raise error_for_code(
                    response.code,
                    f"request {code} for {mq.topic} queue {mq.queue_id} on {mq.broker_name} "
                    f"id {broker_id}: {response.remark}",
                )
            return int(response.ext_fields.get("offset", "0"))

        calls = []
        for mq in queues:
            calls.append(
                one(mq, RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(mq.topic, mq.queue_id).to_ext())
            )
            calls.append(
                one(mq, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(mq.topic, mq.queue_id).to_ext())
            )
        offsets = await asyncio.gather(*calls)
        return {mq: QueueStatus(offsets[2 * i], offsets[2 * i + 1], 0) for i, mq in enumerate(queues)}

    async def topic_status(self, topic: str) -> dict[MessageQueue, QueueStatus]:
        """Min/max offset and last store time of every queue of ``topic``.

        Raises:
            TopicNotExistError: the name server does not know ``topic``.
        """
        stats = await self.topic_stats(topic)
        return {
            mq: QueueStatus(item.min_offset, item.max_offset, item.last_update_timestamp)
            for mq, item in stats.items()
        }

    # -- consumer offsets ------------------------------------------------------------------------

    async def committed_offset(
        self, group: str, mq: MessageQueue, *, zero_if_not_found: bool = True
    ) -> int | None:
        """The offset ``group`` committed for ``mq``; ``None`` when the broker has none.

        A RocketMQ 4.x broker answers 0 for a group that never committed on a queue that was
        never truncated; ``zero_if_not_found=False`` (``setZeroIfNotFound``) asks for ``None``
        instead, so "never committed" can be told from "committed 0".
        """
        header = QueryConsumerOffsetRequestHeader(
            group, mq.topic, mq.queue_id, set_zero_if_not_found=zero_if_not_found
        )
        response = await self._queue_call(mq, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return int(response.ext_fields.get("offset", "0"))

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """Set ``group``'s committed offset of ``mq`` to ``offset``."""
        header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset)
        await self._queue_call(mq, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())

    async def consumer_progress(
        self, group: str, topic: str | None = None
    ) -> dict[MessageQueue, QueueProgress]:
        """Committed offset, broker max offset and lag of ``group`` on every queue of ``topic``.

        Without ``topic``: every queue of each topic where the group committed on at least one
        queue (its queues committed at 0 or never committed included), among the user topics
        and the group's ``%RETRY%`` topic (the broker has no GET_CONSUME_STATS). An empty
        answer means the group is online but committed nothing yet. See
        :class:`QueueProgress` for how lag is counted.

        Raises:
            SubscriptionGroupNotExistError: no broker knows ``group`` (no offset committed by
                it, no online member).
            TopicNotExistError: ``topic`` is given and the name server does not know it.
        """
        return await consumer_progress(self, group, topic)

    async def broker_knows_group(self, group: str) -> bool:
        """Does some master hold ``group``'s subscription group config (its table, read with
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG; a broker creates the config when a consumer of the
        group first heartbeats) or list an online member of it (GET_CONSUMER_LIST_BY_GROUP)?

        Never GET_SUBSCRIPTIONGROUP_CONFIG: like RocketMQ 5's, a broker with
        ``autoCreateSubscriptionGroup`` creates the group that request names, so asking would
        make a mistyped name known.
        """
        by_group = GetConsumerListByGroupRequestHeader(group).to_ext()
        remoting = self._client.remoting
        timeout_ms = self.client_config.request_timeout_ms
        for addr in await self._master_addrs(None):
            table = RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
            response = await remoting.invoke(addr, table, timeout_ms)
            if response.code == ResponseCode.SUCCESS and group in decode_subscription_group_wrapper(
                response.body
            ):
                return True
            members = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, by_group)
            if (await remoting.invoke(addr, members, timeout_ms)).code == ResponseCode.SUCCESS:
                return True
        return False

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int
    ) -> dict[MessageQueue, int]:
        """Set ``group``'s offsets on every queue of ``topic`` to the first message at ``timestamp_ms``.

        Live: online consumers move without a restart (see the module docstring).

        Returns:
            The new committed offset of each queue.

        Raises:
            SubscriptionGroupNotExistError: no broker knows ``group`` (a mistyped group must not
                get offsets written for it).
            TopicNotExistError: the name server does not know ``topic``.
        """
        await self.require_group(group, topic)
        return await self.reset_offset(group, topic, timestamp_ms, force=True)

    async def require_group(self, group: str, topic: str) -> None:
        """Return when ``group`` exists (an offset it committed, its config or an online member
        on some broker), before its offsets on ``topic`` are reset: brokers reset any group they
        are asked to, as RocketMQ's do.

        Raises:
            TopicNotExistError: the name server does not know ``topic``.
            SubscriptionGroupNotExistError: no broker knows ``group``.
        """
        await require_group(self, group, topic)
