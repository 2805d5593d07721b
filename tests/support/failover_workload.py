"""Workload and checker of the failover fault tests (Jepsen style).

*Producer*: OrbitMQ's producer sends unique ids one at a time (no retries inside a send: a
failed attempt is never sent again, the next one carries a new id), so every id is stored at
most once unless the broker stored it twice. Every SEND_OK goes to the ledger with its queue,
queue offset and the time it was acknowledged.

*Consumer*: reads every queue with raw pulls from the broker the name server routes as master
(id 0), refreshing the route at once on any error, and records every message it was given.

*Checker* (after the faults healed and the group settled), over every queue read from the
final master:

1. every acknowledged id is there exactly once, at the queue offset it was acknowledged with;
2. within a queue, acknowledged ids appear in the order they were acknowledged;
3. every id the consumer saw is there, at the offset it saw it at (no phantom read: nothing
   a consumer was given was later lost).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from orbitmq.client import Producer, SendStatus
from orbitmq.errors import OrbitError
from orbitmq.model.message import Message
from orbitmq.protocol.bodies import decode_topic_route
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import GetRouteInfoRequestHeader, PullMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient


@dataclass
class Ledger:
    acked: list[tuple[str, int, int, float]] = field(default_factory=list)  # id, queue, offset, time
    failed: int = 0
    failures: list[tuple[float, str]] = field(default_factory=list)  # time, why (diagnosis)
    seen: list[tuple[str, int, int]] = field(default_factory=list)  # id, queue, offset

    def last_ack_before(self, moment: float) -> float | None:
        times = [t for _, _, _, t in self.acked if t <= moment]
        return max(times) if times else None

    def first_ack_after(self, moment: float) -> float | None:
        times = [t for _, _, _, t in self.acked if t > moment]
        return min(times) if times else None


async def produce(namesrv: str, topic: str, stop: asyncio.Event, ledger: Ledger, senders: int = 2) -> None:
    async def sender(index: int) -> None:
        seq = 0
        while not stop.is_set():
            seq += 1
            uid = f"s{index}-{seq}"
            began = time.monotonic()
            try:
                result = await producer.send(Message(topic, uid.encode()))
            except OrbitError as exc:
                ledger.failed += 1
                ledger.failures.append((time.monotonic(), f"{type(exc).__name__}: {str(exc)[:120]}"))
                await asyncio.sleep(0.05)
                continue
            if result.status is SendStatus.OK:
                acked_at = time.monotonic()
                ledger.acked.append((uid, result.message_queue.queue_id, result.queue_offset, acked_at))
                if acked_at - began > 1.0:  # diagnosis: an acknowledgement that took long
                    ledger.failures.append((acked_at, f"SlowAck: {acked_at - began:.2f} s"))
            else:
                ledger.failed += 1

    async with Producer(
        "PG_FAILOVER", namesrv, send_msg_timeout_ms=2500, retry_times_when_send_failed=0
    ) as producer:
        await asyncio.gather(*(sender(index) for index in range(senders)))


async def master_addr(client: RemotingClient, namesrv: str, topic: str) -> str | None:
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext()
    )
    try:
        response = await client.invoke(namesrv, request, 2000)
    except OrbitError:
        return None
    if response.code != ResponseCode.SUCCESS:
        return None
    route = decode_topic_route(response.body)
    for broker in route.broker_datas:
        if 0 in broker.broker_addrs:
            return broker.broker_addrs[0]
    return None


async def pull(
    client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int
) -> tuple[list[tuple[str, int]], int] | None:
    """(messages as (id, queue offset), next offset); None when the broker could not answer."""
    header = PullMessageRequestHeader(
        consumer_group="CG_FAILOVER_CHECK",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=64,
        sys_flag=0x4,
        subscription="*",
        expression_type="TAG",
    )
    try:
        response = await client.invoke(
            addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()), 2000
        )
    except OrbitError:
        return None
    if response.code == ResponseCode.SUCCESS:
        batch = decode_stored_messages(response.body, decompress=True)
        return [(message.body.decode(), message.queue_offset) for message in batch], int(
            response.ext_fields["nextBeginOffset"]
        )
    if response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
        return [], offset
    return None


async def consume(namesrv: str, topic: str, queues: int, stop: asyncio.Event, ledger: Ledger) -> None:
    client = RemotingClient(connect_timeout_ms=500)
    offsets = dict.fromkeys(range(queues), 0)
    addr: str | None = None
    try:
        while not stop.is_set():
            if addr is None:
                addr = await master_addr(client, namesrv, topic)
                if addr is None:
                    await asyncio.sleep(0.1)
                    continue
            got = 0
            for queue_id in range(queues):
                answer = await pull(client, addr, topic, queue_id, offsets[queue_id])
                if answer is None:
                    addr = None  # refresh the route at once
                    break
                messages, next_offset = answer
                for uid, queue_offset in messages:
                    ledger.seen.append((uid, queue_id, queue_offset))
                offsets[queue_id] = next_offset
                got += len(messages)
            if not got:
                await asyncio.sleep(0.05)
    finally:
        await client.close()


async def read_all(addr: str, topic: str, queues: int) -> dict[int, list[tuple[str, int]]]:
    client = RemotingClient()
    stored: dict[int, list[tuple[str, int]]] = {}
    try:
        for queue_id in range(queues):
            offset, rows = 0, []
            while True:
                answer = await pull(client, addr, topic, queue_id, offset)
                assert answer is not None, f"final read of queue {queue_id} at {addr} failed"
                messages, next_offset = answer
                if not messages:
                    break
                rows.extend(messages)
                offset = next_offset
            stored[queue_id] = rows
    finally:
        await client.close()
    return stored


def check(ledger: Ledger, stored: dict[int, list[tuple[str, int]]]) -> dict[str, int]:
    """Raise AssertionError naming the first violation; returns counts for the report."""
    at: dict[tuple[int, int], str] = {}
    copies: Counter[str] = Counter()
    for queue_id, rows in stored.items():
        for uid, offset in rows:
            at[(queue_id, offset)] = uid
            copies[uid] += 1
    lost = [(uid, q, o) for uid, q, o, _ in ledger.acked if at.get((q, o)) != uid]
    assert not lost, f"{len(lost)} acknowledged messages lost or moved, first {lost[:5]}"
    doubled = [uid for uid, _, _, _ in ledger.acked if copies[uid] != 1]
    assert not doubled, f"acknowledged ids stored more than once: {doubled[:5]}"
    # One sender sends one message at a time: its acknowledgements in a queue come in queue order.
    by_sender_queue: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for uid, queue_id, offset, acked_at in ledger.acked:
        by_sender_queue.setdefault((uid.split("-")[0], queue_id), []).append((acked_at, offset))
    for (sender, queue_id), rows in by_sender_queue.items():
        offsets = [offset for _, offset in sorted(rows)]
        assert offsets == sorted(offsets), (
            f"{sender}, queue {queue_id}: acknowledged order differs from queue order"
        )
    phantoms = [(uid, q, o) for uid, q, o in ledger.seen if at.get((q, o)) != uid]
    assert not phantoms, f"{len(phantoms)} messages a consumer saw were later lost, first {phantoms[:5]}"
    return {
        "acknowledged": len(ledger.acked),
        "failed_attempts": ledger.failed,
        "consumed": len(ledger.seen),
        "stored": sum(len(rows) for rows in stored.values()),
    }


def failover_times(
    ledger: Ledger, faults: list[float], every_fault: list[float] | None = None, window_s: float = 30.0
) -> list[float]:
    """Per master fault: the unavailability it caused, in seconds.

    From the last acknowledgement before the fault to the first after it; an answer already on
    its way when the fault struck does not end the outage, so this is the longest gap between
    consecutive acknowledgements from that last one until the next fault of ``every_fault``
    (or ``window_s`` after it).
    """
    ack_times = sorted(t for _, _, _, t in ledger.acked)
    boundaries = sorted(every_fault if every_fault is not None else faults)
    times = []
    for moment in faults:
        before = ledger.last_ack_before(moment)
        if before is None:
            continue
        later = [b for b in boundaries if b > moment]
        end = min(later[0] if later else moment + window_s, moment + window_s)
        span = [t for t in ack_times if before <= t <= end]
        gaps = [after - earlier for earlier, after in zip(span, span[1:], strict=False)]
        if gaps:
            times.append(max(gaps))
    return times


def summary(times: list[float]) -> str:
    if not times:
        return "no failovers measured"
    return (
        f"{len(times)} failovers: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
        f"(all: {', '.join(f'{t:.1f}' for t in times)})"
    )
