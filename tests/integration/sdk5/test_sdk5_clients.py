"""The official RocketMQ 5.x Python SDK, unmodified, against OrbitMQ's gRPC proxy.

Goal: every producer and consumer behaviour a 5.x user relies on, end to end through the real
SDK (a child process with its own venv): normal, async, FIFO and delayed sends; transactions
committed, rolled back and recovered through the server's check; SimpleConsumer receive,
change invisible duration and ack; PushConsumer with a nack redelivered as attempt 2; max
attempts -> DLQ; an ack after the handle expired; a consumer killed mid-batch. Each test uses
its own topic and group on one shared standalone (see conftest.py for its fast timings).
"""

from __future__ import annotations

import asyncio
import time

from orbitmq.client import AdminClient
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import QueryMessageRequestHeader
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient
from tests.integration.sdk5.conftest import broker_addr
from tests.support.processes import ServerProcess, create_topic
from tests.support.sdk5 import Event, Sdk5

INVALID_RECEIPT_HANDLE = 40013
TYPE_NORMAL, TYPE_FIFO, TYPE_DELAY = 1, 2, 3


def body_hex(seq: int, size: int = 64) -> str:
    return bytes(((seq * 7 + i) % 255) + 1 for i in range(size)).hex()


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [event for event in events if event["event"] == kind]


def test_sdk5_producers_send_normal_async_fifo_and_delayed_messages(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Produce", "CG_SDK5_PRODUCE"
    # Normal, FIFO and delayed messages in one topic: a MIXED one, as RocketMQ 5's proxy requires.
    create_topic(broker_addr(grpc_standalone), topic, 4, attributes="+message.type=MIXED")
    sent = sdk5.run("produce", "--topic", topic, "--count", "3", "--tag", "TagA")
    sent += sdk5.run("produce", "--topic", topic, "--count", "3", "--seq-start", "3", "--mode", "async")
    sent += sdk5.run("produce", "--topic", topic, "--count", "6", "--seq-start", "6", "--mode", "fifo")
    delayed = sdk5.run("produce", "--topic", topic, "--count", "2", "--seq-start", "12", "--mode", "delay",
                       "--delay-s", "3")  # fmt: skip
    sent_ms = max(int(event["at_ms"]) for event in delayed)  # type: ignore[call-overload]
    assert len(of_kind(sent + delayed, "sent")) == 14
    assert len({event["message_id"] for event in sent + delayed}) == 14
    # Receive, extend each message's invisibility, then ack it.
    events = sdk5.run("simple", "--topic", topic, "--group", group, "--count", "14", "--change-s", "20",
                      "--max-wait-s", "30")  # fmt: skip
    received = of_kind(events, "received")
    assert sorted(int(e["seq"]) for e in received) == list(range(14))  # type: ignore[call-overload]
    assert len(of_kind(events, "acked")) == 14 and len(of_kind(events, "changed")) == 14
    assert not of_kind(events, "settle_failed")
    by_seq = {int(e["seq"]): e for e in received}  # type: ignore[call-overload]
    for seq, event in by_seq.items():
        assert event["body_hex"] == body_hex(seq)
        assert event["props"] == {"seq": str(seq), "origin": "sdk5"}
        assert event["keys"] == [f"key-{seq}"]
        assert event["attempt"] == 1 and not event["corrupted"]
    assert [by_seq[seq]["tag"] for seq in range(3)] == ["TagA"] * 3
    assert {by_seq[seq]["type"] for seq in range(6)} == {TYPE_NORMAL}
    assert {by_seq[seq]["type"] for seq in range(6, 12)} == {TYPE_FIFO}
    assert {by_seq[seq]["type"] for seq in (12, 13)} == {TYPE_DELAY}
    # Python sends the due time in whole seconds; it is never delivered early.
    assert min(int(by_seq[seq]["at_ms"]) for seq in (12, 13)) >= sent_ms + 1_500  # type: ignore[call-overload]
    # Each FIFO group comes in the order it was sent.
    for name in ("group-0", "group-1"):
        order = [int(e["seq"]) for e in received if e["group"] == name]  # type: ignore[call-overload]
        assert order == sorted(order) and len(order) == 3
    # Everything was acked: the group gets nothing more.
    again = sdk5.run("simple", "--topic", topic, "--group", group, "--count", "1", "--await-s", "2",
                     "--max-wait-s", "2")  # fmt: skip
    assert of_kind(again, "received") == []


def test_sdk5_transactions_commit_rollback_and_orphan_recovered_by_check(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Tx", "CG_SDK5_TX"
    create_topic(broker_addr(grpc_standalone), topic, 2, attributes="+message.type=TRANSACTION")
    events = sdk5.run("transaction", "--topic", topic, "--decisions", "commit,rollback,orphan",
                      "--check-answer", "commit", "--wait-s", "20")  # fmt: skip
    sent = {int(e["seq"]): e for e in of_kind(events, "sent")}  # type: ignore[call-overload]
    assert set(sent) == {0, 1, 2} and all(e["transaction_id"] for e in sent.values())
    checked = of_kind(events, "checked")
    # Only the orphan is asked about, and it carries its body.
    assert [e["message_id"] for e in checked] == [sent[2]["message_id"]]
    assert checked[0]["body_hex"] == body_hex(2)
    received = of_kind(
        sdk5.run("simple", "--topic", topic, "--group", group, "--count", "3", "--await-s", "1",
                 "--max-wait-s", "15", "--stop-when-empty"),
        "received",
    )  # fmt: skip
    # The commit and the checked orphan are delivered; the rollback never is.
    assert sorted(int(e["seq"]) for e in received) == [0, 2]  # type: ignore[call-overload]


def test_sdk5_push_consumer_nack_is_redelivered_as_attempt_2(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Push", "CG_SDK5_PUSH"
    create_topic(broker_addr(grpc_standalone), topic, 2)
    sdk5.run("produce", "--topic", topic, "--count", "3")
    consumer = sdk5.start("push", "--topic", topic, "--group", group, "--fail-times", "1",
                          "--stop-after", "3", "--max-wait-s", "40")  # fmt: skip
    events = consumer.wait_for(lambda ev: bool(of_kind(ev, "done")), 45)
    received = of_kind(events, "received")
    attempts: dict[int, list[int]] = {}
    for event in received:
        attempts.setdefault(int(event["seq"]), []).append(int(event["attempt"]))  # type: ignore[call-overload]
    # Every message failed once (a nack: ChangeInvisibleDuration 1 s) and came back as attempt 2.
    assert attempts == {0: [1, 2], 1: [1, 2], 2: [1, 2]}
    assert of_kind(events, "done")[0]["consumed"] == 3


def test_sdk5_max_attempts_sends_the_message_to_the_dlq(sdk5: Sdk5, grpc_standalone: ServerProcess) -> None:
    topic, group = "Sdk5Dlq", "CG_SDK5_DLQ"
    create_topic(broker_addr(grpc_standalone), topic, 1)
    asyncio.run(_update_group(grpc_standalone.addr, group, retry_max_times=2))
    sent = sdk5.run("produce", "--topic", topic, "--count", "1")
    # Nack every delivery (visible again after 1 s): retryMaxTimes=2 allows 3 deliveries.
    events = sdk5.run("simple", "--topic", topic, "--group", group, "--count", "4", "--change-s", "1",
                      "--settle", "nack", "--await-s", "2", "--max-wait-s", "15", "--stop-when-empty")  # fmt: skip
    assert [int(e["attempt"]) for e in of_kind(events, "received")] == [1, 2, 3]  # type: ignore[call-overload]
    dead = _query_by_key(broker_addr(grpc_standalone), f"%DLQ%{group}", "key-0")
    assert len(dead) == 1
    assert dead[0].body.hex() == body_hex(0)
    assert dead[0].uniq_key == sent[0]["message_id"]
    assert dead[0].properties["RETRY_TOPIC"] == topic and dead[0].reconsume_times == 3


def test_sdk5_ack_after_the_handle_expired_is_invalid_receipt_handle(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Expired", "CG_SDK5_EXPIRED"
    create_topic(broker_addr(grpc_standalone), topic, 1)
    sdk5.run("produce", "--topic", topic, "--count", "1")
    events = sdk5.run("simple", "--topic", topic, "--group", group, "--invisible-s", "1",
                      "--ack-after-s", "2", "--max-wait-s", "10")  # fmt: skip
    failed = of_kind(events, "settle_failed")
    assert len(failed) == 1 and failed[0]["code"] == INVALID_RECEIPT_HANDLE, events
    # The ack did not count: the message is delivered again, as attempt 2.
    again = of_kind(sdk5.run("simple", "--topic", topic, "--group", group, "--max-wait-s", "10"), "received")
    assert [int(e["attempt"]) for e in again] == [2]  # type: ignore[call-overload]


def test_sdk5_push_consumer_killed_mid_batch_has_its_messages_redelivered(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Killed", "CG_SDK5_KILLED"
    create_topic(broker_addr(grpc_standalone), topic, 2)
    sdk5.run("produce", "--topic", topic, "--count", "4")
    # A slow consumer takes the batch (auto-renewed, so it would hold it for as long as it lives).
    slow = sdk5.start("push", "--topic", topic, "--group", group, "--sleep-s", "60", "--max-wait-s", "60")
    slow.wait_for(lambda ev: len(of_kind(ev, "received")) == 4, 30)
    started = time.monotonic()
    slow.kill()
    fresh = sdk5.start("push", "--topic", topic, "--group", group, "--stop-after", "4", "--max-wait-s", "40")
    events = fresh.wait_for(lambda ev: bool(of_kind(ev, "done")), 45)
    received = of_kind(events, "received")
    assert sorted(int(e["seq"]) for e in received) == [0, 1, 2, 3]  # type: ignore[call-overload]
    # Each is a later delivery than the killed consumer's (a pop the killed client left polling
    # may have taken them once more on the way: at least once, never lost).
    assert min(int(e["attempt"]) for e in received) >= 2  # type: ignore[call-overload]
    # Released when the killed client's stream broke, not after the 60 s invisible time.
    assert time.monotonic() - started < 30


def test_sdk5_fifo_group_consumes_each_message_group_in_order(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Fifo", "CG_SDK5_FIFO"
    create_topic(broker_addr(grpc_standalone), topic, 2, attributes="+message.type=FIFO")
    asyncio.run(_update_group(grpc_standalone.addr, group, consume_message_orderly=True))
    sdk5.run("produce", "--topic", topic, "--count", "8", "--mode", "fifo", "--groups", "2")
    # Every first delivery fails: the FIFO push consumer retries it locally before moving on.
    consumer = sdk5.start("push", "--topic", topic, "--group", group, "--fail-times", "1",
                          "--stop-after", "8", "--max-wait-s", "60")  # fmt: skip
    events = consumer.wait_for(lambda ev: bool(of_kind(ev, "done")), 65)
    for name in ("group-0", "group-1"):
        seen = [(int(e["seq"]), int(e["attempt"])) for e in of_kind(events, "received") if e["group"] == name]  # type: ignore[call-overload]
        seqs = [seq for seq, _ in seen]
        # One message of a group at a time, in send order, each failing once before its success.
        expected = sorted(set(seqs))
        assert len(expected) == 4
        assert seqs == [seq for seq in expected for _ in (0, 1)], seen


async def _update_group(namesrv: str, group: str, **settings: object) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.update_subscription_group(group, **settings)  # type: ignore[arg-type]


def _query_by_key(addr: str, topic: str, key: str) -> list:  # type: ignore[type-arg]
    async def query() -> list:  # type: ignore[type-arg]
        client = RemotingClient()
        try:
            header = QueryMessageRequestHeader(
                topic=topic, key=key, max_num=32, begin_timestamp=0, end_timestamp=2**62
            )
            request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext())
            response = await client.invoke(addr, request, 10_000)
        finally:
            await client.close()
        if response.code != ResponseCode.SUCCESS:
            return []
        return decode_stored_messages(response.body)

    return asyncio.run(query())


def test_sdk5_recall_cancels_a_delayed_message_before_it_is_due(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Recall", "CG_SDK5_RECALL"
    create_topic(broker_addr(grpc_standalone), topic, 1, attributes="+message.type=DELAY")
    events = sdk5.run("recall", "--topic", topic, "--delay-s", "2")
    sent = of_kind(events, "sent")[0]
    assert of_kind(events, "recalled") == [{"event": "recalled", "message_id": sent["message_id"]}]
    # A second delayed message, due later: had the recall failed, the first would arrive first.
    sdk5.run("produce", "--topic", topic, "--mode", "delay", "--delay-s", "2", "--seq-start", "1")
    events = sdk5.run("simple", "--topic", topic, "--group", group, "--count", "1", "--await-s", "3",
                      "--max-wait-s", "8")  # fmt: skip
    received = of_kind(events, "received")
    assert [int(e["seq"]) for e in received] == [1]  # type: ignore[call-overload]


def test_sdk5_simple_consumer_with_sql92_filter_gets_only_matching_messages(
    sdk5: Sdk5, grpc_standalone: ServerProcess
) -> None:
    topic, group = "Sdk5Sql92", "CG_SDK5_SQL92"
    create_topic(broker_addr(grpc_standalone), topic, 2)
    sdk5.run("produce", "--topic", topic, "--count", "8", "--tag", "TagA")
    sdk5.run("produce", "--topic", topic, "--count", "4", "--seq-start", "8", "--tag", "TagB")
    # Every message carries seq and origin=sdk5 (the driver's user properties) and its tag.
    # Receive until a receive comes back empty, so that a message let through wrongly shows.
    events = sdk5.run("simple", "--topic", topic, "--group", group, "--count", "100", "--filter-type", "sql92",
                      "--filter", "seq >= 3 AND TAGS = 'TagA' OR seq BETWEEN 10 AND 10",
                      "--await-s", "2", "--stop-when-empty", "--max-wait-s", "20")  # fmt: skip
    received = of_kind(events, "received")
    assert sorted(int(e["seq"]) for e in received) == [3, 4, 5, 6, 7, 10]  # type: ignore[call-overload]
