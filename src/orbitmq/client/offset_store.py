"""Where a consumer group keeps its consumed queue offsets (RocketMQ OffsetStore).

- :class:`RemoteOffsetStore` (clustering): the broker that hosts a queue keeps the group's
  offset for it (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET), so any member that takes the
  queue over after a rebalance continues where the last one stopped.
- :class:`LocalFileOffsetStore` (broadcasting): every member consumes every queue, so each
  keeps its own offsets in ``<directory>/<client_id>/<group>/offsets.json``, rewritten
  atomically (temporary file, fsync, rename) so a crash leaves the old or the new file.

A commit that cannot reach the queue's master (a failover) asks the client for the topic's
route at once (``refresh_route_soon``), so the next persist round finds the new master.

Both hold the working values in an :class:`OffsetTable` (pure state) that consumers update
as messages finish; ``persist`` writes the table out (every 5 s and at shutdown).

The JSON file::

    {"offsetTable": {"<topic>@<broker_name>@<queue_id>": <queue_offset>, ...}}
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from orbitmq.errors import ClientError, OrbitError, RemoteProtocolError, error_for_code
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)

logger = logging.getLogger(__name__)


class OffsetTable:
    """Queue -> next queue offset to consume, as this client knows it (pure state)."""

    __slots__ = ("_offsets",)

    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}

    def get(self, mq: MessageQueue) -> int | None:
        return self._offsets.get(mq)

    def update(self, mq: MessageQueue, queue_offset: int, *, increase_only: bool = False) -> None:
        """Record ``queue_offset``; with ``increase_only`` a lower value than the current is ignored."""
        if queue_offset < 0:
            return
        current = self._offsets.get(mq)
        if increase_only and current is not None and current >= queue_offset:
            return
        self._offsets[mq] = queue_offset

    def remove(self, mq: MessageQueue) -> None:
        self._offsets.pop(mq, None)

    def snapshot(self, queues: Iterable[MessageQueue] | None = None) -> dict[MessageQueue, int]:
        """A copy of the table, limited to ``queues`` when given."""
        if queues is None:
            return dict(self._offsets)
        return {mq: self._offsets[mq] for mq in queues if mq in self._offsets}


class OffsetStore(Protocol):
    """What consumers need from an offset store."""

    table: OffsetTable

    async def load(self, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int | None:
        """The stored offset of ``mq`` (None when the group never committed one)."""
        ...

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        """Write the table's offsets of ``queues`` out."""
        ...


class BrokerInvoker(Protocol):
    """The part of ClientInstance a remote store uses."""

    async def invoke_broker(
        self, broker_name: str, request: RemotingCommand, timeout_ms: int | None = None, broker_id: int = 0
    ) -> RemotingCommand: ...

    def find_broker_addr(
        self, broker_name: str, broker_id: int = 0, *, only_this: bool = False
    ) -> str | None: ...

    def refresh_route_soon(self, topic: str) -> None: ...


class RemoteOffsetStore:
    """Offsets of a clustering group, kept by the brokers.

    Args:
        instance: the ClientInstance (only ``invoke_broker`` is used).
        group: the consumer group.
    """

    def __init__(self, instance: BrokerInvoker, group: str) -> None:
        self._instance = instance
        self.group = group
        self.table = OffsetTable()

    async def load(self, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int | None:
        """QUERY_CONSUMER_OFFSET; None when the broker answers QUERY_NOT_FOUND.

        ``zero_if_not_found=False`` asks the broker not to answer 0 for a group that never
        committed, so a consumer starting from a timestamp really starts there.

        Raises:
            BrokerResponseError: any other non-success answer (names the queue).
            RemotingError: the broker cannot be reached.
        """
        header = QueryConsumerOffsetRequestHeader(
            self.group, mq.topic, mq.queue_id, set_zero_if_not_found=zero_if_not_found
        )
        request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        response = await self._instance.invoke_broker(mq.broker_name, request)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(
                response.code, f"query offset of group {self.group} on {mq}: {response.remark or ''}"
            )
        try:
            queue_offset = QueryConsumerOffsetResponseHeader.from_ext(response.ext_fields).queue_offset
        except RemoteProtocolError as exc:
            raise ClientError(f"bad QUERY_CONSUMER_OFFSET answer for {mq}: {exc}") from exc
        return queue_offset if queue_offset >= 0 else None

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        """UPDATE_CONSUMER_OFFSET (oneway-like, failures logged) for every queue with an offset."""
        offsets = self.table.snapshot(queues)
        if offsets:
            await asyncio.gather(*(self.commit(mq, value) for mq, value in offsets.items()))

    async def commit(self, mq: MessageQueue, queue_offset: int) -> bool:
        """Store one offset on the queue's broker; False (logged) when that fails."""
        header = UpdateConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, queue_offset)
        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
        if self._instance.find_broker_addr(mq.broker_name, only_this=True) is None:
            # No master in the route (a failover under way): the commit reaches a slave only.
            self._instance.refresh_route_soon(mq.topic)
        try:
            response = await self._instance.invoke_broker(mq.broker_name, request)
        except Exception as exc:  # a failed commit is retried by the next persist round
            if isinstance(exc, OrbitError) and exc.refresh_route:
                self._instance.refresh_route_soon(mq.topic)
            logger.warning(
                "commit of offset %d for group %s on %s failed: %s", queue_offset, self.group, mq, exc
            )
            return False
        if response.code != ResponseCode.SUCCESS:
            if error_for_code(response.code).refresh_route:
                self._instance.refresh_route_soon(mq.topic)
            logger.warning(
                "commit of offset %d for group %s on %s refused: %d %s",
                queue_offset,
                self.group,
                mq,
                response.code,
                response.remark,
            )
            return False
        return True


def _queue_key(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"


def _parse_queue_key(key: str) -> MessageQueue | None:
    topic, sep1, rest = key.partition("@")
    broker_name, sep2, queue_text = rest.rpartition("@")
    if not (sep1 and sep2 and queue_text.isdigit()):
        return None
    return MessageQueue(topic, broker_name, int(queue_text))


class LocalFileOffsetStore:
    """Offsets of a broadcasting consumer, kept in a JSON file of its own.

    Args:
        directory: root directory (RocketMQ uses ``~/.rocketmq_offsets``).
        client_id: this client's id; separates members sharing a machine.
        group: the consumer group.
    """

    def __init__(self, directory: str | os.PathLike[str], client_id: str, group: str) -> None:
        safe_client_id = client_id.replace("/", "_").replace(":", "_")
        self.path = Path(directory) / safe_client_id / group / "offsets.json"
        self.group = group
        self.table = OffsetTable()
        self._stored: dict[MessageQueue, int] = {}
        self._read_file()

    def _read_file(self) -> None:
        for candidate in (self.path, self.path.with_suffix(".json.bak")):
            try:
                raw = json.loads(candidate.read_text("utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                logger.warning("ignoring unreadable offset file %s: %s", candidate, exc)
                continue
            table = raw.get("offsetTable") if isinstance(raw, dict) else None
            if not isinstance(table, dict):
                logger.warning("ignoring offset file %s without an offsetTable object", candidate)
                continue
            for key, value in table.items():
                mq = _parse_queue_key(str(key))
                if mq is not None and isinstance(value, int) and value >= 0:
                    self._stored[mq] = value
            return

    async def load(self, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int | None:
        """The offset read from the file at construction (None when the file has none)."""
        return self._stored.get(mq)

    async def persist(self, queues: Iterable[MessageQueue]) -> None:
        """Merge the table's offsets of ``queues`` into the file (atomic rewrite)."""
        offsets = self.table.snapshot(queues)
        if not offsets:
            return
        self._stored.update(offsets)
        document = {"offsetTable": {_queue_key(mq): value for mq, value in sorted(self._stored.items())}}
        await asyncio.to_thread(self._write_file, json.dumps(document, indent=1).encode("utf-8"))

    def _write_file(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".json.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if self.path.exists():
            # The previous version stays readable as .bak should the new one ever be damaged.
            os.replace(self.path, self.path.with_suffix(".json.bak"))
        os.replace(temporary, self.path)
