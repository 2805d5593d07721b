"""The master side of the HA link: the HA port, one streaming loop per slave, SYNC_MASTER waits.

Every broker listens on its HA port (a slave too: a slave of a slave streams from it). Per
accepted connection two tasks run over one :class:`~orbitmq.broker.replication.acks.SlaveLink`:

- the *reader* decodes the slave's offset reports (``codec.OffsetReportDecoder``) and applies
  them (``SlaveLinks.on_report``): the first starts streaming, later ones acknowledge; a
  slave that asks for bytes beyond this master's end, acknowledges bytes it was never sent,
  sends a malformed report or stays silent for ``haHousekeepingInterval`` is dropped;
- the *writer* streams raw CommitLog bytes from the link's ``sent_offset`` in frames of at
  most ``haTransferBatchSize`` (never crossing a segment end: ``read_commit_log`` stops there),
  woken by every put (the store's arrival listener), and sends a keep-alive frame after
  ``haSendHeartbeatInterval`` of silence. A slave behind this master's oldest offset gets
  keep-alives naming that oldest offset, so it can tell the operator why it cannot catch up.

SYNC_MASTER: :meth:`ReplicationMaster.wait_replicated` answers PUT_OK once a slave acknowledged
the send's end offset, SLAVE_NOT_AVAILABLE at once when no usable slave is close enough
(``haSlaveFallbehindMax``), FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``. Waits are grouped
(``acks.TransferWaiters``): one future and one acknowledgement serve every send of a group, and
one timer, set for the earliest deadline, expires them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.replication.acks import LinkState, ReportOutcome, SlaveLink, SlaveLinks, TransferWaiters
from orbitmq.broker.replication.codec import (
    HANDSHAKE_BYTES,
    OffsetReportDecoder,
    decode_handshake,
    encode_transfer_header,
)
from orbitmq.errors import RemoteProtocolError, RemotingError
from orbitmq.store.message_store import MessageStore, PutStatus
from orbitmq.transport.stream import ByteStream, StreamServer

logger = logging.getLogger(__name__)

_READ_BYTES_MAX = 64 * 1024
_REFUSED = "refused: "  # prefix of a drop reason that is the peer's fault


class ReplicationMaster:
    """The HA port of one broker and the slaves streaming from it."""

    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self._config = config
        self._store = store
        self.links = SlaveLinks()
        self._waiters = TransferWaiters()
        self._server = StreamServer(config.bind_address, config.ha_port, self._serve)
        self._wakes: dict[int, asyncio.Event] = {}
        self._streams: dict[int, ByteStream] = {}
        # Called after every believed acknowledgement (controller mode: the confirm offset moves).
        self.on_ack: list[Callable[[], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._transferred = _RateCounter()
        self.bogus_acks = 0  # acknowledgements refused (above what was sent or above the max)
        self._refusals = _QuietLog(10.0, logging.WARNING)
        self._behind = _QuietLog(60.0, logging.ERROR)  # such a slave reconnects every few seconds
        self._timeouts = _QuietLog(10.0, logging.WARNING)

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def bound_addresses(self) -> list[str]:
        """The HA port's sockets as really bound (the broker's ``bindAddress``)."""
        return self._server.bound_addresses

    async def start(self) -> None:
        """Bind the HA port.

        Raises:
            OSError: a configured ``haListenPort`` cannot be bound. Without one, a busy
                listenPort + 1 is replaced by any free port (logged; the nameservers publish
                the real address), so a broker that has no slave is not stopped by it.
        """
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        try:
            await self._server.start()
        except OSError as exc:
            config = self._config
            if config.ha_listen_port is not None or config.ha_port == 0:
                raise
            logger.warning(
                "HA port %d (listenPort + 1) cannot be bound (%s); using a free port instead. "
                "Set haListenPort to choose it; slaves that pin haMasterAddress to %d will not reach this broker",
                config.ha_port,
                exc,
                config.ha_port,
            )
            self._server = StreamServer(config.bind_address, 0, self._serve)
            await self._server.start()

    async def stop(self) -> None:
        """Close the HA port and every slave link; sends still waiting get FLUSH_SLAVE_TIMEOUT."""
        await self._server.stop()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for group in self._waiters.drain():
            _resolve(group.token, PutStatus.FLUSH_SLAVE_TIMEOUT)

    def on_arrival(self, topic: str, queue_id: int, max_queue_offset: int) -> None:
        """Store arrival listener: new bytes in the log wake every slave's writer."""
        if not self._wakes or self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            for wake in self._wakes.values():
                wake.set()
        else:
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for wake in self._wakes.values():
            wake.set()

    # -- SYNC_MASTER -----------------------------------------------------------------------------

    async def wait_replicated(self, end_offset: int) -> PutStatus:
        """Wait until a slave holds every byte below ``end_offset`` (see the module docstring)."""
        links = self.links
        if links.acked_offset() >= end_offset:
            return PutStatus.PUT_OK
        if not links.is_slave_ok(end_offset, self._config.ha_slave_fallbehind_max_bytes):
            return PutStatus.SLAVE_NOT_AVAILABLE
        loop = asyncio.get_running_loop()
        group, created = self._waiters.add(
            end_offset, _loop_ms(loop), self._config.slave_timeout_ms, links.sent_offset()
        )
        if created:
            group.token = loop.create_future()
            if self._timer is None:
                self._arm_timer()
        future: asyncio.Future[PutStatus] = group.token  # type: ignore[assignment]
        # Shielded: one send cancelled (its client went away) must not cancel its group's answer.
        return await asyncio.shield(future)

    def release(self) -> None:
        """Answer every send whose bytes are acknowledged now (also after the SyncStateSet changed)."""
        for group in self._waiters.release(self.links.acked_offset()):
            _resolve(group.token, PutStatus.PUT_OK)
        for callback in self.on_ack:
            callback()

    def close_links(self) -> None:
        """Close every slave connection (this broker stops being master: its slaves move on)."""
        for stream in list(self._streams.values()):
            stream.close()

    def _arm_timer(self) -> None:
        deadline_ms = self._waiters.next_deadline_ms()
        if deadline_ms is None or self._loop is None:
            self._timer = None
            return
        self._timer = self._loop.call_at(deadline_ms / 1000, self._expire)

    def _expire(self) -> None:
        if self._loop is None:
            return
        # Timers may fire a clock tick early: count the current millisecond as passed.
        expired = self._waiters.expire(_loop_ms(self._loop) + 1)
        for group in expired:
            _resolve(group.token, PutStatus.FLUSH_SLAVE_TIMEOUT)
        if expired:
            self._timeouts.note(
                f"{sum(group.waiting for group in expired)} sends were answered FLUSH_SLAVE_TIMEOUT: no slave "
                f"acknowledged them within {self._config.slave_timeout_ms} ms "
                f"(acknowledged offset {self.links.acked_offset()})"
            )
        self._arm_timer()

    # -- one slave -------------------------------------------------------------------------------

    async def _serve(self, stream: ByteStream) -> None:
        loop = asyncio.get_running_loop()
        link = self.links.add(stream.peer_address, _wall_ms())
        wake = asyncio.Event()
        self._wakes[link.link_id] = wake
        self._streams[link.link_id] = stream
        logger.debug("connection to the HA port from %s", stream.peer_address)
        writer = loop.create_task(self._write_loop(stream, link, wake), name=f"ha-writer-{link.link_id}")
        try:
            reason = await self._read_loop(stream, link, wake, writer)
        finally:
            writer.cancel()
            try:
                await writer
            except asyncio.CancelledError:
                pass
            except RemotingError as exc:
                reason = f"sending failed: {exc}"
            except Exception:
                logger.exception("HA writer to %s failed", stream.peer_address)
            self.links.remove(link)
            self._wakes.pop(link.link_id, None)
            self._streams.pop(link.link_id, None)
        if link.request_offset >= 0 and not reason.startswith(_REFUSED):
            logger.info("slave %s disconnected from the HA port: %s", stream.peer_address, reason)
        else:
            # Never a usable slave (garbage, a scan, a diverged log, fake acks): said, not once per connection.
            self._refusals.note(
                f"HA connection from {stream.peer_address} dropped: {reason.removeprefix(_REFUSED)}"
            )

    async def _read_loop(
        self, stream: ByteStream, link: SlaveLink, wake: asyncio.Event, writer: asyncio.Task[None]
    ) -> str:
        """Apply the slave's reports until the link must end; returns why it ended."""
        decoder = OffsetReportDecoder()
        timeout_s = self._config.ha_housekeeping_interval_ms / 1000
        handshake = bytearray() if self._config.enable_controller_mode else None
        while True:
            if writer.done():
                return "the writer stopped"
            try:
                data = await stream.read(_READ_BYTES_MAX, timeout_s)
            except TimeoutError:
                return f"no offset report for {self._config.ha_housekeeping_interval_ms} ms"
            except RemotingError as exc:
                return str(exc)
            if not data:
                return "connection closed by the slave"
            if handshake is not None:
                # Controller mode: the slave names its broker id first.
                handshake += data
                if len(handshake) < HANDSHAKE_BYTES:
                    continue
                try:
                    link.broker_id = decode_handshake(handshake[:HANDSHAKE_BYTES])
                except RemoteProtocolError as exc:
                    return _REFUSED + str(exc)
                data = bytes(handshake[HANDSHAKE_BYTES:])
                handshake = None
            try:
                reports = decoder.feed(data)
            except RemoteProtocolError as exc:
                return _REFUSED + f"malformed offset report: {exc}"
            for offset in reports:
                outcome = self.links.on_report(
                    link,
                    offset,
                    self._store.min_commit_log_offset,
                    self._store.max_commit_log_offset,
                    _wall_ms(),
                )
                reason = self._apply(link, outcome, offset, wake)
                if reason is not None:
                    return reason

    def _apply(self, link: SlaveLink, outcome: ReportOutcome, offset: int, wake: asyncio.Event) -> str | None:
        """Act on one report; a returned text ends the link."""
        if outcome is ReportOutcome.ACKED:
            self.release()
            return None
        if outcome is ReportOutcome.STARTED:
            logger.info(
                "slave %s asked for offset %d; streaming from %d", link.peer_address, offset, link.sent_offset
            )
            wake.set()
            return None
        if outcome is ReportOutcome.IGNORED:
            return None
        if outcome is ReportOutcome.BEHIND:
            oldest = self._store.min_commit_log_offset
            self._behind.note(
                f"slave {link.peer_address} asks for offset {offset}, below {oldest}, the oldest offset this "
                f"master still holds: it can never catch up (its store must be emptied to copy from {oldest})"
            )
            wake.set()
            return None
        if outcome is ReportOutcome.AHEAD:
            return _REFUSED + (
                f"it asks for offset {offset}, beyond this master's max offset "
                f"{self._store.max_commit_log_offset}: its log holds bytes this master never wrote"
            )
        self.bogus_acks += 1
        return _REFUSED + (
            f"acknowledgement {offset} above the {link.sent_offset} bytes it was sent "
            f"(max offset {self._store.max_commit_log_offset}): not believed"
        )

    async def _write_loop(self, stream: ByteStream, link: SlaveLink, wake: asyncio.Event) -> None:
        store = self._store
        batch_bytes = self._config.ha_transfer_batch_size_bytes
        heartbeat_s = self._config.ha_send_heartbeat_interval_ms / 1000
        loop = asyncio.get_running_loop()
        last_write_s = loop.time()
        told_behind = False
        while True:
            wake.clear()
            if link.state is LinkState.STREAMING:
                while link.sent_offset < store.max_commit_log_offset:
                    if link.sent_offset < store.min_commit_log_offset:
                        logger.error(
                            "slave %s needs offset %d, which retention deleted (oldest now %d): "
                            "it can never catch up",
                            link.peer_address,
                            link.sent_offset,
                            store.min_commit_log_offset,
                        )
                        link.state = LinkState.BEHIND
                        link.sent_offset = store.min_commit_log_offset
                        break
                    body = store.read_commit_log(link.sent_offset, batch_bytes)
                    if not body:
                        break
                    stream.writelines([encode_transfer_header(link.sent_offset, len(body)), body])
                    link.sent_offset += len(body)
                    self._transferred.add(len(body))
                    last_write_s = loop.time()
                    await stream.drain()
            # A slave that cannot catch up hears at once where this master's log starts.
            behind_now = link.state is LinkState.BEHIND and not told_behind
            if link.state is not LinkState.WAITING and (
                behind_now or loop.time() - last_write_s >= heartbeat_s
            ):
                told_behind = told_behind or behind_now
                stream.write(encode_transfer_header(link.sent_offset, 0))
                last_write_s = loop.time()
                await stream.drain()
            if wake.is_set():
                continue
            idle_s = loop.time() - last_write_s
            try:
                async with asyncio.timeout(max(heartbeat_s - idle_s, 0.001)):
                    await wake.wait()
            except TimeoutError:
                pass

    # -- status ----------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, Any]:
        """RocketMQ's HARuntimeInfo of a master, plus each link's lag in milliseconds and state."""
        store = self._store
        max_offset = store.max_commit_log_offset
        fallbehind = self._config.ha_slave_fallbehind_max_bytes
        connections = []
        for link in self.links:
            ack = max(link.ack_offset, 0)
            diff = max(max_offset - ack, 0) if link.usable else max_offset
            in_sync = link.usable and diff < fallbehind
            lag_ms = 0
            if link.usable and diff > 0:
                stored_ms = store.store_timestamp_at(ack)
                lag_ms = max(_wall_ms() - stored_ms, 0) if stored_ms > 0 else -1
            connections.append(
                {
                    "addr": link.peer_address,
                    "slaveAckOffset": link.ack_offset,
                    "diff": diff,
                    "inSync": in_sync,
                    "transferFromWhere": link.sent_offset,
                    "lagMs": lag_ms if link.usable else -1,
                    "state": link.state.value,
                    "brokerId": link.broker_id,
                }
            )
        return {
            "master": True,
            "masterCommitLogMaxOffset": max_offset,
            "masterCommitLogMinOffset": store.min_commit_log_offset,
            "bogusAcks": self.bogus_acks,
            "inSyncSlaveNums": sum(1 for connection in connections if connection["inSync"]),
            "transferredByteInSecond": self._transferred.per_second(),
            "haConnectionInfo": connections,
        }


class _QuietLog:
    """A repeating complaint: the first at once, then at most one per ``interval_s`` saying
    how many were held back, so a flood of garbage connections cannot flood the log."""

    def __init__(self, interval_s: float, level: int) -> None:
        self._interval_s = interval_s
        self._level = level
        self._last_s = -interval_s
        self._held_back = 0

    def note(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_s < self._interval_s:
            self._held_back += 1
            return
        suffix = f" ({self._held_back} more like it since the last report)" if self._held_back else ""
        logger.log(self._level, "%s%s", text, suffix)
        self._last_s, self._held_back = now, 0


class _RateCounter:
    """Bytes per second over the last whole second (status only)."""

    def __init__(self) -> None:
        self._second = 0
        self._bytes = 0
        self._last = 0

    def add(self, count: int) -> None:
        second = int(time.monotonic())
        if second != self._second:
            self._last = self._bytes if second == self._second + 1 else 0
            self._second, self._bytes = second, 0
        self._bytes += count

    def per_second(self) -> int:
        second = int(time.monotonic())
        if second == self._second:
            return self._last
        return self._bytes if second == self._second + 1 else 0


def _resolve(token: object, status: PutStatus) -> None:
    if isinstance(token, asyncio.Future) and not token.done():
        token.set_result(status)


def _loop_ms(loop: asyncio.AbstractEventLoop) -> int:
    return int(loop.time() * 1000)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
