"""NameServer request handlers: decode the header and body, consult the route table, answer.

Handlers never touch a socket and hold no state of their own; the :class:`RouteTable` owns the
state and the clock is injected, so tests can drive expiry without waiting.
"""

from __future__ import annotations

import logging
import re
import time
import zlib
from collections.abc import Callable
from typing import Protocol, Self, TypeVar

from orbitmq.errors import BrokerResponseError, RemoteProtocolError
from orbitmq.model.route import DataVersion
from orbitmq.namesrv.route_table import RouteTable
from orbitmq.protocol.bodies import (
    TopicList,
    decode_data_version,
    decode_register_broker_body,
    encode_cluster_info,
    encode_data_version,
    encode_topic_list,
    encode_topic_route,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetRouteInfoRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from orbitmq.transport.server import Handler, RequestContext

__all__ = ["NamesrvHandlers", "monotonic_ms"]

logger = logging.getLogger(__name__)


class _RequestHeader(Protocol):
    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Self: ...


_H = TypeVar("_H", bound=_RequestHeader)

_TOPIC_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")


def monotonic_ms() -> int:
    """Milliseconds of a clock that never goes back (liveness, not wall time)."""
    return time.monotonic_ns() // 1_000_000


def _header(cls: type[_H], request: RemotingCommand) -> _H:
    try:
        return cls.from_ext(request.ext_fields)
    except RemoteProtocolError as exc:
        raise BrokerResponseError(ResponseCode.SYSTEM_ERROR, str(exc)) from None


def _check_topic(topic: str) -> None:
    if not _TOPIC_NAME.fullmatch(topic):
        raise BrokerResponseError(
            ResponseCode.SYSTEM_ERROR,
            f"topic name {topic!r} is illegal: it must be 1-127 characters from [%|a-zA-Z0-9_-]",
        )


class NamesrvHandlers:
    """The name server's request handlers over one route table."""

    def __init__(self, route_table: RouteTable, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.route_table = route_table
        self._clock_ms = clock_ms

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
        }

    # -- brokers -------------------------------------------------------------------------------

    async def register_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """REGISTER_BROKER (103): record the broker and, for a master, its topic table."""
        header = _header(RegisterBrokerRequestHeader, request)
        body = request.body
        if header.body_crc32 != 0 and header.body_crc32 != zlib.crc32(body) & 0x7FFFFFFF:
            logger.warning(
                "register from broker %s at %s: body crc32 %d does not match",
                header.broker_name,
                header.broker_addr,
                header.body_crc32,
            )
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        topic_table = None
        data_version = None
        if body:
            try:
                decoded = decode_register_broker_body(body, compressed=header.compressed)
            except RemoteProtocolError as exc:
                return request.response(
                    ResponseCode.SYSTEM_ERROR, f"bad register body from broker {header.broker_addr}: {exc}"
                )
            topic_table = decoded.topic_config_serialize_wrapper.topic_config_table
            data_version = decoded.topic_config_serialize_wrapper.data_version
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
        known_before = header.broker_addr in self.route_table.broker_live_table
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
        )
        if not known_before:
            logger.info(
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

    async def unregister_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_BROKER (104): forget one broker address."""
        header = _header(UnregisterBrokerRequestHeader, request)
        if self.route_table.unregister_broker(
            header.cluster_name, header.broker_name, header.broker_addr, header.broker_id
        ):
            logger.info("broker unregistered: name %s, address %s", header.broker_name, header.broker_addr)
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
        _check_topic(header.topic)
        route = self.route_table.topic_route(header.topic)
        if route is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"no route info in the name server for topic {header.topic!r}"
            )
        return request.response(ResponseCode.SUCCESS, None, None, encode_topic_route(route))

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
        _check_topic(header.topic)
        if self.route_table.delete_topic(header.topic, header.cluster_name or None):
            logger.info("topic %s deleted (cluster %s)", header.topic, header.cluster_name or "all")
        return request.response(ResponseCode.SUCCESS)

    async def get_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG (101): OrbitMQ keeps no KV configuration, so every key is not found."""
        header = _header(GetKVConfigRequestHeader, request)
        return request.response(
            ResponseCode.QUERY_NOT_FOUND,
            f"no config item in namespace {header.namespace!r} for key {header.key!r}",
        )
