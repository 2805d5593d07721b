"""The gRPC corpus: short sequences of 5.x RPCs, each played against Apache's proxy and OrbitMQ's.

Every scenario uses topics and groups of its own (``target.name_of``), created with one queue
so that the queue a proxy picks, and so each offset, is the same on both sides. Message ids
are the client's (as the SDKs send them), the same on both sides.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from tests.oracle.grpc_harness import Client, GrpcScenario, GrpcTarget

SCENARIOS: dict[str, GrpcScenario] = {}


def scenario(func: GrpcScenario) -> GrpcScenario:
    SCENARIOS[func.__name__] = func
    return func


def _resource(name: str) -> pb.Resource:
    return pb.Resource(resource_namespace="", name=name)


def _message_id(target: GrpcTarget, index: int) -> str:
    digest = hashlib.sha256(f"{target.scenario}/{index}".encode()).hexdigest().upper()
    return "01" + digest[:32]


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(int(time.time() * 1000))
    return stamp


def _ua() -> pb.UA:
    return pb.UA(language=pb.PYTHON, version="5.1.2", platform="linux", hostname="oracle")


def producer_settings(target: GrpcTarget, *topics: str) -> pb.Settings:
    return pb.Settings(
        client_type=pb.PRODUCER,
        access_point=target.endpoints,
        request_timeout=Duration(seconds=3),
        publishing=pb.Publishing(topics=[_resource(t) for t in topics], validate_message_type=True),
        user_agent=_ua(),
    )


def consumer_settings(
    target: GrpcTarget, group: str, topic: str, client_type: pb.ClientType = pb.SIMPLE_CONSUMER
) -> pb.Settings:
    return pb.Settings(
        client_type=client_type,
        access_point=target.endpoints,
        request_timeout=Duration(seconds=3),
        subscription=pb.Subscription(
            group=_resource(group),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=_resource(topic), expression=pb.FilterExpression(type=pb.TAG, expression="*")
                )
            ],
            long_polling_timeout=Duration(seconds=20),
        ),
        user_agent=_ua(),
    )


def message(
    target: GrpcTarget,
    topic: str,
    index: int,
    body: bytes = b"hello",
    kind: pb.MessageType = pb.NORMAL,
    **system: object,
) -> pb.Message:
    return pb.Message(
        topic=_resource(topic),
        user_properties={"oracle": "yes"},
        system_properties=pb.SystemProperties(
            tag="TagA",
            keys=[f"key{index}"],
            message_id=_message_id(target, index),
            body_encoding=pb.IDENTITY,
            message_type=kind,
            born_timestamp=_now(),
            born_host="127.0.0.1",
            **system,  # type: ignore[arg-type]
        ),
        body=body,
    )


async def producer(target: GrpcTarget, *topics: str) -> Client:
    client = target.client()
    await client.telemetry(producer_settings(target, *topics))
    return client


async def consumer(target: GrpcTarget, group: str, topic: str, fifo: bool = False) -> Client:
    await target.create_group(group, fifo)
    client = target.client()
    await client.telemetry(consumer_settings(target, group, topic))
    return client


def receive_request(
    target: GrpcTarget, group: str, topic: str, batch: int = 4, polling_s: float = 5.0, invisible_s: int = 30
) -> spb.ReceiveMessageRequest:
    return spb.ReceiveMessageRequest(
        group=_resource(group),
        message_queue=pb.MessageQueue(
            topic=_resource(topic),
            id=-1,
            permission=pb.READ_WRITE,
            broker=pb.Broker(name="broker-a", id=0, endpoints=target.endpoints),
        ),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=batch,
        invisible_duration=Duration(seconds=invisible_s),
        auto_renew=False,
        long_polling_timeout=Duration(seconds=int(polling_s), nanos=int(polling_s % 1 * 1e9)),
    )


async def receive_until(
    client: Client, request: spb.ReceiveMessageRequest, wanted: int, attempts: int = 3
) -> list[spb.ReceiveMessageResponse]:
    """Receive until ``wanted`` messages came (a pop can return fewer than are there)."""
    frames: list[spb.ReceiveMessageResponse] = []
    for _ in range(attempts):
        got = await client.receive(request)
        frames = got
        if sum(1 for frame in got if frame.HasField("message")) >= wanted:
            break
    return frames


def received_messages(frames: list[spb.ReceiveMessageResponse]) -> list[pb.Message]:
    return [frame.message for frame in frames if frame.HasField("message")]


# -- routing, clients, settings ------------------------------------------------------------------


@scenario
async def query_route(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic, queues=4)
    client = target.client()

    async def route(label: str, name: str) -> None:
        request = spb.QueryRouteRequest(topic=_resource(name), endpoints=target.endpoints)
        target.record(label, await client.unary("QueryRoute", request))

    await route("existing topic", topic)
    await route("unknown topic", target.name_of("missing"))
    await route("system topic", "TBW102")
    await route("blank topic", "")
    await route("illegal characters", "a b*c")


@scenario
async def query_route_typed(target: GrpcTarget) -> None:
    client = target.client()
    for kind in ("FIFO", "DELAY", "TRANSACTION", "NORMAL"):
        topic = target.name_of(kind.lower())
        await target.create_topic(topic, queues=2, message_type=kind)
        request = spb.QueryRouteRequest(topic=_resource(topic), endpoints=target.endpoints)
        target.record(f"{kind} topic", await client.unary("QueryRoute", request))


@scenario
async def no_client_id(target: GrpcTarget) -> None:
    request = spb.QueryRouteRequest(topic=_resource("TBW102"), endpoints=target.endpoints)
    target.record("query route", await target.stub.QueryRoute(request, timeout=10))
    heartbeat = spb.HeartbeatRequest(client_type=pb.PRODUCER)
    target.record("heartbeat", await target.stub.Heartbeat(heartbeat, timeout=10))
    send = spb.SendMessageRequest(messages=[message(target, "TBW102", 0)])
    target.record("send", await target.stub.SendMessage(send, timeout=10))


@scenario
async def telemetry_settings(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    client = target.client()
    target.record("producer settings", await client.telemetry(producer_settings(target, topic)))
    client = target.client()
    settings = consumer_settings(target, group, topic)
    await target.record_call("consumer settings of an unknown group", client.telemetry(settings))
    await target.create_group(group)
    client = target.client()
    target.record("simple consumer settings", await client.telemetry(consumer_settings(target, group, topic)))
    client = target.client()
    answer = await client.telemetry(consumer_settings(target, group, topic, pb.PUSH_CONSUMER))
    target.record("push consumer settings", answer)
    fifo_group = target.name_of("fifo")
    await target.create_group(fifo_group, fifo=True)
    client = target.client()
    answer = await client.telemetry(consumer_settings(target, fifo_group, topic, pb.PUSH_CONSUMER))
    target.record("fifo push consumer settings", answer)


@scenario
async def heartbeat(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    client = await producer(target, topic)
    answer = await client.unary("Heartbeat", spb.HeartbeatRequest(client_type=pb.PRODUCER))
    target.record("producer", answer)
    client = await consumer(target, group, topic)
    request = spb.HeartbeatRequest(group=_resource(group), client_type=pb.SIMPLE_CONSUMER)
    target.record("simple consumer", await client.unary("Heartbeat", request))
    stranger = target.client()
    request = spb.HeartbeatRequest(group=_resource(group), client_type=pb.SIMPLE_CONSUMER)
    target.record("consumer without settings", await stranger.unary("Heartbeat", request))


@scenario
async def notify_client_termination(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    client = await consumer(target, group, topic)
    request = spb.NotifyClientTerminationRequest(group=_resource(group))
    target.record("consumer", await client.unary("NotifyClientTermination", request))
    client = await producer(target, topic)
    target.record(
        "producer", await client.unary("NotifyClientTermination", spb.NotifyClientTerminationRequest())
    )


@scenario
async def query_assignment(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic, queues=2)
    client = await consumer(target, group, topic)

    async def assignment(label: str, topic_name: str, group_name: str) -> None:
        request = spb.QueryAssignmentRequest(
            topic=_resource(topic_name), group=_resource(group_name), endpoints=target.endpoints
        )
        target.record(label, await client.unary("QueryAssignment", request))

    await assignment("existing topic", topic, group)
    await assignment("unknown topic", target.name_of("missing"), group)
    await assignment("blank group", topic, "")


# -- producing -----------------------------------------------------------------------------------


async def _send(client: Client, *messages: pb.Message) -> spb.SendMessageResponse:
    response: spb.SendMessageResponse = await client.unary(
        "SendMessage", spb.SendMessageRequest(messages=list(messages))
    )
    return response


@scenario
async def send_normal(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic, message_type="NORMAL")
    client = await producer(target, topic)
    target.record("one message", await _send(client, message(target, topic, 0)))
    target.record("second message", await _send(client, message(target, topic, 1)))
    batch = [message(target, topic, 2), message(target, topic, 3)]
    target.record("two messages", await _send(client, *batch))


@scenario
async def send_fifo(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic, message_type="FIFO")
    client = await producer(target, topic)
    sent = message(target, topic, 0, kind=pb.FIFO, message_group="order-1")
    target.record("fifo with group", await _send(client, sent))
    sent = message(target, topic, 1, kind=pb.FIFO)
    target.record("fifo without group", await _send(client, sent))


@scenario
async def send_delay(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic, message_type="DELAY")
    client = await producer(target, topic)
    due = Timestamp()
    due.FromMilliseconds(int(time.time() * 1000) + 60_000)
    sent = await _send(client, message(target, topic, 0, kind=pb.DELAY, delivery_timestamp=due))
    # The offset of a timed message is its place in the broker's timer topic, shared by scenarios.
    target.record("delay", sent, ignore=("entries[].offset",))
    recall = spb.RecallMessageRequest(topic=_resource(topic), recall_handle=sent.entries[0].recall_handle)
    target.record("recall", await client.unary("RecallMessage", recall))
    bad = spb.RecallMessageRequest(topic=_resource(topic), recall_handle="not-a-handle")
    target.record("recall bad handle", await client.unary("RecallMessage", bad))
    target.record("delay without timestamp", await _send(client, message(target, topic, 1, kind=pb.DELAY)))


@scenario
async def send_transaction(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic, message_type="TRANSACTION")
    client = await producer(target, topic)
    sent = await _send(client, message(target, topic, 0, kind=pb.TRANSACTION))
    # The offset of a half message is its place in the broker's half topic, shared by scenarios.
    target.record("half", sent, ignore=("entries[].offset",))
    entry = sent.entries[0]
    end = spb.EndTransactionRequest(
        topic=_resource(topic),
        message_id=entry.message_id,
        transaction_id=entry.transaction_id,
        resolution=pb.COMMIT,
        source=pb.SOURCE_CLIENT,
    )
    target.record("commit", await client.unary("EndTransaction", end))
    rollback = await _send(client, message(target, topic, 1, kind=pb.TRANSACTION))
    end = spb.EndTransactionRequest(
        topic=_resource(topic),
        message_id=rollback.entries[0].message_id,
        transaction_id=rollback.entries[0].transaction_id,
        resolution=pb.ROLLBACK,
        source=pb.SOURCE_CLIENT,
    )
    target.record("rollback", await client.unary("EndTransaction", end))
    bad = spb.EndTransactionRequest(
        topic=_resource(topic),
        message_id=_message_id(target, 9),
        transaction_id="not-a-transaction",
        resolution=pb.COMMIT,
        source=pb.SOURCE_CLIENT,
    )
    target.record("bad transaction id", await client.unary("EndTransaction", bad))


@scenario
async def send_bad_topic(target: GrpcTarget) -> None:
    client = await producer(target)
    target.record("unknown topic", await _send(client, message(target, target.name_of("missing"), 0)))
    target.record("illegal topic", await _send(client, message(target, "a b*c", 1)))
    target.record("system topic", await _send(client, message(target, "TBW102", 2)))


@scenario
async def send_wrong_type(target: GrpcTarget) -> None:
    fifo = target.name_of("fifo")
    normal = target.name_of("normal")
    await target.create_topic(fifo, message_type="FIFO")
    await target.create_topic(normal, message_type="NORMAL")
    client = await producer(target, fifo, normal)
    target.record("normal to fifo topic", await _send(client, message(target, fifo, 0)))
    sent = message(target, normal, 1, kind=pb.FIFO, message_group="g1")
    target.record("fifo to normal topic", await _send(client, sent))
    target.record(
        "transaction to normal topic", await _send(client, message(target, normal, 2, kind=pb.TRANSACTION))
    )


@scenario
async def send_oversized(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic)
    client = await producer(target, topic)
    big = message(target, topic, 0, body=b"x" * (4 * 1024 * 1024 + 1))
    target.record("body over 4 MiB", await _send(client, big))


@scenario
async def send_missing_fields(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic)
    client = await producer(target, topic)
    target.record("no messages", await _send(client))
    no_id = message(target, topic, 0)
    no_id.system_properties.ClearField("message_id")
    target.record("no message id", await _send(client, no_id))
    no_topic = message(target, topic, 1)
    no_topic.ClearField("topic")
    target.record("no topic", await _send(client, no_topic))
    target.record("empty body", await _send(client, message(target, topic, 2, body=b"")))
    bad_tag = message(target, topic, 3)
    bad_tag.system_properties.tag = "a|b"
    target.record("tag with bar", await _send(client, bad_tag))
    reserved = message(target, topic, 4)
    reserved.user_properties["UNIQ_KEY"] = "x"
    target.record("reserved property", await _send(client, reserved))
    untyped = message(target, topic, 5)
    untyped.system_properties.ClearField("message_type")
    target.record("no message type", await _send(client, untyped))


# -- consuming -----------------------------------------------------------------------------------


@scenario
async def receive_empty(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    client = await consumer(target, group, topic)
    # A polling time under the proxies' minimum (5 s) is raised to it (no ILLEGAL_POLLING_TIME for
    # a 5.1.2 client): the long poll on an empty topic times out after 5 s.
    frames = await client.receive(receive_request(target, group, topic, polling_s=1))
    target.record_frames("empty topic, long poll times out", frames)


@scenario
async def receive_bad_requests(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    client = await consumer(target, group, topic)
    request = receive_request(target, group, topic)
    request.batch_size = 0
    target.record_frames("batch size 0", await client.receive(request))
    request = receive_request(target, group, target.name_of("missing"))
    target.record_frames("unknown topic", await client.receive(request))
    request = receive_request(target, "", topic)
    target.record_frames("blank group", await client.receive(request))
    request = receive_request(target, group, topic)
    request.filter_expression.type = pb.SQL
    request.filter_expression.expression = "a >"
    target.record_frames("bad sql filter", await client.receive(request))


@scenario
async def receive_and_ack(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    sender = await producer(target, topic)
    await _send(sender, message(target, topic, 0), message(target, topic, 1))
    client = await consumer(target, group, topic)
    frames = await receive_until(client, receive_request(target, group, topic), 2)
    target.record_frames("receive two", frames)
    got = received_messages(frames)
    first = got[0].system_properties
    ack = spb.AckMessageRequest(
        group=_resource(group),
        topic=_resource(topic),
        entries=[spb.AckMessageEntry(message_id=first.message_id, receipt_handle=first.receipt_handle)],
    )
    target.record("ack good handle", await client.unary("AckMessage", ack))
    bad = spb.AckMessageRequest(
        group=_resource(group),
        topic=_resource(topic),
        entries=[spb.AckMessageEntry(message_id=first.message_id, receipt_handle="not-a-handle")],
    )
    target.record("ack bad handle", await client.unary("AckMessage", bad))
    second = got[1].system_properties if len(got) > 1 else first
    change = spb.ChangeInvisibleDurationRequest(
        group=_resource(group),
        topic=_resource(topic),
        receipt_handle=second.receipt_handle,
        invisible_duration=Duration(seconds=1),
        message_id=second.message_id,
    )
    changed = await client.unary("ChangeInvisibleDuration", change)
    target.record("change invisible duration", changed)
    bad_change = spb.ChangeInvisibleDurationRequest(
        group=_resource(group),
        topic=_resource(topic),
        receipt_handle="not-a-handle",
        invisible_duration=Duration(seconds=1),
        message_id=second.message_id,
    )
    target.record(
        "change invisible duration bad handle", await client.unary("ChangeInvisibleDuration", bad_change)
    )
    # The second message comes back after its new invisible time, a second delivery: revived
    # through the group's pop retry topic, and acknowledged with the handle it came back with.
    await asyncio.sleep(1.5)
    frames = await receive_until(client, receive_request(target, group, topic), 1)
    target.record_frames("receive again", frames)
    again = received_messages(frames)
    if again:
        revived = again[0].system_properties
        change.receipt_handle = revived.receipt_handle
        change.message_id = revived.message_id
        change.invisible_duration.CopyFrom(Duration(seconds=30))
        changed = await client.unary("ChangeInvisibleDuration", change)
        target.record("change invisible duration of revived", changed)
        handle = getattr(changed, "receipt_handle", "") or revived.receipt_handle
        ack.entries[0].CopyFrom(spb.AckMessageEntry(message_id=revived.message_id, receipt_handle=handle))
        target.record("ack revived", await client.unary("AckMessage", ack))


@scenario
async def forward_to_dead_letter_queue(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    sender = await producer(target, topic)
    await _send(sender, message(target, topic, 0))
    client = await consumer(target, group, topic)
    frames = await receive_until(client, receive_request(target, group, topic), 1)
    got = received_messages(frames)
    target.record("received", frames[-1] if frames else spb.ReceiveMessageResponse())
    system = got[0].system_properties if got else pb.SystemProperties()
    forward = spb.ForwardMessageToDeadLetterQueueRequest(
        group=_resource(group),
        topic=_resource(topic),
        receipt_handle=system.receipt_handle,
        message_id=system.message_id,
        delivery_attempt=1,
        max_delivery_attempts=16,
    )
    target.record("forward", await client.unary("ForwardMessageToDeadLetterQueue", forward))
    forward.receipt_handle = "not-a-handle"
    target.record("forward bad handle", await client.unary("ForwardMessageToDeadLetterQueue", forward))


@scenario
async def offsets_and_pull(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    sender = await producer(target, topic)
    await _send(sender, message(target, topic, 0))
    client = await consumer(target, group, topic)
    queue = pb.MessageQueue(
        topic=_resource(topic),
        id=0,
        permission=pb.READ_WRITE,
        broker=pb.Broker(name="broker-a", id=0, endpoints=target.endpoints),
    )
    request = spb.QueryOffsetRequest(message_queue=queue, query_offset_policy=pb.END)
    await target.record_call("query offset end", client.unary("QueryOffset", request))
    update = spb.UpdateOffsetRequest(group=_resource(group), message_queue=queue, offset=1)
    await target.record_call("update offset", client.unary("UpdateOffset", update))
    get = spb.GetOffsetRequest(group=_resource(group), message_queue=queue)
    await target.record_call("get offset", client.unary("GetOffset", get))
    pull = spb.PullMessageRequest(
        group=_resource(group),
        message_queue=queue,
        offset=0,
        batch_size=4,
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        long_polling_timeout=Duration(seconds=1),
    )

    async def pull_frames() -> spb.PullMessageResponse:
        call = target.stub.PullMessage(pull, metadata=client.metadata, timeout=15)
        frames = [frame async for frame in call]
        return frames[0] if frames else spb.PullMessageResponse()

    await target.record_call("pull, first frame", pull_frames())
    lite = spb.SyncLiteSubscriptionRequest(topic=_resource(topic), group=_resource(group))
    await target.record_call("sync lite subscription", client.unary("SyncLiteSubscription", lite))


@scenario
async def receive_fifo(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic, queues=2, message_type="FIFO")
    sender = await producer(target, topic)
    for index in range(2):
        await _send(sender, message(target, topic, index, kind=pb.FIFO, message_group="order-1"))
    client = await consumer(target, group, topic, fifo=True)
    request = spb.QueryAssignmentRequest(
        topic=_resource(topic), group=_resource(group), endpoints=target.endpoints
    )
    target.record("assignment of a fifo group", await client.unary("QueryAssignment", request))
    # A FIFO group gets one message group's messages in order, the next only after an ack.
    frames = await receive_until(client, receive_request(target, group, topic, batch=4), 1)
    target.record_frames("receive", frames)


@scenario
async def receive_typed(target: GrpcTarget) -> None:
    delay_topic = target.name_of("delay")
    transaction_topic = target.name_of("tx")
    group = target.name_of("g")
    await target.create_topic(delay_topic, message_type="DELAY")
    await target.create_topic(transaction_topic, message_type="TRANSACTION")
    sender = await producer(target, delay_topic, transaction_topic)
    due = Timestamp()
    due.FromMilliseconds(int(time.time() * 1000) + 1_000)
    await _send(sender, message(target, delay_topic, 0, kind=pb.DELAY, delivery_timestamp=due))
    half = await _send(sender, message(target, transaction_topic, 1, kind=pb.TRANSACTION))
    end = spb.EndTransactionRequest(
        topic=_resource(transaction_topic),
        message_id=half.entries[0].message_id,
        transaction_id=half.entries[0].transaction_id,
        resolution=pb.COMMIT,
        source=pb.SOURCE_CLIENT,
    )
    await sender.unary("EndTransaction", end)
    client = await consumer(target, group, delay_topic)
    frames = await receive_until(client, receive_request(target, group, delay_topic), 1)
    target.record_frames("timed message when due", frames)
    frames = await receive_until(client, receive_request(target, group, transaction_topic), 1)
    target.record_frames("committed transactional message", frames)


@scenario
async def receive_bad_durations(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    await target.create_topic(topic)
    sender = await producer(target, topic)
    await _send(sender, message(target, topic, 0))
    client = await consumer(target, group, topic)
    request = receive_request(target, group, topic, invisible_s=13 * 3600)
    target.record_frames("invisible duration over 12 h", await client.receive(request))
    request = receive_request(target, group, topic, invisible_s=1)
    request.invisible_duration.seconds = 0
    target.record_frames("invisible duration 0", await client.receive(request))
    frames = await receive_until(client, receive_request(target, group, topic), 1)
    got = received_messages(frames)
    system = got[0].system_properties if got else pb.SystemProperties()
    change = spb.ChangeInvisibleDurationRequest(
        group=_resource(group),
        topic=_resource(topic),
        receipt_handle=system.receipt_handle,
        invisible_duration=Duration(seconds=13 * 3600),
        message_id=system.message_id,
    )
    target.record(
        "change invisible duration over 12 h", await client.unary("ChangeInvisibleDuration", change)
    )


@scenario
async def send_bad_properties(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    await target.create_topic(topic, message_type="FIFO")
    client = await producer(target, topic)
    long_group = message(target, topic, 0, kind=pb.FIFO, message_group="g" * 200)
    target.record("message group of 200 characters", await _send(client, long_group))
    big = message(target, topic, 1, kind=pb.FIFO, message_group="g1")
    big.user_properties["big"] = "v" * (17 * 1024)
    target.record("properties over 16 KiB", await _send(client, big))
    blank_key = message(target, topic, 2, kind=pb.FIFO, message_group="g1")
    del blank_key.system_properties.keys[:]
    blank_key.system_properties.keys.append(" ")
    target.record("blank key", await _send(client, blank_key))
    long_topic = message(target, "t" * 200, 3, kind=pb.FIFO, message_group="g1")
    target.record("topic of 200 characters", await _send(client, long_topic))


@scenario
async def ack_and_end_edge_cases(target: GrpcTarget) -> None:
    topic = target.name_of("t")
    group = target.name_of("g")
    tx_topic = target.name_of("tx")
    await target.create_topic(topic)
    await target.create_topic(tx_topic, message_type="TRANSACTION")
    client = await consumer(target, group, topic)
    empty = spb.AckMessageRequest(group=_resource(group), topic=_resource(topic))
    target.record("ack without entries", await client.unary("AckMessage", empty))
    sender = await producer(target, tx_topic)
    half = await _send(sender, message(target, tx_topic, 0, kind=pb.TRANSACTION))
    end = spb.EndTransactionRequest(
        topic=_resource(tx_topic),
        message_id=half.entries[0].message_id,
        transaction_id=half.entries[0].transaction_id,
        resolution=pb.TRANSACTION_RESOLUTION_UNSPECIFIED,
        source=pb.SOURCE_CLIENT,
    )
    target.record("end with no resolution", await sender.unary("EndTransaction", end))
    end.resolution = pb.ROLLBACK
    target.record("rollback", await sender.unary("EndTransaction", end))
