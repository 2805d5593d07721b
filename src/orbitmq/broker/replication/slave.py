"""The slave side of the HA link: connect to the master, report, append what it streams.

Theory of operation. One task keeps one connection to the master's HA port:

1. Connect to the master's HA address: ``haMasterAddress`` when configured (kept for the
   process's life), else the one the name servers return on registration (a change is used
   at the next connect; a live link is kept, as in RocketMQ).
2. Report the store's max offset at once: the master streams from there (an empty slave
   reports 0 and gets everything the master still holds).
3. For every frame (``codec.TransferDecoder``): its offset must be where the slave's log
   ends plus the bytes it holds back (below); otherwise the link is closed and re-opened,
   which re-requests from the store's end. The bodies of what arrived together are appended
   in one call through the store's raw-append path (inline when small, the live case; on a
   worker thread above 64 KiB, a catch-up), which checks every record, appends only whole ones and dispatches them to ConsumeQueue and index; the
   incomplete tail of the last record is held back in memory until the next frame completes
   it. So the store's end, and every report, is a record boundary; a crash loses only the
   held-back bytes, which the master sends again after the reconnect.
4. Report the new max offset after every append that grew it, and as a keep-alive after
   ``haSendHeartbeatInterval`` without one. Drop the link after ``haHousekeepingInterval``
   without a byte from the master, reconnect after ``haReconnectInterval``.

A keep-alive frame whose offset is above the slave's end means the master no longer holds
the bytes in between (this slave fell behind its oldest file): the slave says so in its log
and its status, and does not pretend to catch up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from enum import Enum
from typing import Any

from orbitmq.broker._tasks import cancel_and_wait
from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.replication.codec import (
    TransferDecoder,
    TransferFrame,
    encode_handshake,
    encode_offset_report,
)
from orbitmq.errors import RemoteProtocolError, RemotingError
from orbitmq.store.message_store import AppendStatus, MessageStore
from orbitmq.transport.stream import ByteStream, open_stream

logger = logging.getLogger(__name__)

_READ_BYTES_MAX = 1024 * 1024
_INLINE_APPEND_BYTES_MAX = 64 * 1024
# A record (or end-of-file blank) is at most a few MiB: more bytes without one are not records.
_HELD_BACK_BYTES_MAX = 64 * 1024 * 1024
_CONNECT_TIMEOUT_MS = 3_000
_COMPLAINT_INTERVAL_S = 60.0


class SlaveState(Enum):
    """Where the slave's HA link stands (shown by ``orbitmq admin cluster list``)."""

    NO_MASTER = "NO_MASTER"  # no master HA address known yet
    CONNECTING = "CONNECTING"  # between connection attempts
    STREAMING = "STREAMING"  # connected, appending what the master sends
    BEHIND_MASTER = "BEHIND_MASTER"  # the master no longer holds the bytes this slave needs


class _Closing(Exception):
    """Ends one session with a reason worth logging."""


class ReplicationSlave:
    """Copies the master's CommitLog into this broker's store (see the module docstring)."""

    def __init__(self, config: BrokerConfig, store: MessageStore, broker_id: int | None = None) -> None:
        self._config = config
        self._store = store
        self._broker_id = broker_id  # controller mode: named to the master in a handshake
        self._configured_address = config.ha_master_address
        self.master_ha_address: str | None = config.ha_master_address
        self._address_known = asyncio.Event()
        if self.master_ha_address:
            self._address_known.set()
        self.state = SlaveState.NO_MASTER
        self._task: asyncio.Task[None] | None = None
        self._local_address = ""
        self._last_read_ms = 0
        self._last_write_ms = 0
        self._master_start_offset = -1  # where a BEHIND master's log starts
        self._last_complaint_s = -_COMPLAINT_INTERVAL_S
        self.appended_bytes = 0
        self.sessions = 0  # connections made (tests and status)

    def set_master_address(self, ha_address: str | None) -> None:
        """The master's HA address as the name servers know it (ignored when configured)."""
        if self._configured_address or not ha_address or ha_address == self.master_ha_address:
            return
        logger.info("master HA address is now %s", ha_address)
        self.master_ha_address = ha_address
        self._address_known.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    # -- connection loop -------------------------------------------------------------------------

    async def _run(self) -> None:
        reconnect_s = self._config.ha_reconnect_interval_ms / 1000
        while True:
            await self._address_known.wait()
            address = self.master_ha_address
            if address is None:
                self._address_known.clear()
                continue
            self.state = SlaveState.CONNECTING
            try:
                stream = await open_stream(address, _CONNECT_TIMEOUT_MS)
            except RemotingError as exc:
                self._complain("cannot reach the master's HA port %s: %s", address, exc)
                await asyncio.sleep(reconnect_s)
                continue
            self.sessions += 1
            self._local_address = stream.local_address
            appended_before, opened_s = self.appended_bytes, time.monotonic()
            try:
                reason = await self._session(stream)
            except _Closing as exc:
                reason = str(exc)
            except RemotingError as exc:
                reason = str(exc)
            finally:
                stream.close()
                await stream.wait_closed()
                self._local_address = ""
                if self.state is not SlaveState.BEHIND_MASTER:
                    self.state = SlaveState.CONNECTING
            if self.appended_bytes > appended_before or time.monotonic() - opened_s > _COMPLAINT_INTERVAL_S:
                # A link that worked: its end is news. One that keeps failing is said once a minute.
                self._last_complaint_s = -_COMPLAINT_INTERVAL_S
            self._complain(
                "HA link to master %s closed: %s; reconnecting in %.1f s", address, reason, reconnect_s
            )
            await asyncio.sleep(reconnect_s)

    def _complain(self, text: str, *args: object) -> None:
        """Log a repeating problem at most once a minute."""
        now = time.monotonic()
        if now - self._last_complaint_s >= _COMPLAINT_INTERVAL_S:
            self._last_complaint_s = now
            logger.warning(text, *args)

    # -- one connection --------------------------------------------------------------------------

    async def _session(self, stream: ByteStream) -> str:
        """Stream from the master until the link must end; returns why it ended."""
        store = self._store
        if self._broker_id is not None:
            stream.write(encode_handshake(self._broker_id))
        self._report(stream, store.max_commit_log_offset)
        self.state = SlaveState.STREAMING
        logger.info(
            "HA link to master %s open (from %s); asked for offset %d",
            stream.peer_address,
            stream.local_address,
            store.max_commit_log_offset,
        )
        keepalive = asyncio.create_task(self._keepalive(stream), name="ha-slave-keepalive")
        try:
            return await self._receive(stream)
        finally:
            await cancel_and_wait([keepalive])

    async def _receive(self, stream: ByteStream) -> str:
        store = self._store
        decoder = TransferDecoder()
        held_back = bytearray()  # the incomplete record at the store's end
        held_offset = store.max_commit_log_offset  # the commit-log offset of held_back[0]
        # An empty slave takes the offset of the master's first data frame as its start.
        awaiting_start = held_offset == 0
        timeout_s = self._config.ha_housekeeping_interval_ms / 1000
        while True:
            try:
                data = await stream.read(_READ_BYTES_MAX, timeout_s)
            except TimeoutError:
                return f"nothing from the master for {self._config.ha_housekeeping_interval_ms} ms"
            if not data:
                return "the master closed the connection"
            self._last_read_ms = _wall_ms()
            try:
                frames = decoder.feed(data)
            except RemoteProtocolError as exc:
                return f"malformed transfer frame: {exc}"
            for frame in frames:
                if awaiting_start:
                    if frame.is_heartbeat:
                        continue  # a master with nothing to send yet
                    held_offset, awaiting_start = frame.commit_log_offset, False
                self._check_frame(frame, held_offset + len(held_back))
                held_back += frame.body
            if len(held_back) > _HELD_BACK_BYTES_MAX:
                raise _Closing(f"{len(held_back)} bytes from offset {held_offset} hold no whole record")
            if not held_back or not any(not frame.is_heartbeat for frame in frames):
                continue
            with memoryview(held_back) as view:
                if len(view) <= _INLINE_APPEND_BYTES_MAX:
                    # Small (a master under live load): a thread hop would cost more than the
                    # append, and delay the acknowledgement SYNC_MASTER sends wait for.
                    result = store.append_commit_log(held_offset, view)
                else:
                    result = await asyncio.to_thread(store.append_commit_log, held_offset, view)
            if result.status in (AppendStatus.NOT_AT_END, AppendStatus.DISK_FULL):
                raise _Closing(f"cannot append at offset {held_offset}: {result.remark}")
            if result.appended_bytes:
                del held_back[: result.appended_bytes]
                held_offset += result.appended_bytes
                self.appended_bytes += result.appended_bytes
                self._report(stream, store.max_commit_log_offset)
            if result.status is AppendStatus.CORRUPT:
                raise _Closing(f"the master sent bytes that are no record: {result.remark}")

    def _check_frame(self, frame: TransferFrame, expected: int) -> None:
        if frame.commit_log_offset == expected:
            self.state = SlaveState.STREAMING
            return
        if frame.is_heartbeat and frame.commit_log_offset > expected:
            if self.state is not SlaveState.BEHIND_MASTER:
                logger.error(
                    "the master's log starts at offset %d, past this slave's end %d: the bytes between "
                    "were deleted on the master and can never be copied. Stop this slave, empty its store "
                    "directory (%s) and start it again to copy the master's log from offset %d",
                    frame.commit_log_offset,
                    expected,
                    self._store.store_path,
                    frame.commit_log_offset,
                )
            self.state = SlaveState.BEHIND_MASTER
            self._master_start_offset = frame.commit_log_offset
            return
        raise _Closing(
            f"the master pushed offset {frame.commit_log_offset}, not the max offset {expected} of this slave"
        )

    def _report(self, stream: ByteStream, offset: int) -> None:
        stream.write(encode_offset_report(offset))
        self._last_write_ms = _wall_ms()

    async def _keepalive(self, stream: ByteStream) -> None:
        interval_ms = self._config.ha_send_heartbeat_interval_ms
        while True:
            idle_ms = _wall_ms() - self._last_write_ms
            if idle_ms >= interval_ms:
                self._report(stream, self._store.max_commit_log_offset)
                await stream.drain()
                idle_ms = 0
            await asyncio.sleep((interval_ms - idle_ms) / 1000)

    # -- status ----------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, Any]:
        """RocketMQ's HAClientRuntimeInfo, plus the local address of the link and its state."""
        return {
            "masterAddr": self.master_ha_address or "",
            "maxOffset": self._store.max_commit_log_offset,
            "lastReadTimestamp": self._last_read_ms,
            "lastWriteTimestamp": self._last_write_ms,
            "isActivated": bool(self._local_address),
            "localAddr": self._local_address,
            "state": self.state.value,
            "masterStartOffset": self._master_start_offset,
        }


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
