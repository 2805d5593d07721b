"""NameServer request handlers: decode the header and body, consult the route table, answer.

Handlers never touch a socket and hold no state of their own; the :class:`RouteTable` owns the
state and the clock is injected, so tests can drive expiry without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Protocol, Self, TypeVar

from orbitmq.errors import BadRequestError, BrokerResponseError, RemoteProtocolError
from orbitmq.model.route import MASTER_BROKER_ID, DataVersion, TopicConfig
from orbitmq.namesrv.kv_config import ORDER_TOPIC_CONFIG, KVConfigTable
from orbitmq.namesrv.route_table import RouteTable, TopicTableChanges, topic_table_changes
from orbitmq.protocol.admin_headers import (
    DeleteKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    PutKVConfigRequestHeader,
)
from orbitmq.protocol.bodies import (
    TopicList,
    decode_data_version,
    decode_register_broker_body,
    decode_register_broker_data_version,
    encode_cluster_info,
    encode_data_version,
    encode_kv_table,
    encode_topic_list,
    encode_topic_route,
    topic_config_problem,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetRouteInfoRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from orbitmq.protocol.names import address_problem, shorten
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server import Handler, RequestContext

__all__ = ["NamesrvHandlers", "monotonic_ms"]

logger = logging.getLogger(__name__)
# Registration lines follow requests anyone can send: one line per kind per interval.
_log_limit = LogLimiter(logger)
_DECODE_INLINE_BYTES_MAX = 256 * 1024


class _RequestHeader(Protocol):
    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Self: ...


_H = TypeVar("_H", bound=_RequestHeader)


def monotonic_ms() -> int:
    """Milliseconds of a clock that never goes back (liveness, not wall time)."""
    return time.monotonic_ns() // 1_000_000


def _header(cls: type[_H], request: RemotingCommand) -> _H:
    """The typed header; a bad field raises BadRequestError, which the transport answers."""
    return cls.from_ext(request.ext_fields)


class NamesrvHandlers:
    """The name server's request handlers over one route table."""

    def __init__(
        self,
        route_table: RouteTable,
        clock_ms: Callable[[], int] = monotonic_ms,
        kv_config: KVConfigTable | None = None,
        on_kv_changed: Callable[[], None] | None = None,
        *,
        topics_per_broker_max: int = 0,
        brokers_max: int = 0,
    ) -> None:
        self.route_table = route_table
        self._clock_ms = clock_ms
        self.kv_config = kv_config if kv_config is not None else KVConfigTable()
        self._on_kv_changed = on_kv_changed or (lambda: None)
        self.topics_per_broker_max = topics_per_broker_max
        self.brokers_max = brokers_max
        # GET_ROUTEINFO_BY_TOPIC answers, encoded: topic -> (order config, body). Valid while the
        # route table's version is _route_bodies_version; emptied when it moves.
        self._route_bodies: dict[str, tuple[str | None, bytes]] = {}
        self._route_bodies_version = -1

    def table(self) -> dict[int, Handler]:
        """Request code -> handler, ready for :class:`RemotingServer`."""
        return {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
        }

    # -- brokers -------------------------------------------------------------------------------

    async def register_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """REGISTER_BROKER (103): record the broker and, for a master, its topic table."""
        header = _header(RegisterBrokerRequestHeader, request)
        for field, address in (("brokerAddr", header.broker_addr), ("haServerAddr", header.ha_server_addr)):
            problem = address_problem(address) if address or field == "brokerAddr" else None
            if problem is not None:
                # Published, it would break every client that connects to it (one log line,
                # rate-limited, by the server).
                raise BadRequestError(
                    f"register broker {header.broker_name}: {field}: {problem}", field=field
                )
        body = request.body
        if header.body_crc32 != 0 and header.body_crc32 != zlib.crc32(body) & 0x7FFFFFFF:
            _log_limit.warning(
                "register-crc",
                "register from broker %s at %s: body crc32 %d does not match",
                header.broker_name,
                header.broker_addr,
                header.body_crc32,
            )
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        known_before = header.broker_addr in self.route_table.broker_live_table
        if (
            not known_before
            and self.brokers_max
            and len(self.route_table.broker_live_table) >= self.brokers_max
        ):
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"cannot register broker {header.broker_addr}: {self.brokers_max} brokers registered "
                f"(maxBrokers={self.brokers_max})",
            )
        topic_table: dict[str, TopicConfig] | None = None
        data_version = None
        changes: TopicTableChanges | None = None
        if body:
            # The version this name server already published for this broker: a registration
            # of the same version (every 30 s) leaves its table alone, so its topics are not
            # even decoded (RouteInfoManager ignores them too).
            published = self.route_table.published_version(
                header.broker_name, header.broker_addr, header.broker_id
            )
            # A master's new version is worked out against the table last published for it.
            base = (
                self.route_table.published_table(header.broker_name)
                if header.broker_id == MASTER_BROKER_ID
                else None
            )
            try:
                # 100,000 topics take a second to decode and check: off the event loop then,
                # so route lookups keep being answered meanwhile. A small JSON body is decoded
                # at once (a compressed one is compressed because it is large).
                if header.compressed or len(body) > _DECODE_INLINE_BYTES_MAX:
                    topic_table, data_version, changes = await asyncio.to_thread(
                        self._decode_body, header, body, published, base
                    )
                else:
                    topic_table, data_version, changes = self._decode_body(header, body, published, base)
            except RemoteProtocolError as exc:
                return request.response(
                    ResponseCode.SYSTEM_ERROR, f"bad register body from broker {header.broker_addr}: {exc}"
                )
        epoch_text = request.ext_fields.get("masterEpoch")
        fenced_by = self.route_table.fenced_master(
            header.broker_name,
            header.broker_id,
            int(epoch_text) if epoch_text and epoch_text.isdigit() else None,
        )
        if fenced_by is not None:
            logger.warning(
                "broker %s at %s registers as master of epoch %s, but epoch %d has a newer master: refused",
                header.broker_name,
                header.broker_addr,
                epoch_text,
                fenced_by,
            )
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"master epoch {epoch_text} of {header.broker_addr} is older than the group's epoch {fenced_by}",
            )
        result = self.route_table.register_broker(
            cluster=header.cluster_name,
            broker_name=header.broker_name,
            broker_addr=header.broker_addr,
            broker_id=header.broker_id,
            ha_addr=header.ha_server_addr,
            topic_config_table=topic_table,
            data_version=data_version if data_version is not None else DataVersion(),
            connection_id=ctx.connection.id,
            now_ms=self._clock_ms(),
            changes=changes,
        )
        if not known_before:
            _log_limit.log(
                logging.INFO,
                "broker-registered",
                "broker registered: cluster %s, name %s, id %d, address %s, %d topics",
                header.cluster_name,
                header.broker_name,
                header.broker_id,
                header.broker_addr,
                len(topic_table or {}),
            )
        response_header = RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        )
        return request.response(ResponseCode.SUCCESS, None, response_header.to_ext())

    def _decode_body(
        self,
        header: RegisterBrokerRequestHeader,
        body: bytes,
        published: DataVersion | None,
        base: Mapping[str, TopicConfig] | None,
    ) -> tuple[dict[str, TopicConfig] | None, DataVersion, TopicTableChanges | None]:
        """The body's topics (None when its version is ``published``: nothing to publish), its
        version, and how the topics differ from ``base`` (when given)."""
        if published is not None:
            version = decode_register_broker_data_version(body, compressed=header.compressed)
            if version == published:
                return None, version, None
        decoded = decode_register_broker_body(body, compressed=header.compressed)
        wrapper = decoded.topic_config_serialize_wrapper
        topics = self._legal_topics(header.broker_addr, wrapper.topic_config_table)
        changes = topic_table_changes(base, topics) if base is not None else None
        return topics, wrapper.data_version, changes

    def _legal_topics(self, broker_addr: str, table: dict[str, TopicConfig]) -> dict[str, TopicConfig]:
        """The registration's topic table without entries that break a topic rule (logged).

        Raises:
            BrokerResponseError: the broker registers more topics than maxTopicsPerBroker.
        """
        if self.topics_per_broker_max and len(table) > self.topics_per_broker_max:
            raise BrokerResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"broker {broker_addr} registers {len(table)} topics, more than "
                f"maxTopicsPerBroker={self.topics_per_broker_max}",
            )
        legal: dict[str, TopicConfig] = {}
        for name, config in table.items():
            problem = topic_config_problem(config)
            if problem is None and name != config.topic_name:
                problem = f"entry {shorten(name)} holds topic {shorten(config.topic_name)}"
            if problem is None:
                legal[name] = config
            else:
                # One odd topic must not cost a broker all its routes: skip it, say so.
                _log_limit.warning(
                    "register-bad-topic", "broker %s: topic entry not published: %s", broker_addr, problem
                )
        return legal

    async def unregister_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_BROKER (104): forget one broker address."""
        header = _header(UnregisterBrokerRequestHeader, request)
        if self.route_table.unregister_broker(
            header.cluster_name, header.broker_name, header.broker_addr, header.broker_id
        ):
            _log_limit.log(
                logging.INFO,
                "broker-unregistered",
                "broker unregistered: name %s, address %s",
                header.broker_name,
                header.broker_addr,
            )
        return request.response(ResponseCode.SUCCESS)

    async def query_data_version(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """QUERY_DATA_VERSION (322): does the broker's topic table differ from what we hold?"""
        header = _header(QueryDataVersionRequestHeader, request)
        try:
            data_version = decode_data_version(request.body)
        except RemoteProtocolError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        changed = self.route_table.is_data_version_changed(header.broker_addr, data_version)
        if not changed:
            # An unchanged broker that checks in counts as alive, as a re-registration would.
            self.route_table.touch(header.broker_addr, self._clock_ms())
        stored = self.route_table.data_version_of(header.broker_addr)
        return request.response(
            ResponseCode.SUCCESS,
            None,
            QueryDataVersionResponseHeader(changed=changed).to_ext(),
            encode_data_version(stored) if stored is not None else b"",
        )

    # -- routes and admin ----------------------------------------------------------------------

    async def get_route_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC (105): the topic's queues and brokers, or TOPIC_NOT_EXIST."""
        header = _header(GetRouteInfoRequestHeader, request)
        topic = header.topic
        order_conf = self.kv_config.get(ORDER_TOPIC_CONFIG, topic)
        # Clients ask for the same routes every 30 s and routes change rarely: encode each once.
        if self._route_bodies_version != self.route_table.version:
            self._route_bodies.clear()
            self._route_bodies_version = self.route_table.version
        cached = self._route_bodies.get(topic)
        if cached is not None and cached[0] == order_conf:
            return request.response(ResponseCode.SUCCESS, None, None, cached[1])
        route = self.route_table.topic_route(topic)
        if route is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"no route info in the name server for topic {topic!r}"
            )
        if order_conf is not None:
            route.order_topic_conf = order_conf
        # orjson hands back bytes inside a 4 KiB allocation: keep an exact-size copy, or 50,000
        # cached routes of ~900 bytes hold 200 MiB instead of 50 MiB.
        body = bytes(memoryview(encode_topic_route(route)))
        self._route_bodies[topic] = (order_conf, body)
        return request.response(ResponseCode.SUCCESS, None, None, body)

    async def get_cluster_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO (106)."""
        body = encode_cluster_info(self.route_table.cluster_info())
        return request.response(ResponseCode.SUCCESS, None, None, body)

    async def get_all_topics(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
        body = encode_topic_list(TopicList(topic_list=self.route_table.all_topics()))
        return request.response(ResponseCode.SUCCESS, None, None, body)

    async def delete_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (216): drop the topic's routes (optionally on one cluster)."""
        header = _header(DeleteTopicFromNamesrvRequestHeader, request)
        if self.route_table.delete_topic(header.topic, header.cluster_name or None):
            _log_limit.log(
                logging.INFO,
                "topic-deleted",
                "topic %s deleted (cluster %s)",
                header.topic,
                header.cluster_name or "all",
            )
        return request.response(ResponseCode.SUCCESS)

    async def get_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG (101): one configured value, or QUERY_NOT_FOUND."""
        header = _header(GetKVConfigRequestHeader, request)
        value = self.kv_config.get(header.namespace, header.key)
        if value is None:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return request.response(ResponseCode.SUCCESS, None, GetKVConfigResponseHeader(value).to_ext())

    async def put_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """PUT_KV_CONFIG (100)."""
        header = _header(PutKVConfigRequestHeader, request)
        if not header.namespace or not header.key:
            return request.response(ResponseCode.SYSTEM_ERROR, "namespace and key must not be empty")
        self.kv_config.put(header.namespace, header.key, header.value)
        self._on_kv_changed()
        logger.info("KV config %s/%s set", header.namespace, header.key)
        return request.response(ResponseCode.SUCCESS)

    async def delete_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """DELETE_KV_CONFIG (102); deleting a missing key succeeds, as in RocketMQ."""
        header = _header(DeleteKVConfigRequestHeader, request)
        if self.kv_config.delete(header.namespace, header.key):
            self._on_kv_changed()
            logger.info("KV config %s/%s deleted", header.namespace, header.key)
        return request.response(ResponseCode.SUCCESS)

    async def get_kv_list_by_namespace(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE (219): every key of a namespace, or QUERY_NOT_FOUND."""
        header = _header(GetKVListByNamespaceRequestHeader, request)
        items = self.kv_config.namespace(header.namespace)
        if not items:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return request.response(ResponseCode.SUCCESS, None, None, encode_kv_table(items))
