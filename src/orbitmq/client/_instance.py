"""The client core shared by every producer, consumer and admin client of one client id.

A :class:`ClientInstance` (RocketMQ's ``MQClientInstance``) owns what must exist once per
client id and event loop: the :class:`RemotingClient` with its connections, the topic-route
cache and the broker address table, the registered producer and consumer groups, and the
background tasks:

=====================  ======================================================================
task                   what it does
=====================  ======================================================================
route refresh          every ``poll_name_server_interval_ms``: fetch the route of every topic
                       in use (asked for by a producer, subscribed by a consumer); at once
                       (``refresh_route_soon``, at most once a second per topic) when a
                       consumer's pull or offset request finds the routed broker gone
heartbeat              every ``heartbeat_broker_interval_ms``: HEART_BEAT to every broker,
                       naming this client's producer and consumer groups
persist offsets        every ``persist_consumer_offset_interval_ms``: each consumer's
                       ``persist_offsets()``
=====================  ======================================================================

Servers also call the client: NOTIFY_CONSUMER_IDS_CHANGED wakes a consumer's rebalance,
CHECK_TRANSACTION_STATE goes to the producer of the message's group (when it has a
``check_transaction_state`` hook), RESET_CONSUMER_CLIENT_OFFSET to the consumer of the group
(either body form), GET_CONSUMER_RUNNING_INFO to the consumer's ``running_info()`` and
CONSUME_MESSAGE_DIRECTLY to a push consumer's ``consume_directly()``.

Life cycle: :meth:`ClientInstance.get_or_create` returns the instance for a config's client id
on the running loop and counts one user; :meth:`start` is idempotent; each user calls
:meth:`close` once, and the last one really closes it. The registry is per event loop because
connections belong to one loop (a blocking facade runs its own loop in a thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar, Protocol, runtime_checkable

from orbitmq.client._record_decode import decode_records
from orbitmq.client._reply import reply_from_push
from orbitmq.client._server_requests import encode_running_info
from orbitmq.client.config import ClientConfig
from orbitmq.errors import (
    ClientError,
    ClientStateError,
    NoRouteError,
    OrbitError,
    RemotingError,
    error_for_code,
)
from orbitmq.model.heartbeat import ConsumerData, HeartbeatData, ProducerData
from orbitmq.model.message import MessageConst, MessageExt, MessageQueue
from orbitmq.model.route import MASTER_BROKER_ID, TopicRouteData
from orbitmq.protocol.admin_bodies import decode_reset_offset_body
from orbitmq.protocol.admin_headers import ConsumeMessageDirectlyRequestHeader, ReplyMessageRequestHeader
from orbitmq.protocol.bodies import decode_cluster_info, decode_topic_route, encode_heartbeat
from orbitmq.protocol.client_bodies import (
    ConsumeMessageDirectlyResult,
    encode_consume_message_directly_result,
    encode_consumer_running_info,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetRouteInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
    UnregisterClientRequestHeader,
)
from orbitmq.protocol.message_codec import decode_stored_message
from orbitmq.transport.connection import RemotingClient

__all__ = ["ClientInstance", "ConsumerHandle", "TransactionCheckHook"]

logger = logging.getLogger(__name__)

ROUTE_REFRESH_MIN_INTERVAL_S = 1.0
"""An on-demand route refresh of one topic happens at most this often (see refresh_route_soon)."""


def _log_refresh_failure(fetch: asyncio.Task[TopicRouteData | None]) -> None:
    if not fetch.cancelled() and fetch.exception() is not None:
        logger.info("on-demand route refresh failed: %s", fetch.exception())


# Requests every name server serves; a peer that refuses them is something else.
_NAMESRV_CODES = frozenset(
    {
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    }
)


@runtime_checkable
class ConsumerHandle(Protocol):
    """What the instance needs from a consumer (push or pull) it serves."""

    def consumer_data(self) -> ConsumerData:
        """The group, model and subscriptions to put into heartbeats."""
        ...

    def subscribed_topics(self) -> set[str]:
        """Topics whose routes the instance keeps fresh for this consumer."""
        ...

    async def rebalance(self) -> None:
        """Recompute this client's share of the subscribed queues now."""
        ...

    def rebalance_soon(self) -> None:
        """Wake the rebalance soon (the broker said the group's members changed)."""
        ...

    async def persist_offsets(self) -> None:
        """Commit the consumed offsets to the brokers."""
        ...

    async def on_reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Restart consumption of ``topic`` at ``offsets`` (an admin reset the group)."""
        ...


class TransactionCheckHook(Protocol):
    """Optional producer method called for CHECK_TRANSACTION_STATE."""

    async def check_transaction_state(
        self, broker_addr: str, header: CheckTransactionStateRequestHeader, message: MessageExt
    ) -> None: ...


_RegistryKey = tuple[str, int]


class ClientInstance:
    """Connections, routes, heartbeats and server callbacks shared by one client id.

    Use :meth:`get_or_create` rather than the constructor, so that producers and consumers of
    one client id share it.
    """

    _registry: ClassVar[dict[_RegistryKey, ClientInstance]] = {}

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = config.client_id
        credentials = config.credentials
        self.remoting = RemotingClient(
            connect_timeout_ms=config.connect_timeout_ms,
            signer=credentials.sign if credentials is not None else None,
            ssl_context=config.ssl_context(),
        )
        self._namesrv_addrs = config.namesrv_addrs
        self._namesrv_index = random.randrange(len(self._namesrv_addrs))
        self._routes: dict[str, TopicRouteData] = {}
        self._route_topics: set[str] = set()
        self._route_fetches: dict[str, asyncio.Task[TopicRouteData | None]] = {}
        self._route_refreshed_at: dict[str, float] = {}
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._heard_by: set[str] = set()  # broker addresses that took a heartbeat of this client
        self._producers: dict[str, object] = {}
        self._consumers: dict[str, ConsumerHandle] = {}
        self._replies: dict[str, asyncio.Future[MessageExt]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._users = 0
        self._started = False
        self._closed = False
        self._registry_key: _RegistryKey | None = None
        self._register_server_requests()

    # -- registry and life cycle --------------------------------------------------------------

    @classmethod
    def get_or_create(cls, config: ClientConfig) -> ClientInstance:
        """The instance for ``config.client_id`` on the running loop, counting one more user.

        Every call must be paired with one :meth:`close`.

        Raises:
            RuntimeError: no event loop is running.
        """
        key = (config.client_id, id(asyncio.get_running_loop()))
        instance = cls._registry.get(key)
        if instance is None or instance._closed:
            instance = cls(config)
            instance._registry_key = key
            cls._registry[key] = instance
        elif (instance.config.access_key, instance.config.tls_enable) != (
            config.access_key,
            config.tls_enable,
        ):
            # One client id, one connection per broker: the first user's credentials and TLS
            # settings serve every later user (RocketMQ shares its RPC hook the same way).
            logger.warning(
                "client %s already runs with access key %s and TLS %s; a new user asking for access "
                "key %s and TLS %s shares it (give it another instance_name to keep them apart)",
                config.client_id,
                instance.config.access_key,
                instance.config.tls_enable,
                config.access_key,
                config.tls_enable,
            )
        instance._users += 1
        return instance

    @property
    def started(self) -> bool:
        return self._started and not self._closed

    async def start(self) -> None:
        """Start the background tasks (once; later calls do nothing).

        Raises:
            ClientStateError: the instance was already closed.
        """
        if self._closed:
            raise ClientStateError(f"client instance {self.client_id} is closed")
        if self._started:
            return
        self._started = True
        config = self.config
        self._tasks = [
            self._spawn(self.refresh_routes, config.poll_name_server_interval_ms, "route refresh"),
            self._spawn(self.send_heartbeat_to_all_brokers, config.heartbeat_broker_interval_ms, "heartbeat"),
            self._spawn(self._persist_all_offsets, config.persist_consumer_offset_interval_ms, "persist"),
        ]

    async def close(self) -> None:
        """Release one user; the last one stops the tasks and closes every connection."""
        self._users = max(self._users - 1, 0)
        if self._users > 0 or self._closed:
            return
        self._closed = True
        if self._registry_key is not None and self._registry.get(self._registry_key) is self:
            del self._registry[self._registry_key]
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for fetch in list(self._route_fetches.values()):
            fetch.cancel()
        await self.remoting.close()

    def _spawn(self, job: Callable[[], Awaitable[None]], interval_ms: int, name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(
            self._every(job, interval_ms, name), name=f"orbitmq {name} {self.client_id}"
        )

    async def _every(self, job: Callable[[], Awaitable[None]], interval_ms: int, name: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A background job must outlive one failed round; the next one retries.
                logger.exception("client %s: %s round failed", self.client_id, name)

    # -- groups ----------------------------------------------------------------------------------

    def register_producer(self, group: str, producer: object) -> None:
        """Name ``group`` in heartbeats and route CHECK_TRANSACTION_STATE of it to ``producer``.

        Raises:
            ClientStateError: another producer of this instance already uses ``group``.
        """
        existing = self._producers.get(group)
        if existing is not None and existing is not producer:
            raise ClientStateError(
                f"producer group {group!r} is already registered on client {self.client_id}"
            )
        self._producers[group] = producer

    def unregister_producer(self, group: str) -> None:
        self._producers.pop(group, None)

    def register_consumer(self, group: str, consumer: ConsumerHandle) -> None:
        """Name ``group`` in heartbeats and serve its rebalance, offsets and broker callbacks.

        Raises:
            ClientStateError: another consumer of this instance already uses ``group``.
        """
        existing = self._consumers.get(group)
        if existing is not None and existing is not consumer:
            raise ClientStateError(
                f"consumer group {group!r} is already registered on client {self.client_id}"
            )
        self._consumers[group] = consumer

    def unregister_consumer(self, group: str) -> None:
        self._consumers.pop(group, None)

    def consumer(self, group: str) -> ConsumerHandle | None:
        return self._consumers.get(group)

    async def unregister_client(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        """Tell every known broker that this client left a group (best effort, errors logged)."""
        header = UnregisterClientRequestHeader(
            client_id=self.client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        for addr in self.all_broker_addrs():
            request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext())
            try:
                await self.remoting.invoke(addr, request, self.config.request_timeout_ms)
            except OrbitError as exc:
                logger.info("unregister of client %s from %s failed: %s", self.client_id, addr, exc)

    # -- name server ---------------------------------------------------------------------------

    async def invoke_namesrv(
        self, request: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """Send ``request`` to a name server, failing over to the next one on connection faults.

        The first name server is chosen at random; the instance keeps using the one that
        answered last, and on a remoting fault tries the others in order, each once.

        Raises:
            RemotingError: no name server answered (the last fault).
        """
        timeout = timeout_ms or self.config.request_timeout_ms
        count = len(self._namesrv_addrs)
        last_error: RemotingError | None = None
        for attempt in range(count):
            index = (self._namesrv_index + attempt) % count
            addr = self._namesrv_addrs[index]
            try:
                response = await self.remoting.invoke(addr, request, timeout)
            except RemotingError as exc:
                logger.info("name server %s failed (%s); trying the next one", addr, exc)
                last_error = exc
                continue
            if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and request.code in _NAMESRV_CODES:
                raise await self._not_a_namesrv(addr, request.code)
            self._namesrv_index = index
            return response
        assert last_error is not None  # count >= 1 is checked by ClientConfig
        raise last_error

    async def _not_a_namesrv(self, addr: str, code: int) -> ClientError:
        probe = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {})
        try:
            response = await self.remoting.invoke(addr, probe, self.config.request_timeout_ms)
            broker = response.code == ResponseCode.SUCCESS
        except OrbitError:
            broker = False
        what = "it looks like a broker" if broker else "nor does it answer as a broker"
        return ClientError(
            f"{addr} is not a name server: it does not serve {RequestCode(code).name} ({what}). "
            "Give the name server's address (port 9876 unless configured otherwise)"
        )

    async def get_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        """The route of ``topic`` (cached unless ``refresh``); ``None`` when the topic does not exist.

        The topic is kept fresh by the route-refresh task from then on. When a refresh fails
        with a remoting fault and a cached route exists, the cached route is returned.

        Raises:
            RemotingError: no name server answered and no route is cached.
            BrokerResponseError: a name server answered with an unexpected code.
        """
        self._route_topics.add(topic)
        cached = self._routes.get(topic)
        if cached is not None and not refresh:
            return cached
        try:
            return await asyncio.shield(self._start_route_fetch(topic))
        except RemotingError:
            if cached is None:
                raise
            logger.info("route refresh of topic %s failed; keeping the cached route", topic)
            return cached

    def refresh_route_soon(self, topic: str) -> None:
        """Fetch the route of ``topic`` now, in the background, instead of at the next poll.

        Callers that saw a broker answer as if it were no longer what the route says (the
        routed master unreachable, a fault whose class says ``refresh_route``) call this; the
        producer's retry loop fetches the route itself, through the same shared request.
        At most once per ``ROUTE_REFRESH_MIN_INTERVAL_S`` per topic, so a flapping broker cannot
        flood the name server. A failed fetch is logged; the cached route stays.
        """
        if self._closed:
            return
        now = time.monotonic()
        last = self._route_refreshed_at.get(topic)
        if last is not None and now - last < ROUTE_REFRESH_MIN_INTERVAL_S:
            return
        self._route_refreshed_at[topic] = now
        self._start_route_fetch(topic).add_done_callback(_log_refresh_failure)

    def _start_route_fetch(self, topic: str) -> asyncio.Task[TopicRouteData | None]:
        fetch = self._route_fetches.get(topic)
        if fetch is None:
            # Concurrent callers share one request per topic.
            fetch = asyncio.get_running_loop().create_task(self._fetch_route(topic))
            self._route_fetches[topic] = fetch
            fetch.add_done_callback(lambda _: self._route_fetches.pop(topic, None))
        return fetch

    def cached_route(self, topic: str) -> TopicRouteData | None:
        """The cached route of ``topic`` without any request."""
        return self._routes.get(topic)

    async def _fetch_route(self, topic: str) -> TopicRouteData | None:
        header = GetRouteInfoRequestHeader(topic=topic)
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext())
        response = await self.invoke_namesrv(request)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            self._routes.pop(topic, None)
            return None
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"route of topic {topic}: {response.remark}")
        route = decode_topic_route(response.body)
        self._update_route(topic, route)
        if self._consumers and any(
            addr not in self._heard_by
            for broker in route.broker_datas
            for addr in broker.broker_addrs.values()
        ):
            # A broker this client's consumers have not told about themselves (the topic or
            # the broker is new): without a heartbeat now, a rebalance would find the group
            # empty there until the next heartbeat round (30 s).
            await self.send_heartbeat_to_all_brokers()
        return self._routes[topic]

    def _update_route(self, topic: str, route: TopicRouteData) -> None:
        for broker in route.broker_datas:
            self._broker_addrs[broker.broker_name] = dict(broker.broker_addrs)
        if self._routes.get(topic) != route:
            # Routes are replaced, never mutated, so users may compare them by identity.
            self._routes[topic] = route

    async def refresh_routes(self) -> None:
        """Fetch the route of every topic in use now (the periodic task's job)."""
        topics = set(self._route_topics)
        for consumer in list(self._consumers.values()):
            topics |= consumer.subscribed_topics()
        for topic in sorted(topics):
            try:
                await self.get_route(topic, refresh=True)
            except OrbitError as exc:
                logger.info("route refresh of topic %s failed: %s", topic, exc)

    async def reach_all_brokers(self, template_topic: str) -> None:
        """Learn every broker of the cluster and heartbeat to each of them now.

        As RocketMQ's producer at start: the route of the auto-create template
        (``template_topic``, TBW102, on every broker when ``autoCreateTopicEnable`` is on),
        else the name server's cluster table, names the brokers. A broker asks only producer
        groups it has heard from to check a transaction.

        Raises:
            RemotingError: no name server answered.
        """
        if await self.get_route(template_topic, refresh=True) is None:
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
            response = await self.invoke_namesrv(request)
            if response.code == ResponseCode.SUCCESS:
                for name, broker in decode_cluster_info(response.body).broker_addr_table.items():
                    self._broker_addrs.setdefault(name, dict(broker.broker_addrs))
        await self.send_heartbeat_to_all_brokers()

    def forget_topic(self, topic: str) -> None:
        """Stop refreshing ``topic`` (a producer will not send to it any more)."""
        self._route_topics.discard(topic)

    # -- brokers -------------------------------------------------------------------------------

    def find_broker_addr(
        self, broker_name: str, broker_id: int = MASTER_BROKER_ID, *, only_this: bool = False
    ) -> str | None:
        """The address of ``broker_name``'s broker ``broker_id``.

        Unless ``only_this``, fall back to the master, then to any broker of that name.
        """
        addrs = self._broker_addrs.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is not None or only_this:
            return addr
        master = addrs.get(MASTER_BROKER_ID)
        if master is not None:
            return master
        return addrs[min(addrs)]

    def broker_names(self) -> set[str]:
        """Every broker name seen in a route."""
        return set(self._broker_addrs)

    def master_addrs(self) -> list[str]:
        """The master address of every broker name seen in a route, sorted."""
        return sorted(
            addrs[MASTER_BROKER_ID] for addrs in self._broker_addrs.values() if MASTER_BROKER_ID in addrs
        )

    def all_broker_addrs(self) -> list[str]:
        """Every broker address (masters and slaves) seen in a route, sorted."""
        return sorted({addr for addrs in self._broker_addrs.values() for addr in addrs.values()})

    async def invoke_broker(
        self,
        broker_name: str,
        request: RemotingCommand,
        timeout_ms: int | None = None,
        broker_id: int = MASTER_BROKER_ID,
        *,
        only_this: bool = False,
    ) -> RemotingCommand:
        """Send ``request`` to a broker by name and return its response, whatever the code.

        When the route has no broker ``broker_id`` of that name (its master went away), the
        request goes to the lowest id it has, a slave, as RocketMQ's clients do; unless
        ``only_this``.

        Raises:
            NoRouteError: no address is known for ``broker_name`` (id ``broker_id``).
            RemotingError: the broker could not be reached or did not answer in time.
        """
        addr = self.find_broker_addr(broker_name, broker_id, only_this=only_this)
        if addr is None:
            raise NoRouteError(f"no address known for broker {broker_name} id {broker_id}")
        return await self.remoting.invoke(addr, request, timeout_ms or self.config.request_timeout_ms)

    def heartbeat_data(self) -> HeartbeatData:
        """This client's groups, as a HEART_BEAT body states them."""
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=[ProducerData(group) for group in sorted(self._producers)],
            consumer_data_set=[consumer.consumer_data() for consumer in self._consumers.values()],
        )

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every master (and to slaves too when consumers are registered)."""
        if not self._producers and not self._consumers:
            return
        body = encode_heartbeat(self.heartbeat_data())
        addrs = self.all_broker_addrs() if self._consumers else self.master_addrs()
        results = await asyncio.gather(
            *(self._heartbeat(addr, body) for addr in addrs), return_exceptions=True
        )
        for addr, result in zip(addrs, results, strict=True):
            if isinstance(result, BaseException):
                logger.info("heartbeat of client %s to %s failed: %s", self.client_id, addr, result)
            else:
                self._heard_by.add(addr)

    async def _heartbeat(self, addr: str, body: bytes) -> None:
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
        response = await self.remoting.invoke(addr, request, self.config.request_timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"heartbeat to {addr}: {response.remark}")

    async def _persist_all_offsets(self) -> None:
        for consumer in list(self._consumers.values()):
            try:
                await consumer.persist_offsets()
            except OrbitError as exc:
                logger.info("persisting offsets of %s failed: %s", consumer.consumer_data().group_name, exc)

    # -- server -> client requests -------------------------------------------------------------

    def _register_server_requests(self) -> None:
        self.remoting.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notify_consumer_ids_changed)
        self.remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self.remoting.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self.remoting.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_running_info)
        self.remoting.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_message_directly)
        self.remoting.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_push_reply_message)

    async def _on_notify_consumer_ids_changed(self, addr: str, request: RemotingCommand) -> None:
        header = NotifyConsumerIdsChangedRequestHeader.from_ext(request.ext_fields)
        consumer = self._consumers.get(header.consumer_group)
        if consumer is not None:
            logger.info("broker %s: members of group %s changed", addr, header.consumer_group)
            consumer.rebalance_soon()

    async def _on_check_transaction_state(self, addr: str, request: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        message, _ = decode_stored_message(request.body)
        group = message.properties.get(MessageConst.PRODUCER_GROUP, "")
        producer = self._producers.get(group)
        hook = getattr(producer, "check_transaction_state", None)
        if hook is None:
            logger.warning(
                "broker %s asks for the transaction state of group %r, which has no checker", addr, group
            )
            return
        await hook(addr, header, message)

    async def _on_reset_offset(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        offsets = decode_reset_offset_body(request.body) if request.body else {}
        consumer = self._consumers.get(header.group)
        if consumer is not None:
            logger.info("broker %s resets group %s on topic %s", addr, header.group, header.topic)
            await consumer.on_reset_offset(header.topic, offsets)
        return request.response(ResponseCode.SUCCESS) if not request.is_oneway else None

    async def _on_get_running_info(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        consumer = self._consumers.get(header.consumer_group)
        if consumer is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"the consumer group {header.consumer_group} not exist in client {self.client_id}",
            )
        running_info = getattr(consumer, "running_info", None)
        if running_info is not None:
            body = encode_consumer_running_info(running_info())
        else:
            body = encode_running_info(self.client_id, consumer.consumer_data())
        return request.response(ResponseCode.SUCCESS, None, {}, body)

    def expect_reply(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        """A future the reply with ``correlation_id`` completes (request-reply); forget it with
        :meth:`forget_reply` when the request ends."""
        future: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._replies[correlation_id] = future
        return future

    def forget_reply(self, correlation_id: str) -> None:
        self._replies.pop(correlation_id, None)

    async def _on_push_reply_message(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        header = ReplyMessageRequestHeader.from_ext(request.ext_fields)
        reply = reply_from_push(header, request.body)
        correlation_id = reply.properties.get(MessageConst.CORRELATION_ID, "")
        future = self._replies.get(correlation_id)
        if future is None or future.done():
            logger.info("reply %s from %s arrived after its request ended", correlation_id, addr)
        else:
            future.set_result(reply)
        return request.response(ResponseCode.SUCCESS, None, {})

    async def _on_consume_message_directly(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        header = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
        consumer = self._consumers.get(header.consumer_group)
        consume_directly = getattr(consumer, "consume_directly", None)
        if consume_directly is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"no push consumer of group {header.consumer_group} in client {self.client_id}",
            )
        messages = decode_records(request.body)
        if not messages:
            return request.response(ResponseCode.SYSTEM_ERROR, "CONSUME_MESSAGE_DIRECTLY carried no message")
        result: ConsumeMessageDirectlyResult = await consume_directly(messages[0])
        return request.response(
            ResponseCode.SUCCESS, None, {}, encode_consume_message_directly_result(result)
        )
