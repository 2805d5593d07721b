"""Registration with the name servers: REGISTER_BROKER every period and after topic changes.

The service registers with every configured name server concurrently, at start, every
``registerNameServerPeriod`` (30 s) and promptly after :meth:`NamesrvRegistration.request`
(a topic was created or deleted). Several changes in a burst coalesce into one registration.
The body is the broker's topic table (TopicConfigSerializeWrapper) with ``bodyCrc32`` set to
``crc32(body) & 0x7FFFFFFF``. It travels compressed (RocketMQ's ``compressed`` layout: zlib over
the topics as ``name read write perm filterType`` text) when ``compressedRegister`` is on or when
its JSON would pass ``COMPRESS_ABOVE_BYTES``: 100,000 topics are 16 MiB of JSON, more than a
name server takes in one frame, but well under 1 MiB compressed (``maxTopicsPerBroker``, 150,000
by default, keeps even 127-character names under the frame limit). When the broker is not both readable and writable, every topic is
published with the broker's permission instead, as RocketMQ does. The body is built again only
when the table's DataVersion (or the permission, or the layout) changed: the registration every
30 s of a broker whose topics did not change sends the bytes it sent last time, and the name
server, which reads the version first, leaves its routes alone without decoding the topics. A name server that cannot be
reached is logged and retried at the next round. At shutdown the broker sends
UNREGISTER_BROKER to each.

Every registration carries the broker's HA address (``haServerAddr``). A name server answers a
slave with its master's remoting and HA addresses (none while no live master is known); the
first answer that names a master, or None when those that answered name none, goes to
``on_master``.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from dataclasses import replace

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.errors import OrbitError
from orbitmq.model.route import PERM_READ, PERM_WRITE, DataVersion
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    encode_register_broker_body,
    register_broker_json_body,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.frame import MAX_FRAME_BYTES
from orbitmq.protocol.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from orbitmq.transport.connection import RemotingClient

logger = logging.getLogger(__name__)

_CRC_MASK = 0x7FFFFFFF
_HEADER_ROOM_BYTES = 64 * 1024
_ENCODE_INLINE_TOPICS_MAX = 2_000
COMPRESS_ABOVE_BYTES = 4 * 1024 * 1024
"""A JSON registration body larger than this is sent compressed whatever compressedRegister says."""


class NamesrvRegistration:
    """Keeps every configured name server informed of this broker and its topics."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigTable,
        broker_addr: str,
        ha_server_addr: str = "",
        on_master: Callable[[str | None, str | None], None] | None = None,
        client: RemotingClient | None = None,
    ) -> None:
        self._config = config
        self._topics = topics
        self._broker_addr = broker_addr
        self._ha_server_addr = ha_server_addr
        self._on_master = on_master
        # The caller's client signs (ACL) and speaks TLS as the name servers require.
        self._client = client if client is not None else RemotingClient()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Controller mode: the epoch this broker leads (sent as masterEpoch; None otherwise).
        self.master_epoch: int | None = None
        # The last body: what it was built from (version, permission, compressedRegister),
        # the bytes and whether they are in the compressed layout.
        self._body: tuple[tuple[DataVersion, int, bool], bytes, bool] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    def request(self) -> None:
        """Register soon (the topic table changed); safe to call many times in a row."""
        self._wake.set()

    async def start(self) -> None:
        if not self._config.namesrv_addr:
            return
        await self.register_all()
        self._task = asyncio.create_task(self._run(), name="namesrv-registration")

    async def stop(self) -> None:
        """Stop the periodic registration, unregister from every name server, close connections."""
        await cancel_and_wait([self._task])
        self._task = None
        if self._config.namesrv_addr:
            await self.unregister_all()
        await self._client.close()

    async def register_all(self) -> list[bool]:
        """Register with every name server at once; True per name server that accepted."""
        # Encoding 100,000 topics takes a fraction of a second: off the event loop then. A small
        # table is encoded at once (a thread hop can wait behind the table writers' fsyncs), and
        # an unchanged one not at all.
        cached = self._cached_body()
        if cached is not None:
            body, compressed = cached
        elif len(self._topics) > _ENCODE_INLINE_TOPICS_MAX:
            body, compressed = await asyncio.to_thread(self._register_body)
        else:
            body, compressed = self._register_body()
        if len(body) > MAX_FRAME_BYTES - _HEADER_ROOM_BYTES:
            logger.error(
                "the registration body is %d bytes, more than a name server accepts in one frame; "
                "lower maxTopicsPerBroker (%d topics now)",
                len(body),
                len(self._topics.names()),
            )
            return [False] * len(self._config.namesrv_addr)
        header = RegisterBrokerRequestHeader(
            broker_name=self._config.broker_name,
            broker_addr=self._broker_addr,
            cluster_name=self._config.broker_cluster_name,
            broker_id=self._config.broker_id,
            ha_server_addr=self._ha_server_addr,
            compressed=compressed,
            body_crc32=zlib.crc32(body) & _CRC_MASK,
        ).to_ext()
        if self.master_epoch is not None:
            header["masterEpoch"] = str(self.master_epoch)
        calls = [
            self._invoke(addr, RequestCode.REGISTER_BROKER, header, body)
            for addr in self._config.namesrv_addr
        ]
        answers = await asyncio.gather(*calls)
        if self._on_master is not None and any(answer is not None for answer in answers):
            masters = [answer for answer in answers if answer is not None and answer.master_addr]
            first = masters[0] if masters else None
            self._on_master(
                first.ha_server_addr if first is not None else None,
                first.master_addr if first is not None else None,
            )
        return [answer is not None for answer in answers]

    async def unregister_all(self) -> list[bool]:
        header = UnregisterBrokerRequestHeader(
            broker_name=self._config.broker_name,
            broker_addr=self._broker_addr,
            cluster_name=self._config.broker_cluster_name,
            broker_id=self._config.broker_id,
        ).to_ext()
        calls = [
            self._invoke(addr, RequestCode.UNREGISTER_BROKER, header, b"")
            for addr in self._config.namesrv_addr
        ]
        return [answer is not None for answer in await asyncio.gather(*calls)]

    def set_config(self, config: BrokerConfig) -> None:
        """Use ``config`` from the next registration on (its permission, or in controller mode its
        role and id, changed)."""
        self._config = config

    def _body_key(self) -> tuple[DataVersion, int, bool]:
        config = self._config
        return self._topics.data_version, config.broker_permission, config.compressed_register

    def _cached_body(self) -> tuple[bytes, bool] | None:
        """The last body, when the table, the permission and the layout are as they were then."""
        cached = self._body
        if cached is None or cached[0] != self._body_key():
            return None
        return cached[1], cached[2]

    def _register_body(self) -> tuple[bytes, bool]:
        """The REGISTER_BROKER body and whether it is in the compressed layout."""
        cached = self._cached_body()
        if cached is not None:
            return cached
        # The key is read before the table: a change made meanwhile leaves a body newer than
        # its key, which the next registration builds again.
        key = self._body_key()
        body, compressed = self._build_body()
        self._body = (key, body, compressed)
        return body, compressed

    def _build_body(self) -> tuple[bytes, bool]:
        permission = self._config.broker_permission
        if permission & PERM_READ and permission & PERM_WRITE:
            if not self._config.compressed_register:
                # The table's own document (it re-encodes only the topics changed since it was built).
                plain = register_broker_json_body(self._topics.document(), [])
                if len(plain) <= COMPRESS_ABOVE_BYTES:
                    return plain, False
            wrapper = self._topics.snapshot()
        else:
            snapshot = self._topics.snapshot()
            wrapper = TopicConfigSerializeWrapper(
                {
                    name: replace(config, perm=permission)
                    for name, config in snapshot.topic_config_table.items()
                },
                snapshot.data_version,
            )
            if not self._config.compressed_register:
                plain = encode_register_broker_body(RegisterBrokerBody(wrapper))
                if len(plain) <= COMPRESS_ABOVE_BYTES:
                    return plain, False
        return encode_register_broker_body(RegisterBrokerBody(wrapper), compressed=True), True

    async def _invoke(
        self, addr: str, code: RequestCode, ext: dict[str, str], body: bytes
    ) -> RegisterBrokerResponseHeader | None:
        """The answer's header (empty fields for UNREGISTER_BROKER), None when the call failed."""
        request = RemotingCommand.request(code, ext, body)
        try:
            response = await self._client.invoke(addr, request, self._config.register_broker_timeout_ms)
        except OrbitError as exc:
            logger.warning("%s to name server %s failed: %s", code.name, addr, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            logger.warning(
                "%s to name server %s answered %d: %s", code.name, addr, response.code, response.remark
            )
            return None
        try:
            return RegisterBrokerResponseHeader.from_ext(response.ext_fields)
        except OrbitError:
            return RegisterBrokerResponseHeader()

    async def _run(self) -> None:
        period_s = self._config.register_name_server_period_ms / 1000
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=period_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.register_all()
            except Exception:
                logger.exception("registration with the name servers failed")
