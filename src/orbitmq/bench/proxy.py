"""The gRPC proxy beside the remoting port: send msgs/s and receive+ack msgs/s, in one run.

A temporary ``orbitmq standalone`` (broker, name server and gRPC proxy in one process) is
started unless ``--grpc`` and ``-n/--namesrv`` name running ones (the broker is found through
the name server; the benchmark's topics are removed at the end unless they existed before).
Five phases, ``--messages`` each, ``--size``-byte bodies, ``--concurrency`` requests in flight:

1. gRPC SendMessage (what a 5.x SDK producer sends), one message per call;
2. remoting: OrbitMQ's own Producer.send to the broker port, the same messages;
3. gRPC ReceiveMessage (``--batch-size`` per receive, as a SimpleConsumer) + one AckMessage with
   every handle of the batch, over what phase 1 sent;
4. remoting POP_MESSAGE + ACK_MESSAGE to the broker (the same POP engine without the proxy),
   over what phase 2 sent;
5. remoting: OrbitMQ's PullConsumer (the 4.x way: pull and commit offsets), same messages.

The gRPC side is driven with the proxy's own stubs on grpc.aio, not with a 5.x SDK: the figures
are the server's, not an SDK's. Client and server share this machine's cores, as in every
OrbitMQ benchmark; the ratios (gRPC / remoting) are the point. Beside each rate the server's
CPU time per message is printed (from /proc, when the benchmark started the server), and the
benchmark client's own: a Python gRPC client costs more than a remoting one, and on two cores
it takes CPU away from the server.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from orbitmq.bench._servers import add_namesrv_argument, start_standalone_with_grpc
from orbitmq.bench._topics import BenchTopic
from orbitmq.client import AdminClient, Message, Producer
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.protocol.pop import (
    AckMessageRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

GRPC_TOPIC, REMOTING_TOPIC = "BenchProxyGrpc", "BenchProxyRemoting"
_GROUPS = ("bench-proxy-grpc", "bench-proxy-pop", "bench-proxy-pull")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_namesrv_argument(parser)
    parser.add_argument("--grpc", help="host:port of the running cluster's gRPC proxy (with --namesrv)")
    parser.add_argument("--messages", type=int, default=20_000, help="messages per phase")
    parser.add_argument("--size", type=int, default=128, help="body bytes")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument(
        "--batch-size", "--batch", dest="batch", type=int, default=32, help="messages per receive / pop"
    )
    parser.add_argument("--queues", type=int, default=4, help="queues of the topics when they are created")


def run(args: argparse.Namespace) -> int:
    if bool(args.grpc) != bool(args.namesrv):
        print("orbitmq bench proxy: a running cluster needs both --grpc and --namesrv", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-proxy-") as workdir:
        server = None
        if args.grpc:
            grpc_addr, namesrv = args.grpc, args.namesrv
        else:
            server, namesrv_port, _, grpc_port = start_standalone_with_grpc(Path(workdir))
            grpc_addr, namesrv = f"127.0.0.1:{grpc_port}", f"127.0.0.1:{namesrv_port}"
        args.server_pid = server.pid if server is not None else None
        topics = [
            BenchTopic(namesrv, topic, args.queues, groups=_GROUPS) for topic in (GRPC_TOPIC, REMOTING_TOPIC)
        ]
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                results = runner.run(_bench(grpc_addr, namesrv, topics, args))
        finally:
            if server is not None:
                server.terminate()
                server.wait(30)
    _report(results, args)
    return 0


Result = tuple[float, float | None, float]
"""msgs/s, server CPU µs per message (None when unknown), benchmark-client CPU µs per message."""


def _server_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (Linux /proc), None when unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _bench(
    grpc_addr: str, namesrv: str, topics: list[BenchTopic], args: argparse.Namespace
) -> dict[str, Result]:
    for topic in topics:
        await topic.create()
    try:
        return await _phases(grpc_addr, namesrv, args)
    finally:
        for topic in topics:
            await topic.remove_created()


async def _phases(grpc_addr: str, namesrv: str, args: argparse.Namespace) -> dict[str, Result]:
    body = os.urandom(args.size)
    results: dict[str, Result] = {}
    metadata = (
        ("x-mq-client-id", f"bench@{os.getpid()}@0@{uuid.uuid4().hex[:8]}"),
        ("x-mq-language", "PYTHON"),
    )
    async with grpc.aio.insecure_channel(grpc_addr) as channel:
        stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        route = await stub.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name=GRPC_TOPIC)), metadata=metadata
        )
        if route.status.code != pb.OK:
            raise RuntimeError(f"QueryRoute: {route.status}")
        broker_name = route.message_queues[0].broker.name
        async with AdminClient(namesrv) as admin:
            broker = (await admin.cluster_info()).broker_addr_table[broker_name].master_addr
        if broker is None:
            raise RuntimeError(f"broker {broker_name} has no master")
        results["send grpc"] = await _timed(args, lambda: _grpc_send(stub, metadata, body, args))
        async with Producer("bench-proxy-producer", namesrv) as producer:
            results["send remoting"] = await _timed(args, lambda: _remoting_send(producer, body, args))
        results["receive+ack grpc"] = await _timed(
            args, lambda: _grpc_receive(stub, metadata, broker_name, args)
        )
    results["pop+ack remoting"] = await _timed(args, lambda: _remoting_pop(broker, broker_name, args))
    results["pull remoting"] = await _timed(args, lambda: _pull(namesrv, args))
    return results


async def _timed(args: argparse.Namespace, phase: Callable[[], Awaitable[int]]) -> Result:
    server_before = _server_cpu_s(args.server_pid)
    client_before = time.process_time()
    started = time.perf_counter()
    count = await phase()
    elapsed = time.perf_counter() - started
    client_us = (time.process_time() - client_before) * 1e6 / max(count, 1)
    server_after = _server_cpu_s(args.server_pid)
    server_us = None
    if server_before is not None and server_after is not None:
        server_us = (server_after - server_before) * 1e6 / max(count, 1)
    if count < args.messages:
        raise RuntimeError(f"a phase handled {count} of {args.messages} messages")
    return count / elapsed, server_us, client_us


async def _in_flight(args: argparse.Namespace, one: Callable[[int], Awaitable[None]]) -> int:
    counter = itertools.count()

    async def worker() -> None:
        while (index := next(counter)) < args.messages:
            await one(index)

    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    return int(args.messages)


async def _grpc_send(stub: spb_grpc.MessagingServiceStub, metadata: tuple[tuple[str, str], ...],
                     body: bytes, args: argparse.Namespace) -> int:  # fmt: skip
    async def one(index: int) -> None:
        message = pb.Message(topic=pb.Resource(name=GRPC_TOPIC), body=body)
        message.system_properties.message_id = f"BENCH{index:028X}"
        message.system_properties.message_type = pb.NORMAL
        message.system_properties.born_timestamp.GetCurrentTime()
        response = await stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=metadata)
        if response.status.code != pb.OK:
            raise RuntimeError(f"SendMessage: {response.status}")

    return await _in_flight(args, one)


async def _remoting_send(producer: Producer, body: bytes, args: argparse.Namespace) -> int:
    async def one(index: int) -> None:
        await producer.send(Message(REMOTING_TOPIC, body))

    return await _in_flight(args, one)


async def _grpc_receive(stub: spb_grpc.MessagingServiceStub, metadata: tuple[tuple[str, str], ...],
                        broker_name: str, args: argparse.Namespace) -> int:  # fmt: skip
    received = 0
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name="bench-proxy-grpc"),
        message_queue=pb.MessageQueue(
            topic=pb.Resource(name=GRPC_TOPIC), id=0, broker=pb.Broker(name=broker_name)
        ),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=args.batch,
    )
    request.invisible_duration.FromSeconds(60)
    request.long_polling_timeout.FromSeconds(5)

    async def receiver() -> None:
        nonlocal received
        while received < args.messages:
            handles = []
            async for frame in stub.ReceiveMessage(request, metadata=metadata, timeout=20):
                if frame.HasField("message"):
                    system = frame.message.system_properties
                    handles.append(
                        spb.AckMessageEntry(
                            message_id=system.message_id, receipt_handle=system.receipt_handle
                        )
                    )
            if not handles:
                continue
            received += len(handles)
            ack = spb.AckMessageRequest(
                group=request.group, topic=request.message_queue.topic, entries=handles
            )
            response = await stub.AckMessage(ack, metadata=metadata)
            if response.status.code != pb.OK:
                raise RuntimeError(f"AckMessage: {response.status}")

    await _until_all_received(args, receiver, lambda: received)
    return received


async def _until_all_received(
    args: argparse.Namespace, receiver: Callable[[], Awaitable[None]], count: Callable[[], int]
) -> None:
    """Run receivers until every message is in; the others, still long-polling, are cancelled."""
    tasks = [asyncio.ensure_future(receiver()) for _ in range(max(args.concurrency // 8, 1))]
    try:
        while count() < args.messages:
            done, _ = await asyncio.wait(tasks, timeout=0.005, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # a receiver that failed fails the phase
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _remoting_pop(broker: str, broker_name: str, args: argparse.Namespace) -> int:
    client = RemotingClient()
    received = 0

    async def receiver() -> None:
        nonlocal received
        while received < args.messages:
            header = PopMessageRequestHeader(
                "bench-proxy-pop", REMOTING_TOPIC, -1, args.batch, 60_000, 5_000, int(time.time() * 1000), 0
            )
            response = await client.invoke(
                broker, RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext()), 20_000
            )
            if response.code != ResponseCode.SUCCESS:
                continue
            answer = PopMessageResponseHeader.from_ext(response.ext_fields)
            messages = decode_stored_messages(response.body)
            received += len(messages)
            acks = []
            for message in messages:
                handle = ExtraInfo(0, answer.pop_time, answer.invisible_time, 0, "0", broker_name,
                                   message.queue_id, message.queue_offset).encode()  # fmt: skip
                ack = AckMessageRequestHeader(
                    "bench-proxy-pop", REMOTING_TOPIC, message.queue_id, handle, message.queue_offset
                )
                acks.append(
                    client.invoke(broker, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack.to_ext()))
                )
            for done in await asyncio.gather(*acks):
                if done.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"ACK_MESSAGE: {done.code} {done.remark}")

    try:
        await _until_all_received(args, receiver, lambda: received)
    finally:
        await client.close()
    return received


async def _pull(namesrv: str, args: argparse.Namespace) -> int:
    consumer = PullConsumer(
        "bench-proxy-pull", namesrv, pull_batch_size=args.batch,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    await consumer.subscribe(REMOTING_TOPIC)
    await consumer.start()
    count = 0
    try:
        deadline = time.monotonic() + 120
        while count < args.messages and time.monotonic() < deadline:
            count += len(await consumer.poll(500))
            await consumer.commit_sync()
    finally:
        await consumer.shutdown()
    return count


def _report(results: dict[str, Result], args: argparse.Namespace) -> None:
    print(f"gRPC proxy vs remoting: {args.messages} messages per phase, {args.size} B bodies, "
          f"{args.concurrency} in flight, batches of {args.batch}")  # fmt: skip
    print(f"  {'phase':<20} {'msgs/s':>10} {'server CPU us/msg':>18} {'client CPU us/msg':>18}")
    for name, (per_s, server_us, client_us) in results.items():
        server = f"{server_us:,.0f}" if server_us is not None else "-"
        print(f"  {name:<20} {per_s:>10,.0f} {server:>18} {client_us:>18,.0f}")
    rate = {name: result[0] for name, result in results.items()}
    print(f"  send: gRPC / remoting            = {rate['send grpc'] / rate['send remoting']:.2f}")
    print(f"  receive+ack gRPC / remoting POP  = {rate['receive+ack grpc'] / rate['pop+ack remoting']:.2f}")
    print(f"  receive+ack gRPC / remoting pull = {rate['receive+ack grpc'] / rate['pull remoting']:.2f}")
