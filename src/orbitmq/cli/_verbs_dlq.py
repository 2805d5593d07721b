"""A group's dead letters from the command line (see :mod:`orbitmq.client.dead_letters`)::

    orbitmq admin dlqList -g GROUP [-b BEGIN] [-e END] [-p PAGE] [-z PAGE_SIZE]
    orbitmq admin dlqResend -g GROUP (-i MSG_ID ... | --all) [--direct [-c CLIENT_ID]]
    orbitmq admin dlqExport -g GROUP [-b BEGIN] [-e END] [-f json|csv] [-o FILE]

``printMsg`` and ``consumeMessage`` on a ``%DLQ%`` topic read it the same way (the topic is
write-only, so a pull gets nothing). ``dlqResend`` sends a copy to the message's original
topic; with ``--direct`` one online consumer of the group consumes it instead
(CONSUME_MESSAGE_DIRECTLY, rocketmq-dashboard's resend).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from orbitmq.cli._render import Output, format_ms
from orbitmq.cli._verbs_messages import TOOLS_PRODUCER_GROUP, _print_messages
from orbitmq.client.admin import AdminClient
from orbitmq.client.dead_letters import DLQ_PREFIX, DeadLetters, export_csv, export_json, message_row
from orbitmq.client.producer import Producer
from orbitmq.errors import ClientError, QueryNotFoundError
from orbitmq.model.message import MessageConst, MessageExt
from orbitmq.protocol.codes import ResponseCode

__all__ = ["add_dlq_verbs", "consume_dead_letters", "print_dead_letters"]

Command = Callable[[AdminClient, argparse.Namespace], Awaitable[None]]


def _out(args: argparse.Namespace) -> Output:
    return Output(bool(getattr(args, "json", False)))


async def dlq_list(admin: AdminClient, args: argparse.Namespace) -> None:
    page = await DeadLetters(admin).page(
        args.group, begin_ms=args.begin or 0, end_ms=args.end, page=args.page, page_size=args.page_size
    )
    out = _out(args)
    if out.as_json:
        out.json(
            {
                "group": page.group,
                "topic": page.topic,
                "total": page.total,
                "page": page.page,
                "pages": page.pages,
                "messages": [message_row(m) for m in page.messages],
            }
        )
        return
    if not page.messages:
        out.line(page.explanation)
        return
    rows = [
        (
            m.msg_id,
            m.properties.get(MessageConst.RETRY_TOPIC, ""),
            m.tags or "",
            " ".join(m.keys),
            format_ms(m.store_timestamp),
            m.reconsume_times,
            len(m.body),
        )
        for m in page.messages
    ]
    out.print_table(("msg_id", "original_topic", "tags", "keys", "stored", "reconsumed", "bytes"), rows)
    out.line(
        f"page {page.page} of {page.pages}: {page.total} dead letters of group {page.group} in the range"
    )


async def _chosen(dead: DeadLetters, args: argparse.Namespace) -> list[MessageExt]:
    if args.all:
        return [m async for batch in dead.every(args.group) for m in batch]
    found = []
    for msg_id in args.msg_id:
        message = await dead.find(args.group, msg_id)
        if message is None:
            raise QueryNotFoundError(
                ResponseCode.QUERY_NOT_FOUND, f"no dead letter {msg_id} in {DLQ_PREFIX}{args.group}"
            )
        found.append(message)
    return found


async def dlq_resend(admin: AdminClient, args: argparse.Namespace) -> None:
    if not args.all and not args.msg_id:
        raise ClientError("name the dead letters to resend with -i MSG_ID, or pass --all")
    dead = DeadLetters(admin)
    messages = await _chosen(dead, args)
    results: list[dict[str, object]] = []
    if args.direct:
        for message in messages:
            client_id, answer = await dead.consume_directly(args.group, message, args.client_id)
            results.append({"msgId": message.msg_id, "client": client_id, "result": answer.consume_result})
    else:
        config = admin.client_config
        producer = Producer(
            TOOLS_PRODUCER_GROUP,
            config.namesrv_addr,
            request_timeout_ms=config.request_timeout_ms,
            access_key=config.access_key,
            secret_key=config.secret_key,
        )
        await producer.start()
        try:
            for message in messages:
                new_id = await dead.resend(producer, message)
                results.append(
                    {
                        "msgId": message.msg_id,
                        "to": message.properties.get(MessageConst.RETRY_TOPIC, ""),
                        "newMsgId": new_id,
                    }
                )
        except asyncio.CancelledError:  # Ctrl-C: say which were resent, so none is resent twice
            _print_resent(_out(args), args, results)
            print(f"dlq resend: {len(results)} of {len(messages)} resent before Ctrl-C", file=sys.stderr)
            raise
        finally:
            await producer.shutdown()
    _print_resent(_out(args), args, results)


def _print_resent(out: Output, args: argparse.Namespace, results: list[dict[str, object]]) -> None:
    if out.as_json:
        out.json(results)
        return
    for row in results:
        if args.direct:
            out.line(f"{row['msgId']}: consumed by {row['client']}: {row['result']}")
        else:
            out.line(f"{row['msgId']}: resent to {row['to']} as {row['newMsgId']}")
    out.line(f"{len(results)} dead letters resent")


async def dlq_export(admin: AdminClient, args: argparse.Namespace) -> None:
    dead = DeadLetters(admin)
    rows = [
        message_row(m)
        async for batch in dead.every(args.group, begin_ms=args.begin or 0, end_ms=args.end)
        for m in batch
    ]
    data = export_json(rows) if args.format == "json" else export_csv(rows).encode()
    if args.output in (None, "-"):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    Path(args.output).write_bytes(data)
    print(f"{len(rows)} dead letters of group {args.group} written to {args.output}", file=sys.stderr)


async def print_dead_letters(admin: AdminClient, args: argparse.Namespace) -> None:
    """``printMsg -t %DLQ%GROUP``: every dead letter in the range (read past the write-only perm)."""
    dead = DeadLetters(admin)
    found = [
        m
        async for batch in dead.every(
            args.topic, begin_ms=args.begin or 0, end_ms=args.end, limit=args.max_count
        )
        for m in batch
    ]
    _print_messages(_out(args), found)


async def consume_dead_letters(admin: AdminClient, args: argparse.Namespace) -> None:
    """``consumeMessage -t %DLQ%GROUP``: up to ``-c`` dead letters (no offset committed)."""
    dead = DeadLetters(admin)
    found = [
        m
        async for batch in dead.every(args.topic, begin_ms=args.begin or 0, end_ms=args.end, limit=args.count)
        for m in batch
        if (args.queue_id is None or m.queue_id == args.queue_id)
        and (args.offset is None or m.queue_offset >= args.offset)
    ]
    _print_messages(_out(args), found)


def add_dlq_verbs(
    groups: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    parse_time_ms: Callable[[str], int],
) -> None:
    """Add ``dlqList``, ``dlqResend`` and ``dlqExport`` to ``groups``."""

    def verb(name: str, help_text: str, command: Command) -> argparse.ArgumentParser:
        parser = groups.add_parser(name, parents=[common], help=help_text)
        parser.set_defaults(command=command)
        parser.add_argument("-g", "--group", required=True, help="consumer group (or its %%DLQ%% topic)")
        return parser

    parser = verb("dlqList", "a page of a group's dead letters, newest first", dlq_list)
    parser.add_argument("-b", "--begin", type=parse_time_ms, help="stored at or after")
    parser.add_argument("-e", "--end", type=parse_time_ms, help="stored before")
    parser.add_argument("-p", "--page", type=int, default=1, help="page number (1)")
    parser.add_argument("-z", "--page-size", type=int, default=64, help="messages per page (64)")
    parser = verb("dlqResend", "resend dead letters to their original topic", dlq_resend)
    parser.add_argument(
        "-i", "--msg-id", action="append", default=[], help="a dead letter's msgId (repeatable)"
    )
    parser.add_argument("--all", action="store_true", help="every dead letter of the group")
    parser.add_argument(
        "--direct", action="store_true", help="have an online consumer consume it (CONSUME_MESSAGE_DIRECTLY)"
    )
    parser.add_argument("-c", "--client-id", help="with --direct: this consumer (default: the first online)")
    parser = verb("dlqExport", "write a group's dead letters as JSON or CSV", dlq_export)
    parser.add_argument("-b", "--begin", type=parse_time_ms, help="stored at or after")
    parser.add_argument("-e", "--end", type=parse_time_ms, help="stored before")
    parser.add_argument(
        "-f", "--format", choices=("json", "csv"), default="json", help="json (default) or csv"
    )
    parser.add_argument("-o", "--output", help="file to write (default: standard output)")
