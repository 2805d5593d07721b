"""``mqadmin``'s message verbs: look messages up, print them, send and consume, show traces.

A message is printed as ``mqadmin printMsg`` prints it (``Topic:``, ``Tags:``, ... lines);
``queryMsgTraceById`` prints ``mqadmin queryMsgTraceById``'s two blocks, the sends (Pub) and,
per consumer group, the consumptions (SubAfter), each with its time, cost and status.
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Sequence

from orbitmq.cli._render import Output, format_ms
from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.client.selector import MessageSelector
from orbitmq.errors import ClientError, OrbitError, QueryNotFoundError
from orbitmq.model.message import Message, MessageExt, MessageQueue
from orbitmq.protocol.codes import ResponseCode

__all__ = [
    "consume_message",
    "print_msg",
    "query_msg_by_id",
    "query_msg_by_key",
    "query_msg_by_offset",
    "query_msg_trace_by_id",
    "send_message",
]

TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"


def _out(args: argparse.Namespace) -> Output:
    return Output(bool(getattr(args, "json", False)))


def message_document(message: MessageExt) -> dict[str, object]:
    """A message as JSON: its ids, position, times, hosts, properties and body (UTF-8 or hex)."""
    try:
        body: str = message.body.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        body, encoding = message.body.hex(), "hex"
    return {
        "msgId": message.msg_id,
        "offsetMsgId": message.offset_msg_id,
        "topic": message.topic,
        "tags": message.tags,
        "keys": message.keys,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.commit_log_offset,
        "reconsumeTimes": message.reconsume_times,
        "bornTimestamp": message.born_timestamp,
        "storeTimestamp": message.store_timestamp,
        "bornHost": f"{message.born_host[0]}:{message.born_host[1]}",
        "storeHost": f"{message.store_host[0]}:{message.store_host[1]}",
        "sysFlag": message.sys_flag,
        "properties": message.properties,
        "body": body,
        "bodyEncoding": encoding,
    }


def _print_message(out: Output, message: MessageExt) -> None:
    document = message_document(message)
    values = {
        "OffsetID": document["offsetMsgId"],
        "MsgId": document["msgId"],
        "Topic": document["topic"],
        "Tags": f"[{message.tags or ''}]",
        "Keys": f"[{' '.join(message.keys)}]",
        "Queue ID": message.queue_id,
        "Queue Offset": message.queue_offset,
        "CommitLog Offset": message.commit_log_offset,
        "Reconsume Times": message.reconsume_times,
        "Born Timestamp": format_ms(message.born_timestamp),
        "Store Timestamp": format_ms(message.store_timestamp),
        "Born Host": document["bornHost"],
        "Store Host": document["storeHost"],
        "System Flag": message.sys_flag,
        "Properties": message.properties,
        "Message Body": document["body"],
    }
    width = max(len(key) for key in values) + 2
    for key, value in values.items():
        out.line(f"{key + ':':<{width}}{value}")


def _print_messages(out: Output, messages: Sequence[MessageExt]) -> None:
    if out.as_json:
        out.json([message_document(message) for message in messages])
        return
    for index, message in enumerate(messages):
        if index:
            out.line("")
        _print_message(out, message)


async def query_msg_by_id(admin: AdminClient, args: argparse.Namespace) -> None:
    messages = await admin.query_message_by_id(args.msg_id, args.topic)
    if not messages:
        raise QueryNotFoundError(
            ResponseCode.QUERY_NOT_FOUND,
            f"no message with id {args.msg_id}{f' in topic {args.topic}' if args.topic else ''}",
        )
    out = _out(args)
    if args.group and args.client_id:
        # mqadmin queryMsgById -g -d: have one consumer consume it now (resend from a DLQ).
        result = await admin.consume_message_directly(args.group, args.client_id, messages[0].offset_msg_id)
        document = {
            "consumeResult": result.consume_result,
            "remark": result.remark,
            "spentTimeMills": result.spent_time_mills,
        }
        if out.as_json:
            out.json({"message": message_document(messages[0]), "consumeDirectly": document})
            return
        _print_message(out, messages[0])
        out.line(f"consumed directly by {args.client_id}: {result.consume_result} ({result.remark})")
        return
    _print_messages(out, messages)


async def query_msg_by_key(admin: AdminClient, args: argparse.Namespace) -> None:
    messages = await admin.query_messages(
        args.topic, args.key, max_num=args.max_num, begin_ms=args.begin or 0, end_ms=args.end
    )
    rows = [(m.msg_id, m.queue_id, m.queue_offset, format_ms(m.store_timestamp)) for m in messages]
    _out(args).table(
        ("message_id", "queue", "offset", "store_time"),
        rows,
        document=[message_document(message) for message in messages],
    )


async def query_msg_by_offset(admin: AdminClient, args: argparse.Namespace) -> None:
    message = await admin.message_at(MessageQueue(args.topic, args.broker_name, args.queue_id), args.offset)
    if message is None:
        raise QueryNotFoundError(
            ResponseCode.QUERY_NOT_FOUND,
            f"no message at offset {args.offset} of {args.topic} queue {args.queue_id} on {args.broker_name}",
        )
    _print_messages(_out(args), [message])


def _trace_time(timestamp_ms: int) -> str:
    if timestamp_ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


async def query_msg_trace_by_id(admin: AdminClient, args: argparse.Namespace) -> None:
    found = await admin.query_trace(args.msg_id, args.trace_topic)
    out = _out(args)
    if out.as_json:
        out.json(
            [
                {
                    "type": record.trace_type,
                    "group": record.group,
                    "clientHost": carrier.born_host[0],
                    "timestamp": record.timestamp,
                    "costMs": record.cost_ms,
                    "success": record.success,
                    "requestId": record.request_id,
                    "retryTimes": record.retry_times,
                    "contextCode": record.context_code,
                    "topic": record.topic,
                    "tags": record.tags,
                    "keys": record.keys,
                    "storeHost": record.store_host,
                    "transactionState": record.transaction_state,
                }
                for record, carrier in found
            ]
        )
        return
    if not found:
        raise QueryNotFoundError(
            ResponseCode.QUERY_NOT_FOUND, f"no trace of message {args.msg_id} in {args.trace_topic}"
        )
    status = {True: "success", False: "failed"}
    sends = [
        (
            record.trace_type,
            record.group,
            carrier.born_host[0],
            _trace_time(record.timestamp),
            f"{record.cost_ms}ms",
            status[record.success],
        )
        for record, carrier in found
        if record.trace_type in ("Pub", "EndTransaction")
    ]
    out.print_table(("Type", "ProducerGroup", "ClientHost", "SendTime", "CostTimes", "Status"), sends)
    by_group: dict[str, list[tuple[str, str, str, str, str, str]]] = {}
    for record, carrier in found:
        if record.trace_type == "SubAfter":
            by_group.setdefault(record.group, []).append(
                (
                    "Sub",
                    record.group,
                    carrier.born_host[0],
                    _trace_time(record.timestamp),
                    f"{record.cost_ms}ms",
                    status[record.success],
                )
            )
    for group in sorted(by_group):
        out.line("")
        out.print_table(
            ("Type", "ConsumerGroup", "ClientHost", "ConsumerTime", "CostTimes", "Status"), by_group[group]
        )


async def send_message(admin: AdminClient, args: argparse.Namespace) -> None:
    message = Message(args.topic, args.body.encode("utf-8"))
    if args.tags:
        message.tags = args.tags
    if args.keys:
        message.keys = args.keys.split(" ")
    producer = Producer(
        TOOLS_PRODUCER_GROUP,
        admin.client_config.namesrv_addr,
        request_timeout_ms=admin.client_config.request_timeout_ms,
    )
    await producer.start()
    try:
        if args.broker_name is not None and args.queue_id is not None:
            wanted = MessageQueue(args.topic, args.broker_name, args.queue_id)

            def pick(queues: Sequence[MessageQueue], _message: Message, _arg: object) -> MessageQueue:
                if wanted not in queues:
                    raise ClientError(
                        f"topic {args.topic} has no writable queue {args.queue_id} on {args.broker_name}"
                    )
                return wanted

            result = await producer.send_orderly(message, None, pick)
        else:
            result = await producer.send(message)
    finally:
        await producer.shutdown()
    row = (
        result.message_queue.broker_name,
        result.message_queue.queue_id,
        result.status.value,
        result.msg_id,
    )
    _out(args).table(
        ("broker", "queue", "send_result", "msg_id"),
        [row],
        document={
            "brokerName": row[0],
            "queueId": row[1],
            "sendStatus": row[2],
            "msgId": row[3],
            "offsetMsgId": result.offset_msg_id,
            "queueOffset": result.queue_offset,
        },
    )


async def _queues(admin: AdminClient, args: argparse.Namespace) -> list[MessageQueue]:
    queues = await admin.fetch_queues(args.topic)
    if args.broker_name:
        queues = [mq for mq in queues if mq.broker_name == args.broker_name]
    if args.queue_id is not None:
        queues = [mq for mq in queues if mq.queue_id == args.queue_id]
    if not queues:
        raise ClientError(
            f"topic {args.topic} has no such queue ({args.broker_name or 'any broker'}, {args.queue_id})"
        )
    return queues


async def consume_message(admin: AdminClient, args: argparse.Namespace) -> None:
    """Read up to ``-c`` messages from each chosen queue (from ``-o``, or from ``-s`` time); no
    offset is committed."""
    if args.topic.startswith("%DLQ%"):
        from orbitmq.cli._verbs_dlq import consume_dead_letters

        return await consume_dead_letters(admin, args)
    found: list[MessageExt] = []
    for mq in await _queues(admin, args):
        if args.offset is not None:
            start = args.offset
        elif args.begin is not None:
            start = await admin.search_offset(mq, args.begin)
        else:
            start = await admin.min_offset(mq)
        end = await admin.search_offset(mq, args.end) if args.end is not None else None
        found += await admin.messages_from(mq, start, args.count - len(found), end)
        if len(found) >= args.count:
            break
    _print_messages(_out(args), found)


async def print_msg(admin: AdminClient, args: argparse.Namespace) -> None:
    """Every message of the topic stored between ``-b`` and ``-e`` (whole queues by default)."""
    if args.topic.startswith("%DLQ%"):
        from orbitmq.cli._verbs_dlq import print_dead_letters

        return await print_dead_letters(admin, args)
    selector = MessageSelector.by_tag(args.sub_expression)
    found: list[MessageExt] = []
    begin = args.begin if args.begin is not None else 0
    end_ms = args.end if args.end is not None else int(time.time() * 1000) + 60_000
    for mq in await admin.fetch_queues(args.topic):
        start = await admin.search_offset(mq, begin)
        end = await admin.search_offset(mq, end_ms)
        try:
            messages = await admin.messages_from(mq, start, args.max_count, end)
        except OrbitError as exc:
            raise ClientError(f"reading {mq} failed: {exc}") from exc
        found += [m for m in messages if selector.message_filter.matches_properties(m.properties)]
    _print_messages(_out(args), found)
