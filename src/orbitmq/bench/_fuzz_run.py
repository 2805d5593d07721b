"""Send fuzz frames to a broker and a name server, probe both, and check what must survive.

:func:`fuzz` pipelines the frames the servers should answer on a few connections per server
(a bounded window of unanswered requests, so a prober's request never queues behind thousands)
and gives every frame that should cost its connection a connection of its own. Meanwhile a
prober asks each server a cheap question every second and records any answer that is late
(over ``PROBE_TIMEOUT_MS``) or not SUCCESS. :func:`seed_messages` and :func:`read_back` store
and re-read the messages the run must not lose; :func:`server_exceptions` finds tracebacks in
a server's log. Used by ``python -m orbitmq.bench fuzz`` and the fuzz test tier.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from orbitmq.bench._fuzz_frames import BROKER, NAMESRV, Frame
from orbitmq.errors import OrbitError
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import FrameDecoder
from orbitmq.protocol.headers import (
    CreateTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient, split_address

__all__ = ["FuzzStats", "fuzz", "process_stats", "read_back", "seed_messages", "server_exceptions"]

PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_MS = 3000
"""How long a probe may take: the C++ client's request timeout, after which it drops the connection."""
_QUEUE_FRAMES = 256
_WRITE_BATCH = 64
_CLOSING_WORKERS = 16


@dataclass
class FuzzStats:
    """What a fuzz run sent and got back."""

    frames: int = 0
    frames_by_code: Counter[int] = field(default_factory=Counter)
    responses_by_code: Counter[int] = field(default_factory=Counter)
    closing_frames: int = 0
    unexpected_closes: int = 0
    probes: int = 0
    probe_failures: list[str] = field(default_factory=list)
    probe_max_ms: float = 0.0
    seconds: float = 0.0

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0


class _Pipe:
    """One pipelined connection: writes frames, counts the responses as they come."""

    def __init__(self, addr: str, stats: FuzzStats, window: int) -> None:
        self._addr = addr
        self._stats = stats
        self._window = window
        self.sent = 0
        self.received = 0
        self._silent = 0
        self._progress = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None

    async def _open(self) -> None:
        host, port = split_address(self._addr)
        reader, self._writer = await asyncio.open_connection(host, port)
        self._reader_task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder()
        while True:
            data = await reader.read(1 << 20)
            if not data:
                return
            for frame in decoder.feed(data):
                self._stats.responses_by_code[decode_command(frame).code] += 1
                self.received += 1
            self._progress.set()

    async def send(self, frames: asyncio.Queue[Frame | None]) -> None:
        await self._open()
        done = False
        while not done:
            # Take what is queued (up to a batch) and write it with one system call.
            batch = [await frames.get()]
            while len(batch) < _WRITE_BATCH and not frames.empty():
                batch.append(frames.get_nowait())
            if batch[-1] is None:
                done = True
                batch.pop()
            if not batch:
                continue
            assert self._writer is not None and self._reader_task is not None
            if self._reader_task.done():
                # The server closed this connection although the frames were expected to decode.
                self._stats.unexpected_closes += 1
                await self._open()
            self._writer.writelines([frame.data for frame in batch if frame is not None])
            self.sent += len(batch)
            try:
                await self._writer.drain()
            except ConnectionError:
                continue
            # Some requests are never answered (oneway, END_TRANSACTION "unknown") or only
            # later (parked pulls): when answers stop coming, half the window is written off.
            while self.sent - self.received - self._silent > self._window:
                self._progress.clear()
                try:
                    await asyncio.wait_for(self._progress.wait(), 0.2)
                except TimeoutError:
                    self._silent = self.sent - self.received - self._window // 2

    async def close(self, linger_s: float) -> None:
        deadline = time.monotonic() + linger_s
        while self.received < self.sent and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            await asyncio.gather(self._reader_task, return_exceptions=True)


async def _closing_worker(
    addresses: dict[int, str], frames: asyncio.Queue[Frame | None], stats: FuzzStats
) -> None:
    """One connection per frame: write it, end the stream, read until the server closes."""
    while (frame := await frames.get()) is not None:
        host, port = split_address(addresses[frame.target])
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(frame.data)
            writer.write_eof()
            decoder = FrameDecoder()
            async with asyncio.timeout(10):
                while data := await reader.read(1 << 16):
                    try:
                        for answered in decoder.feed(data):
                            stats.responses_by_code[decode_command(answered).code] += 1
                    except OrbitError:
                        break
            writer.close()
        except (OSError, TimeoutError):
            continue


async def _probe(
    broker_addr: str, namesrv_addr: str, topic: str, stats: FuzzStats, stop: asyncio.Event
) -> None:
    client = RemotingClient()
    try:
        while not stop.is_set():
            for addr, request in (
                (broker_addr, _max_offset_request(topic)),
                (namesrv_addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)),
            ):
                started = time.monotonic()
                try:
                    response = await client.invoke(addr, request, PROBE_TIMEOUT_MS)
                    if response.code != ResponseCode.SUCCESS:
                        stats.probe_failures.append(f"{addr}: code {response.code} {response.remark}")
                except OrbitError as exc:
                    stats.probe_failures.append(f"{addr}: {exc}")
                stats.probe_max_ms = max(stats.probe_max_ms, (time.monotonic() - started) * 1000)
                stats.probes += 1
            try:
                await asyncio.wait_for(stop.wait(), PROBE_INTERVAL_S)
            except TimeoutError:
                pass
    finally:
        await client.close()


async def fuzz(
    frames: Iterable[Frame],
    broker_addr: str,
    namesrv_addr: str,
    probe_topic: str,
    *,
    connections: int = 4,
    window: int = 1024,
) -> FuzzStats:
    """Send every frame to its server while probing both; return the counts."""
    stats = FuzzStats()
    addresses = {BROKER: broker_addr, NAMESRV: namesrv_addr}
    pipes = {
        target: [_Pipe(addr, stats, window) for _ in range(connections)] for target, addr in addresses.items()
    }
    queues = {
        target: [asyncio.Queue[Frame | None](_QUEUE_FRAMES) for _ in range(connections)]
        for target in addresses
    }
    closing: asyncio.Queue[Frame | None] = asyncio.Queue(_QUEUE_FRAMES)
    stop = asyncio.Event()
    started = time.monotonic()
    prober = asyncio.create_task(_probe(broker_addr, namesrv_addr, probe_topic, stats, stop))
    workers = [
        asyncio.create_task(pipe.send(queue))
        for target in addresses
        for pipe, queue in zip(pipes[target], queues[target], strict=True)
    ]
    workers += [
        asyncio.create_task(_closing_worker(addresses, closing, stats)) for _ in range(_CLOSING_WORKERS)
    ]
    turn = 0
    for frame in frames:
        stats.frames += 1
        stats.frames_by_code[frame.code] += 1
        if frame.closes:
            stats.closing_frames += 1
            await closing.put(frame)
        else:
            turn += 1
            await queues[frame.target][turn % connections].put(frame)
    for target in addresses:
        for queue in queues[target]:
            await queue.put(None)
    for _ in range(_CLOSING_WORKERS):
        await closing.put(None)
    await asyncio.gather(*workers)
    for target in addresses:
        await asyncio.gather(*(pipe.close(2.0) for pipe in pipes[target]))
    stats.seconds = time.monotonic() - started
    stop.set()
    await prober
    return stats


# -- what must survive ----------------------------------------------------------------------------


def _max_offset_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic, 0).to_ext())


async def seed_messages(broker_addr: str, topic: str, bodies: list[bytes]) -> None:
    """Create ``topic`` (one queue) and store ``bodies`` in it; every send must succeed."""
    client = RemotingClient()
    try:
        create = CreateTopicRequestHeader(topic=topic, read_queue_nums=1, write_queue_nums=1)
        response = await client.invoke(
            broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext()), 10_000
        )
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"creating {topic}: {response.code} {response.remark}")
        for body in bodies:
            header = SendMessageRequestHeader(producer_group="FuzzSeedProducer", topic=topic, queue_id=0)
            send = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)
            response = await client.invoke(broker_addr, send, 10_000)
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"seeding {topic}: {response.code} {response.remark}")
    finally:
        await client.close()


async def read_back(broker_addr: str, topic: str) -> list[bytes]:
    """Every body of ``topic`` queue 0, in queue order."""
    client = RemotingClient()
    bodies: list[bytes] = []
    queue_offset = 0
    try:
        while True:
            header = PullMessageRequestHeader(
                consumer_group="FuzzSeedReader", topic=topic, queue_id=0, queue_offset=queue_offset, sys_flag=0x4,
                subscription="*", max_msg_nums=256,
            )  # fmt: skip
            response = await client.invoke(
                broker_addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()), 10_000
            )
            if response.code != ResponseCode.SUCCESS:
                return bodies
            bodies += [message.body for message in decode_stored_messages(response.body)]
            queue_offset = int(response.ext_fields["nextBeginOffset"])
    finally:
        await client.close()


_TRACEBACK_END = re.compile(r"^(\w[\w.]*(?:Error|Exception|Interrupt|Exit)\b.*)$", re.MULTILINE)


def server_exceptions(log_text: str) -> Counter[str]:
    """Exception types a server logged with a traceback (plus asyncio's unretrieved ones)."""
    found: Counter[str] = Counter()
    for block in log_text.split("Traceback (most recent call last):")[1:]:
        match = _TRACEBACK_END.search(block)
        found[(match.group(1) if match else "unknown").split(":")[0]] += 1
    found["Task exception was never retrieved"] += log_text.count("Task exception was never retrieved")
    found["Exception in callback"] += log_text.count("Exception in callback")
    return +found


def process_stats(pid: int) -> tuple[int, int]:
    """(resident set size in bytes, open file descriptors) of a live process (Linux /proc)."""
    rss_kib = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kib = int(line.split()[1])
    return rss_kib * 1024, len(os.listdir(f"/proc/{pid}/fd"))
