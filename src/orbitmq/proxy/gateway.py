"""BrokerGateway: the proxy's side of the remoting protocol, on top of ``orbitmq.client``.

The proxy talks to name servers and brokers exactly as a 4.x client does, in both modes:
cluster mode (``orbitmq proxy``, its own process) and local mode (inside ``orbitmq broker`` and
``orbitmq standalone``, where the broker is on the same host). One
:class:`~orbitmq.client._instance.ClientInstance` keeps the routes, the connections and the
heartbeats; every gRPC call becomes one remoting request to the broker that owns the queue:

| gRPC | remoting |
| --- | --- |
| QueryRoute, QueryAssignment | GET_ROUTEINFO_BY_TOPIC (cached, refreshed every 30 s) |
| SendMessage | SEND_MESSAGE_V2, producer group = the topic |
| EndTransaction | END_TRANSACTION |
| RecallMessage | RECALL_MESSAGE |
| ReceiveMessage | POP_MESSAGE, queue -1 (every queue of the broker named in the request) |
| AckMessage / ChangeInvisibleDuration | ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME |
| ForwardMessageToDeadLetterQueue | CONSUMER_SEND_MSG_BACK to the DLQ, then ACK_MESSAGE |
| settings of a consumer group | GET_SUBSCRIPTIONGROUP_CONFIG (cached for 10 s) |
| a topic's message type | GET_TOPIC_CONFIG (cached for 5 s) |

Transaction checks come back the same way: for every topic a gRPC producer publishes to, the
proxy names a producer group equal to the topic in its heartbeats, so a broker's
CHECK_TRANSACTION_STATE for a half message of that topic reaches the proxy, which hands it to
the gRPC producer's Telemetry stream.

An unknown topic gets the TBW102 route when the name servers have one (autoCreateTopicEnable),
as a 4.x producer does: its first send then creates the topic.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import orjson

from orbitmq.acl.signature import Credentials
from orbitmq.client._instance import ClientInstance
from orbitmq.client.config import ClientConfig
from orbitmq.errors import NoRouteError, RemotingError
from orbitmq.model.message import MessageExt
from orbitmq.model.route import MASTER_BROKER_ID, PERM_READ, PERM_WRITE, TopicRouteData
from orbitmq.model.topic_attributes import message_type_of_attributes
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CheckTransactionStateRequestHeader
from orbitmq.protocol.tags import java_string_hash
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.settings import GroupPolicy
from orbitmq.transport.tls import TlsConfig

__all__ = ["BrokerGateway", "CheckHandler", "QueueRef"]

logger = logging.getLogger(__name__)

AUTO_CREATE_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4
"""Queues of a topic its first send creates (the defaultTopicQueueNums of every send header)."""
_GROUP_POLICY_TTL_S = 10.0
_TOPIC_TYPE_TTL_S = 5.0
UNSPECIFIED_TYPE = "UNSPECIFIED"

CheckHandler = Callable[[str, CheckTransactionStateRequestHeader, MessageExt], Awaitable[None]]
"""``handler(broker_addr, header, half_message)`` for a broker's transaction check."""

QueueRef = tuple[str, int]
"""(broker name, queue id)."""


class _TopicProducer:
    """The producer group named after one topic; forwards the broker's checks to the proxy."""

    def __init__(self, handler: CheckHandler) -> None:
        self._handler = handler

    async def check_transaction_state(
        self, broker_addr: str, header: CheckTransactionStateRequestHeader, message: MessageExt
    ) -> None:
        await self._handler(broker_addr, header, message)


class BrokerGateway:
    """Routes, queue choice and remoting calls to brokers (see the module docstring)."""

    def __init__(
        self,
        config: ProxyConfig,
        on_check: CheckHandler,
        credentials: Credentials | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self._config = config
        # With credentials every request to name servers and brokers is signed with the proxy's
        # account; with tls (its client side enabled) every connection is TLS.
        tls_enable = tls is not None and tls.client_enable
        self._client_config = ClientConfig(
            namesrv_addr=";".join(config.namesrv_addr),
            instance_name=f"orbitmq-proxy-{os.getpid()}",
            heartbeat_broker_interval_ms=10_000,
            request_timeout_ms=config.broker_request_timeout_ms,
            access_key=credentials.access_key if credentials else None,
            secret_key=credentials.secret_key if credentials else None,
            tls_enable=tls_enable,
            tls_auth_server=tls.client_auth_server if tls is not None else True,
            tls_trust_cert_path=tls.client_trust_cert_path if tls_enable and tls else None,
            tls_cert_path=tls.client_cert_path if tls_enable and tls else None,
            tls_key_path=tls.client_key_path if tls_enable and tls else None,
            tls_key_password=tls.client_key_password if tls_enable and tls else None,
        )
        self._on_check = on_check
        self._instance: ClientInstance | None = None
        self._producer_topics: set[str] = set()
        self._round_robin = itertools.count()
        self._group_policies: dict[str, tuple[float, GroupPolicy]] = {}
        self._topic_types: dict[str, tuple[float, str]] = {}

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise RuntimeError("BrokerGateway used before start()")
        return self._instance

    async def start(self) -> None:
        self._instance = ClientInstance.get_or_create(self._client_config)
        await self._instance.start()

    async def close(self) -> None:
        if self._instance is not None:
            for topic in list(self._producer_topics):
                self._instance.unregister_producer(topic)
            await self._instance.unregister_client(producer_group=None)
            await self._instance.close()
            self._instance = None

    # -- routes -------------------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRouteData | None:
        """The topic's route; TBW102's when the topic is unknown and auto-creation is on."""
        route = await self.instance.get_route(topic)
        if route is not None or topic == AUTO_CREATE_TOPIC:
            return route
        template = await self.instance.get_route(AUTO_CREATE_TOPIC)
        if template is None:
            return None
        # The first send creates the topic with at most as many queues as it asks for.
        queue_datas = [
            replace(
                data,
                read_queue_nums=min(data.read_queue_nums, DEFAULT_TOPIC_QUEUE_NUMS),
                write_queue_nums=min(data.write_queue_nums, DEFAULT_TOPIC_QUEUE_NUMS),
            )
            for data in template.queue_datas
        ]
        return TopicRouteData(queue_datas=queue_datas, broker_datas=template.broker_datas)

    @staticmethod
    def master_queues(route: TopicRouteData, perm: int) -> list[QueueRef]:
        """(broker, queue id) of every master queue with ``perm``, ordered."""
        masters = {data.broker_name for data in route.broker_datas if MASTER_BROKER_ID in data.broker_addrs}
        queues: list[QueueRef] = []
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if data.broker_name not in masters or not data.perm & perm:
                continue
            count = data.read_queue_nums if perm == PERM_READ else data.write_queue_nums
            queues.extend((data.broker_name, queue_id) for queue_id in range(count))
        return queues

    async def pick_send_queue(self, topic: str, message_group: str | None) -> QueueRef | None:
        """The queue a send goes to: by message group hash for FIFO, else round robin."""
        route = await self.route(topic)
        if route is None:
            return None
        queues = self.master_queues(route, PERM_WRITE)
        if not queues:
            return None
        if message_group is not None:
            return queues[abs(java_string_hash(message_group)) % len(queues)]
        return queues[next(self._round_robin) % len(queues)]

    def broker_addr(self, broker_name: str) -> str:
        """The master address of ``broker_name``.

        Raises:
            NoRouteError: no route named this broker yet.
        """
        addr = self.instance.find_broker_addr(broker_name, only_this=True)
        if addr is None:
            raise NoRouteError(f"no address known for broker {broker_name}")
        return addr

    async def any_broker(self, topic: str) -> str | None:
        route = await self.route(topic)
        queues = self.master_queues(route, PERM_READ) if route is not None else []
        return queues[0][0] if queues else None

    # -- requests -----------------------------------------------------------------------------

    async def invoke(
        self, broker_name: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """Send ``request`` to the master of ``broker_name``.

        Raises:
            NoRouteError: no address is known for the broker.
            RemotingError: the broker could not be reached or did not answer in time.
        """
        return await self.instance.invoke_broker(
            broker_name, request, timeout_ms or self._config.broker_request_timeout_ms, only_this=True
        )

    async def knows_broker(self, broker_name: str, topic: str) -> bool:
        """Whether a route named ``broker_name`` (``topic``'s route is fetched once if not yet)."""
        if broker_name in self.instance.broker_names():
            return True
        try:
            await self.route(topic)
        except (NoRouteError, RemotingError):
            return False
        return broker_name in self.instance.broker_names()

    async def invoke_addr(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return await self.instance.remoting.invoke(addr, request, self._config.broker_request_timeout_ms)

    async def publish_as(self, topic: str) -> None:
        """Name ``topic`` as a producer group in heartbeats (for transaction checks), at once."""
        if topic in self._producer_topics:
            return
        self._producer_topics.add(topic)
        self.instance.register_producer(topic, _TopicProducer(self._on_check))
        await self.route(topic)
        await self.instance.send_heartbeat_to_all_brokers()

    async def topic_message_type(self, topic: str) -> str:
        """The topic's ``message.type`` (``proxy.topic_types``), read with GET_TOPIC_CONFIG from a
        master that hosts it and cached for a few seconds: NORMAL without the attribute or for a
        topic its first send will create through TBW102; MIXED from a broker that predates topic
        types (REQUEST_CODE_NOT_SUPPORTED); UNSPECIFIED when no broker could say."""
        cached = self._topic_types.get(topic)
        now = time.monotonic()
        if cached is not None and now - cached[0] < _TOPIC_TYPE_TTL_S:
            return cached[1]
        route = await self.instance.get_route(topic)
        if route is None:
            kind = "NORMAL" if await self.route(topic) is not None else UNSPECIFIED_TYPE
            self._topic_types[topic] = (now, kind)
            return kind
        masters = {data.broker_name for data in route.broker_datas if MASTER_BROKER_ID in data.broker_addrs}
        for name in sorted(data.broker_name for data in route.queue_datas if data.broker_name in masters):
            request = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
            try:
                response = await self.invoke(name, request)
            except (NoRouteError, RemotingError) as exc:
                logger.info("reading topic %s from broker %s failed: %s", topic, name, exc)
                continue
            if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                kind = "MIXED"
            elif response.code != ResponseCode.SUCCESS or not response.body:
                continue
            else:
                try:
                    document = orjson.loads(response.body)
                    attributes = document.get("attributes") or {}
                    kind = message_type_of_attributes(attributes if isinstance(attributes, dict) else {})
                except (orjson.JSONDecodeError, AttributeError) as exc:
                    logger.warning("topic %s config from broker %s is malformed: %s", topic, name, exc)
                    continue
            self._topic_types[topic] = (now, kind)
            return kind
        return UNSPECIFIED_TYPE

    async def group_policy(self, group: str, broker_name: str | None) -> GroupPolicy:
        """The group's FIFO flag and max attempts from a broker (cached; defaults when unknown)."""
        cached = self._group_policies.get(group)
        now = time.monotonic()
        if cached is not None and now - cached[0] < _GROUP_POLICY_TTL_S:
            return cached[1]
        policy = GroupPolicy()
        names = [broker_name] if broker_name else sorted(self.instance.broker_names())
        for name in names:
            request = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
            try:
                response = await self.invoke(name, request)
            except (NoRouteError, RemotingError) as exc:
                logger.info("reading group %s from broker %s failed: %s", group, name, exc)
                continue
            if response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                break  # a group the broker does not know yet gets the defaults when it first pops
            if response.code == ResponseCode.SUCCESS and response.body:
                try:
                    document = orjson.loads(response.body)
                    policy = GroupPolicy(
                        fifo=bool(document.get("consumeMessageOrderly", False)),
                        max_attempts=int(document.get("retryMaxTimes", 16)) + 1,
                    )
                except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError) as exc:
                    logger.warning("group %s config from broker %s is malformed: %s", group, name, exc)
                break
        self._group_policies[group] = (now, policy)
        return policy
