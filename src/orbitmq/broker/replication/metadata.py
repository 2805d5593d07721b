"""SlaveSynchronize (ha-replication §3): a slave copies its master's tables over remoting requests.

The CommitLog arrives over the HA link; everything a consumer or a future promotion needs
besides it comes from the master's remoting port, every ``slaveSyncInterval`` (10 s) and
soon after a change is noticed: the master's address changed (registration), or a replicated
record names a topic this slave does not know.

===========================  ====  ==============================================================
request                      code  the slave
===========================  ====  ==============================================================
GET_ALL_TOPIC_CONFIG           21  replaces its topic table when the DataVersion differs
GET_ALL_CONSUMER_OFFSET        43  takes every offset the master has (RocketMQ's putAll): the
                                   master's values win; offsets only the slave has stay;
                                   first, MERGE_CONSUMER_OFFSET (40003) hands the master the
                                   offsets consumers committed here that are ahead of it
GET_ALL_DELAY_OFFSET           45  replaces its delay-level progress (delayOffset.json)
GET_ALL_SUBSCRIPTIONGROUP_...  201  replaces its group table when the DataVersion differs
GET_TIMER_CHECK_POINT          60  keeps the master's timer progress in config/timerProgress.json
===========================  ====  ==============================================================

Transaction check progress travels as RocketMQ keeps it, inside the consumer offsets: the
half topic's offset of the group ``CID_RMQ_SYS_TRANS``; the slave stores it in its own
``transactionCheckOffset.json`` rather than its offset table. The timer body is Java's binary
TimerCheckpoint (``orbitmq.protocol.timer_checkpoint``), from an OrbitMQ master as from a Java
one; the JSON an earlier OrbitMQ master answered (``{"dequeueMs": ..., ...}``) is read too.

Offsets committed on a slave. While the master is away consumers read from the slave and
commit their offsets to it. RocketMQ's copy would then overwrite them with the returned
master's older (or absent) ones, and the group would read everything again. So the slave
remembers the commits consumers made to it (in memory, :meth:`ConsumerOffsetTable.track_local_commits`),
and each copy first sends the master those that are ahead of the master's values
(MERGE_CONSUMER_OFFSET: the master keeps the larger of the two, and a pending admin reset).
The copy then keeps them too, so the slave never moves back. A commit the master has reached
or passed is forgotten, so later admin resets on the master come through as before. A master
that does not know the request (a RocketMQ broker) gets RocketMQ's behaviour, said once.

Java masters write integer map keys unquoted (``{0:12}``); :func:`lenient_json` accepts that.
Each table is copied on its own: one failing request is logged and the others still run.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.offsets import ConsumerOffsetTable
from orbitmq.broker.schedule import DelayOffsetTable
from orbitmq.broker.subscriptions import SubscriptionGroupTable
from orbitmq.broker.validation import TRANS_HALF_TOPIC
from orbitmq.errors import ConfigError, OrbitError, RemoteProtocolError, RemotingError
from orbitmq.protocol.bodies import decode_topic_config_wrapper
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.timer_checkpoint import decode_timer_checkpoint
from orbitmq.transport.connection import RemotingClient

if TYPE_CHECKING:
    from orbitmq.broker.handlers import BrokerState

logger = logging.getLogger(__name__)

TRANSACTION_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
"""The group under which RocketMQ keeps the transaction check offset of the half topic."""
TIMER_PROGRESS_FILE = "timerProgress.json"
_REQUEST_TIMEOUT_MS = 3_000
_UNREACHABLE_LOG_INTERVAL_S = 60.0
_BARE_INT_KEY = re.compile(rb"([{,]\s*)(-?\d+)(\s*:)")


def lenient_json(data: bytes) -> Any:
    """JSON, also with the unquoted integer keys fastjson writes.

    Raises:
        RemoteProtocolError: the bytes are not JSON even so.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return orjson.loads(_BARE_INT_KEY.sub(rb'\1"\2"\3', data))
    except orjson.JSONDecodeError as exc:
        raise RemoteProtocolError(f"not JSON: {exc}") from exc


class MetadataSync:
    """A slave's periodic copy of its master's tables (see the module docstring)."""

    def __init__(
        self,
        state: BrokerState,
        config_dir: Path,
        write_file: Callable[[Path, bytes], None],
        client: RemotingClient | None = None,
    ) -> None:
        self._state = state
        state.offsets.track_local_commits()
        self._merge_unsupported_logged = False
        self._config_dir = config_dir
        self._write_file = write_file
        self._client = client if client is not None else RemotingClient()
        self.master_addr: str | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.rounds = 0  # completed rounds (status and tests)
        self.last_sync_ms = 0
        self._last_unreachable_log_s = -_UNREACHABLE_LOG_INTERVAL_S

    def set_master_addr(self, master_addr: str | None) -> None:
        """The master's remoting address from registration; None pauses the copy (no live master)."""
        if master_addr != self.master_addr:
            if master_addr:
                logger.info("copying metadata from master %s", master_addr)
            else:
                logger.info("no live master: the metadata copy pauses")
            self.master_addr = master_addr
            if master_addr:
                self._last_unreachable_log_s = -_UNREACHABLE_LOG_INTERVAL_S
                self.request()

    def request(self) -> None:
        """Copy soon (something changed); safe from any thread."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:
            pass  # the loop is closed: shutting down

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """Store arrival listener: a replicated record of a topic unknown here asks for a copy."""
        if topic not in self._state.topics:
            self.request()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="slave-synchronize")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None
        await self._client.close()

    async def _run(self) -> None:
        interval_s = self._state.config.slave_sync_interval_ms / 1000
        while True:
            try:
                async with asyncio.timeout(interval_s):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            if self.master_addr:
                try:
                    await self.sync_all(self.master_addr)
                except Exception:
                    logger.exception("metadata copy from master %s failed", self.master_addr)

    async def sync_all(self, master_addr: str) -> None:
        """One round: every table, each on its own (failures are logged)."""
        steps = (
            ("topics", self._sync_topics),
            ("consumer offsets", self._sync_offsets),
            ("delay offsets", self._sync_delay_offsets),
            ("subscription groups", self._sync_groups),
            ("timer progress", self._sync_timer),
        )
        for what, step in steps:
            try:
                await step(master_addr)
            except RemotingError as exc:
                # Unreachable: the rest would fail alike; said once a minute, not every round.
                now = time.monotonic()
                if now - self._last_unreachable_log_s >= _UNREACHABLE_LOG_INTERVAL_S:
                    self._last_unreachable_log_s = now
                    logger.warning("cannot copy metadata from master %s: %s", master_addr, exc)
                return
            except (OrbitError, ConfigError, ValueError, TypeError, KeyError) as exc:
                logger.warning("copying %s from master %s failed: %s", what, master_addr, exc)
        self.rounds += 1
        self.last_sync_ms = _loop_ms()

    async def _fetch(self, master_addr: str, code: RequestCode) -> bytes:
        response = await self._client.invoke(
            master_addr, RemotingCommand.request(code, {}), _REQUEST_TIMEOUT_MS
        )
        if response.code != ResponseCode.SUCCESS:
            raise RemoteProtocolError(f"{code.name} answered {response.code}: {response.remark}")
        return response.body

    async def _sync_topics(self, master_addr: str) -> None:
        wrapper = decode_topic_config_wrapper(
            await self._fetch(master_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        )
        if self._state.topics.adopt(wrapper):
            logger.info(
                "topic table copied from master %s (%d topics)", master_addr, len(wrapper.topic_config_table)
            )
            self._state.on_topics_changed()

    async def _sync_offsets(self, master_addr: str) -> None:
        data = await self._fetch(master_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        document = lenient_json(data)
        table = document.get("offsetTable") if isinstance(document, dict) else None
        if not isinstance(table, dict):
            raise RemoteProtocolError("consumer offsets without an offsetTable object")
        check_key = f"{TRANS_HALF_TOPIC}@{TRANSACTION_CHECK_GROUP}"
        check_offsets = table.pop(check_key, None)
        offsets = ConsumerOffsetTable.decode(
            orjson.dumps({"offsetTable": table}), f"offsets of {master_addr}"
        )
        ahead = self._state.offsets.local_commits_ahead_of(offsets)
        if ahead and await self._merge_into_master(master_addr, ahead):
            # What the master has now (or will have, once a refused merge is sent again).
            for (topic, group), queues in ahead.items():
                for queue_id, queue_offset in queues.items():
                    offsets.commit(group, topic, queue_id, queue_offset)
        self._state.offsets.merge(offsets)
        transactions = self._state.transactions
        if isinstance(check_offsets, dict) and transactions is not None:
            half_queue_offset = int(check_offsets.get("0", -1))
            if half_queue_offset >= 0 and half_queue_offset != transactions.check_offset:
                await transactions.follow_check_offset(half_queue_offset)

    async def _merge_into_master(
        self, master_addr: str, ahead: dict[tuple[str, str], dict[int, int]]
    ) -> bool:
        """Send the master the local commits ahead of its offsets; False when it never can.

        True: the master took them, or refused this time (logged; they are sent again next
        round and the slave keeps them meanwhile). False: the master does not know the
        request, and its offsets win.
        """
        body = ConsumerOffsetTable().snapshot(ahead)
        request = RemotingCommand.request(RequestCode.MERGE_CONSUMER_OFFSET, {}, body)
        response = await self._client.invoke(master_addr, request, _REQUEST_TIMEOUT_MS)
        count = sum(len(queues) for queues in ahead.values())
        if response.code == ResponseCode.SUCCESS:
            self._state.offsets.forget_local_commits(ahead)
            logger.info("%d consumer offsets committed here merged into master %s", count, master_addr)
            return True
        if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            # A RocketMQ master: its offsets win, as in RocketMQ.
            self._state.offsets.forget_local_commits(ahead)
            if not self._merge_unsupported_logged:
                self._merge_unsupported_logged = True
                logger.warning(
                    "master %s cannot merge consumer offsets; %d committed here are replaced by its own",
                    master_addr,
                    count,
                )
            return False
        logger.warning(
            "master %s refused %d consumer offsets committed here (%d %s); sent again next round",
            master_addr,
            count,
            response.code,
            response.remark,
        )
        return True

    async def _sync_delay_offsets(self, master_addr: str) -> None:
        schedule = self._state.schedule
        if schedule is None:
            return
        data = await self._fetch(master_addr, RequestCode.GET_ALL_DELAY_OFFSET)
        offsets = DelayOffsetTable.decode(orjson.dumps(lenient_json(data)), f"delay offsets of {master_addr}")
        if offsets.encode() != schedule.offsets.encode():
            schedule.offsets = offsets
            await schedule.persist(force=True)

    async def _sync_groups(self, master_addr: str) -> None:
        data = await self._fetch(master_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        groups = SubscriptionGroupTable.decode(orjson.dumps(lenient_json(data)), f"groups of {master_addr}")
        self._state.groups.adopt(groups)

    async def _sync_timer(self, master_addr: str) -> None:
        if not self._state.config.timer_wheel_enable:
            return
        data = await self._fetch(master_addr, RequestCode.GET_TIMER_CHECK_POINT)
        if data[:1] == b"{":  # an OrbitMQ master of an earlier version answers JSON
            document = lenient_json(data)
            progress = {
                "dequeueMs": int(document["dequeueMs"]),
                "enqueueQueueOffset": int(document["enqueueQueueOffset"]),
            }
        else:
            checkpoint = decode_timer_checkpoint(data)
            progress = {
                "dequeueMs": checkpoint.last_read_time_ms,
                "enqueueQueueOffset": checkpoint.master_timer_queue_offset,
            }
        path = self._config_dir / TIMER_PROGRESS_FILE
        data = orjson.dumps(progress)
        try:
            if path.read_bytes() == data:
                return
        except FileNotFoundError:
            pass
        await asyncio.to_thread(self._write_file, path, data)


def _loop_ms() -> int:
    return int(asyncio.get_running_loop().time() * 1000)
