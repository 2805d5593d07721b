"""POP durability: SIGKILL the broker with deliveries in flight, restart, check a ledger.

Method (Jepsen style): 300 messages on 4 queues; three consumers pop (3 s invisible), ack
about half of what they get, nack some (visible again at once) and hold the rest, recording
every ack the broker confirmed and every ack whose answer never came. The broker is SIGKILLed
in the middle of that traffic and restarted on the same store. Consumers then drain the
group. The checker: no message acknowledged before the kill is delivered after it (the broker
promised); every other message, except those whose ack was in flight at the kill (either
outcome is correct), is delivered after the restart (nothing is lost); redeliveries carry a
higher attempt than any delivery seen before the kill. A graceful restart (SIGTERM) after the
drain must then deliver nothing at all. The test fails if the kill came before any ack or
after all of them, so it always exercises both sides of the ledger.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orbitmq.errors import RemotingError
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from orbitmq.transport.connection import RemotingClient
from tests.integration.client.test_push_consumer import make_topic, produce_raw
from tests.support.processes import ServerProcess, start_broker

pytestmark = pytest.mark.fault

TOPIC, GROUP = "PopDurable", "CG_POP_DURABLE"
COUNT = 300
INVISIBLE_MS = 3_000


@dataclass
class Ledger:
    acked: set[bytes] = field(default_factory=set)
    ack_unknown: set[bytes] = field(default_factory=set)
    attempts_before: dict[bytes, int] = field(default_factory=dict)


@dataclass
class Delivery:
    body: bytes
    attempt: int
    extra_info: str
    queue_id: int
    queue_offset: int


async def pop(client: RemotingClient, addr: str, invisible_ms: int, poll_ms: int) -> list[Delivery]:
    header = PopMessageRequestHeader(GROUP, TOPIC, -1, 16, invisible_ms, poll_ms, int(time.time() * 1000), 0)
    response = await client.invoke(
        addr, RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext()), 10_000
    )
    if response.code != ResponseCode.SUCCESS:
        return []
    answer = PopMessageResponseHeader.from_ext(response.ext_fields)
    # A message revived through the group's pop retry topic carries the handle the broker set
    # (POP_CK, retry flag "1"); the client uses it, as RocketMQ's clients do.
    return [
        Delivery(
            m.body,
            m.reconsume_times + 1,
            m.properties.get("POP_CK")
            or ExtraInfo(
                0, answer.pop_time, answer.invisible_time, 0, "0", "broker-a", m.queue_id, m.queue_offset
            ).encode(),
            m.queue_id,
            m.queue_offset,
        )
        for m in decode_stored_messages(response.body)
    ]


async def ack(client: RemotingClient, addr: str, delivery: Delivery) -> int:
    header = AckMessageRequestHeader(
        GROUP, TOPIC, delivery.queue_id, delivery.extra_info, delivery.queue_offset
    )
    response = await client.invoke(
        addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext()), 5_000
    )
    return response.code


async def nack(client: RemotingClient, addr: str, delivery: Delivery) -> None:
    header = ChangeInvisibleTimeRequestHeader(
        GROUP, TOPIC, delivery.queue_id, delivery.extra_info, delivery.queue_offset, 0
    )
    await client.invoke(
        addr, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext()), 5_000
    )


async def consume_until_killed(addr: str, ledger: Ledger, rng: random.Random, stop: asyncio.Event) -> None:
    client = RemotingClient()
    try:
        while not stop.is_set():
            try:
                deliveries = await pop(client, addr, INVISIBLE_MS, 200)
            except RemotingError:
                return
            for delivery in deliveries:
                ledger.attempts_before[delivery.body] = max(
                    ledger.attempts_before.get(delivery.body, 0), delivery.attempt
                )
                choice = rng.random()
                if choice < 0.5:
                    try:
                        code = await ack(client, addr, delivery)
                    except RemotingError:
                        ledger.ack_unknown.add(delivery.body)
                        return
                    if code == ResponseCode.SUCCESS:
                        ledger.acked.add(delivery.body)
                elif choice < 0.6:
                    try:
                        await nack(client, addr, delivery)
                    except RemotingError:
                        return
            await asyncio.sleep(rng.random() * 0.02)
    finally:
        await client.close()


async def drain(addr: str, quiet_s: float) -> list[Delivery]:
    """Pop and ack everything until nothing has come for ``quiet_s`` (longer than the invisible time)."""
    client = RemotingClient()
    got: list[Delivery] = []
    try:
        last = time.monotonic()
        while time.monotonic() - last < quiet_s:
            deliveries = await pop(client, addr, 60_000, 500)
            for delivery in deliveries:
                got.append(delivery)
                assert await ack(client, addr, delivery) == ResponseCode.SUCCESS
            if deliveries:
                last = time.monotonic()
    finally:
        await client.close()
    return got


async def test_pop_state_survives_broker_sigkill_and_sigterm(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, None)
    try:
        await _scenario(broker)
    finally:
        broker.kill()


async def _scenario(broker: ServerProcess) -> None:
    await make_topic(broker.addr, TOPIC, queues=4)
    bodies = [f"m-{i:04d}".encode() for i in range(COUNT)]
    await produce_raw(broker.addr, TOPIC, bodies)
    ledger = Ledger()
    stop = asyncio.Event()
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    consumers = [asyncio.create_task(consume_until_killed(broker.addr, ledger, rng, stop)) for _ in range(3)]
    deadline = time.monotonic() + 10
    while len(ledger.acked) < COUNT // 4 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.to_thread(broker.kill)  # SIGKILL mid-traffic: pops, acks and nacks in flight
    stop.set()
    await asyncio.gather(*consumers)
    assert 0 < len(ledger.acked) < COUNT, (
        f"seed {seed}: the kill missed the traffic ({len(ledger.acked)} acked)"
    )
    await asyncio.to_thread(broker.start)
    after = await drain(broker.addr, quiet_s=INVISIBLE_MS / 1000 + 1.5)
    delivered_after = {delivery.body for delivery in after}
    redelivered_acked = ledger.acked & delivered_after
    assert not redelivered_acked, (
        f"seed {seed}: acknowledged before the kill, delivered again: {sorted(redelivered_acked)[:5]}"
    )
    expected = set(bodies) - ledger.acked - ledger.ack_unknown
    lost = expected - delivered_after
    assert not lost, f"seed {seed}: lost after the restart: {sorted(lost)[:5]}"
    for delivery in after:
        before = ledger.attempts_before.get(delivery.body, 0)
        assert delivery.attempt > before, (
            f"seed {seed}: {delivery.body!r} attempt {delivery.attempt} <= {before}"
        )
    # A graceful restart keeps every ack too: nothing at all comes back.
    await asyncio.to_thread(broker.stop)
    await asyncio.to_thread(broker.start)
    assert await drain(broker.addr, quiet_s=1.0) == []
