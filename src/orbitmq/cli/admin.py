"""``orbitmq admin ...``: argparse over :class:`orbitmq.client.AdminClient`, printed as tables.

Two shapes of command: ``mqadmin``'s verbs with its option letters (``orbitmq admin topicList``,
``consumerProgress -g G``, ... see ``orbitmq.cli._verb_parsers``), and these noun-verb commands
(``mqadmin`` equivalents in brackets); where they overlap both run the same code::

    orbitmq admin topic create TOPIC [-q N] [-c CLUSTER] [--perm P] [--order]   [updateTopic]
    orbitmq admin topic update TOPIC [-q N] [-c CLUSTER] [--perm P] [--order|--no-order]
    orbitmq admin topic delete TOPIC [-c CLUSTER]                     [deleteTopic]
    orbitmq admin topic list                                          [topicList]
    orbitmq admin topic route TOPIC                                   [topicRoute]
    orbitmq admin topic status TOPIC                                  [topicStatus]
    orbitmq admin consumer progress GROUP [-t TOPIC]                  [consumerProgress]
    orbitmq admin consumer reset-offset GROUP TOPIC -s TIME           [resetOffsetByTime]
    orbitmq admin cluster list                                        [clusterList]
    orbitmq admin controller list -c CONTROLLERS                      [getSyncStateSet,
                                                                       getControllerMetaData]
    orbitmq admin acl update|delete|white-list|version|list ...       (see ``cli.admin_acl``)

``-n NAMESRV`` (and ``--timeout-ms``, ``--json``) go before or after the command, as with
``mqadmin``; without ``-n`` the ``NAMESRV_ADDR`` environment variable is used, else
``127.0.0.1:9876``. Tables are drawn with rich; ``--json`` prints one JSON document instead.
Against a cluster with ACL, ``--access-key`` / ``--secret-key`` (or ``ORBITMQ_ACCESS_KEY`` /
``ORBITMQ_SECRET_KEY``) sign every request; ``--tls`` connects over TLS (these go before the
command).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

import orjson

from orbitmq.cli import _verbs
from orbitmq.cli._render import Output, format_ms
from orbitmq.cli._security import add_security_arguments, security_options
from orbitmq.cli._verb_parsers import CommandParser, add_verbs
from orbitmq.cli._verbs_dlq import add_dlq_verbs
from orbitmq.cli.admin_acl import add_acl_parser
from orbitmq.client.admin import AdminClient
from orbitmq.errors import (
    BrokerResponseError,
    ConfigError,
    ConsumerNotOnlineError,
    OrbitError,
    QueryNotFoundError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.bodies import encode_topic_route

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NOT_FOUND", "EXIT_USAGE", "build_parser", "main"]

DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"
DEFAULT_TIMEOUT_MS = 5000

EXIT_FAILED = 1
"""The operation failed: a server refused it, or no server answered."""
EXIT_USAGE = 2
"""Bad command line (argparse's own status)."""
EXIT_NOT_FOUND = 3
"""The named topic, consumer group (or online member) or message does not exist."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (the shell's status for SIGINT); what was done is printed first."""
_NOT_FOUND = (TopicNotExistError, SubscriptionGroupNotExistError, ConsumerNotOnlineError, QueryNotFoundError)

_EPILOG = f"""\
name server: -n/--namesrv (before or after the command), else the NAMESRV_ADDR environment
variable, else {DEFAULT_NAMESRV_ADDR}.
output: tables; --json (before or after the command) prints one JSON document instead.
exit status: 0 done; {EXIT_FAILED} failed (refused, or no server answered); {EXIT_USAGE} bad command line;
{EXIT_NOT_FOUND} the named topic, consumer group (or online member) or message does not exist;
{EXIT_INTERRUPTED} stopped by Ctrl-C (a verb that loops or resends says what it did before it stopped).
mqadmin verbs: clusterList topicList topicRoute topicStatus updateTopic deleteTopic updateSubGroup
deleteSubGroup consumerProgress consumerConnection producerConnection consumerStatus queryMsgById
queryMsgByKey queryMsgByOffset queryMsgTraceById (or trace MSG_ID) resetOffsetByTime
skipAccumulatedMessage sendMessage consumeMessage printMsg brokerStatus statsAll getBrokerConfig
updateBrokerConfig updateKvConfig deleteKvConfig cloneGroupOffset updateTopicPerm topicClusterList
allocateMQ getNamesrvConfig updateNamesrvConfig wipeWritePerm addWritePerm getConsumerConfig
brokerConsumeStats clusterRT queryCq
dead letters: dlqList dlqResend dlqExport (printMsg and consumeMessage read %DLQ% topics too)
"""
_PERMS = {2: "write only", 4: "read only", 6: "read and write"}

_Command = Callable[[AdminClient, argparse.Namespace], Awaitable[None]]


def _out(args: argparse.Namespace) -> Output:
    return Output(bool(getattr(args, "json", False)))


def parse_time_ms(text: str) -> int:
    """``now``, epoch milliseconds, or an ISO-8601 time (local zone when none is given)."""
    if text == "now":
        return int(datetime.datetime.now().timestamp() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'now', epoch ms or an ISO-8601 time") from None
    return int(moment.astimezone().timestamp() * 1000)


# -- commands ----------------------------------------------------------------------------------


def _perm(text: str) -> int:
    try:
        perm = int(text)
    except ValueError:
        perm = -1
    if perm not in _PERMS:
        choices = ", ".join(f"{value} ({meaning})" for value, meaning in _PERMS.items())
        raise argparse.ArgumentTypeError(f"{text!r} is not a topic permission: use {choices}")
    return perm


def _print_configs(args: argparse.Namespace, configs: dict[str, TopicConfig]) -> None:
    rows = [
        (
            addr,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            str(config.order).lower(),
            ",".join(f"{key}={value}" for key, value in sorted(config.attributes.items())),
        )
        for addr, config in sorted(configs.items())
    ]
    out = _out(args)
    out.line(f"topic {args.topic}:")
    out.table(
        ("broker", "read_queues", "write_queues", "perm", "order", "attributes"),
        rows,
        document={
            addr: {
                "readQueueNums": config.read_queue_nums,
                "writeQueueNums": config.write_queue_nums,
                "perm": config.perm,
                "order": config.order,
                "attributes": dict(config.attributes),
            }
            for addr, config in sorted(configs.items())
        },
    )


async def _topic_create(admin: AdminClient, args: argparse.Namespace) -> None:
    broker_addr = getattr(args, "broker", None)
    await admin.create_topic(
        args.topic,
        args.queues,
        cluster=args.cluster,
        perm=args.perm,
        order=args.order,
        read_queue_nums=getattr(args, "read_queues", None),
        write_queue_nums=getattr(args, "write_queues", None),
        broker_addr=broker_addr,
        attributes=getattr(args, "attributes", None),
    )
    _print_configs(args, await admin.topic_configs(args.topic, cluster=args.cluster, broker_addr=broker_addr))


async def _topic_update(admin: AdminClient, args: argparse.Namespace) -> None:
    configs = await admin.update_topic(
        args.topic,
        queue_nums=args.queues,
        perm=args.perm,
        order=args.order,
        cluster=args.cluster,
        read_queue_nums=getattr(args, "read_queues", None),
        write_queue_nums=getattr(args, "write_queues", None),
        broker_addr=getattr(args, "broker", None),
        attributes=getattr(args, "attributes", None),
    )
    _print_configs(args, configs)


async def _topic_delete(admin: AdminClient, args: argparse.Namespace) -> None:
    await admin.delete_topic(args.topic, cluster=args.cluster)
    out = _out(args)
    if out.as_json:
        out.json({"topic": args.topic, "deleted": True})
    else:
        out.line(f"topic {args.topic} deleted")


async def _topic_route(admin: AdminClient, args: argparse.Namespace) -> None:
    # The wire JSON, re-indented: the same document mqadmin topicRoute prints.
    route = orjson.loads(encode_topic_route(await admin.topic_route(args.topic)))
    print(orjson.dumps(route, option=orjson.OPT_INDENT_2).decode())


async def _topic_status(admin: AdminClient, args: argparse.Namespace) -> None:
    status = await admin.topic_status(args.topic)
    rows = [
        (
            mq.broker_name,
            mq.queue_id,
            item.min_offset,
            item.max_offset,
            format_ms(item.last_update_timestamp_ms),
        )
        for mq, item in sorted(status.items())
    ]
    document = [
        {
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "minOffset": item.min_offset,
            "maxOffset": item.max_offset,
            "lastUpdateTimestamp": item.last_update_timestamp_ms,
        }
        for mq, item in sorted(status.items())
    ]
    _out(args).table(("broker", "queue", "min_offset", "max_offset", "last_updated"), rows, document=document)


async def _consumer_progress(admin: AdminClient, args: argparse.Namespace) -> None:
    progress = await admin.consumer_progress(args.group, args.topic)
    out = _out(args)
    if out.as_json:
        out.json(
            [
                {
                    "topic": mq.topic,
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "minOffset": item.min_offset,
                    "brokerOffset": item.broker_offset,
                    "consumerOffset": item.committed_offset,
                    "lag": item.lag,
                }
                for mq, item in sorted(progress.items())
            ]
        )
        return
    if not progress:
        print(f"group {args.group} exists but has committed no offset yet; name a topic with -t")
        return
    rows = [
        (
            mq.topic,
            mq.broker_name,
            mq.queue_id,
            item.min_offset,
            item.broker_offset,
            "-" if item.committed_offset < 0 else item.committed_offset,
            item.lag,
        )
        for mq, item in sorted(progress.items())
    ]
    headers = ("topic", "broker", "queue", "min_offset", "broker_offset", "consumer_offset", "lag")
    out.print_table(headers, rows)
    print(f"total lag: {sum(item.lag for item in progress.values())}")
    if any(item.committed_offset < 0 for item in progress.values()):
        print("consumer_offset '-': never committed; the lag counts from the queue's min_offset")


async def _consumer_reset(admin: AdminClient, args: argparse.Namespace) -> None:
    # Brokers reset any group they are asked to (as RocketMQ's do): a mistyped one is refused here.
    await admin.require_group(args.group, args.topic)
    args.force = True
    await _verbs.reset_offset_by_time(admin, args)
    _out(args).line("online consumers move to the new offsets without a restart")


# -- parser ------------------------------------------------------------------------------------


async def _controller_list(admin: AdminClient, args: argparse.Namespace) -> None:
    """``controller list``: the controller leader's view of every broker group."""
    state = await admin.controller_state([addr for addr in args.controllers.split(";") if addr])
    out = _out(args)
    raft = state.get("controller", {})
    out.line(
        f"controller leader {raft.get('leader') or '-'} (term {raft.get('term')}); "
        f"answered by {raft.get('self')}{' (leader)' if raft.get('isLeader') else ''}"
    )
    rows = []
    for group in state.get("groups", []):
        members = set(group["syncStateSet"])
        for replica in group.get("replicaStates", []):
            broker_id = replica["brokerId"]
            rows.append(
                (
                    group["clusterName"],
                    group["brokerName"],
                    broker_id,
                    replica["address"],
                    "MASTER" if broker_id == group["masterBrokerId"] else "SLAVE",
                    group["masterEpoch"],
                    "yes" if broker_id in members else "no",
                    group["syncStateSetEpoch"],
                    "yes" if replica["alive"] else "NO",
                    replica["maxOffset"],
                    replica["confirmOffset"],
                )
            )
        if group["masterBrokerId"] < 0:
            out.line(f"{group['brokerName']}: NO MASTER (SyncStateSet {sorted(members)})")
    headers = ("cluster", "broker", "id", "address", "role", "epoch", "in_sss", "sss_epoch", "alive")
    out.table((*headers, "max_offset", "confirm_offset"), rows, document=state)


def _add_create(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "create", parents=[common], help="create a topic on every master of a cluster (or replace it)"
    )
    parser.add_argument("topic")
    parser.add_argument("-q", "--queues", type=int, default=8, help="read and write queues per broker (8)")
    parser.add_argument("-c", "--cluster", help="cluster name (default: every cluster)")
    parser.add_argument("--perm", type=_perm, default=6, help="permission: 2 write, 4 read, 6 both (6)")
    parser.add_argument("--order", action="store_true", help="mark the topic as ordered")
    parser.set_defaults(command=_topic_create)


def _add_update(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "update", parents=[common], help="change some settings of an existing topic, keeping the others"
    )
    parser.add_argument("topic")
    parser.add_argument("-q", "--queues", type=int, help="read and write queues per broker")
    parser.add_argument("-c", "--cluster", help="cluster name (default: every cluster)")
    parser.add_argument("--perm", type=_perm, help="permission: 2 write, 4 read, 6 both")
    parser.add_argument(
        "--order",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="mark the topic as ordered or not",
    )
    parser.set_defaults(command=_topic_update)


def _common_options() -> argparse.ArgumentParser:
    """``-n`` and ``--timeout-ms``, accepted before the command and after it (as mqadmin takes them).

    Defaults are suppressed here so a flag given before the command is not reset after it.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n",
        "--namesrv",
        default=argparse.SUPPRESS,
        help=f"name servers host:port;host:port (default: $NAMESRV_ADDR, else {DEFAULT_NAMESRV_ADDR})",
    )
    common.add_argument(
        "--timeout-ms",
        type=int,
        default=argparse.SUPPRESS,
        help=f"request timeout in ms (default {DEFAULT_TIMEOUT_MS})",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document, not tables"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The ``orbitmq admin`` argument parser."""
    common = _common_options()
    parser: argparse.ArgumentParser = CommandParser(
        prog="orbitmq admin",
        description="Administer an OrbitMQ/RocketMQ cluster.",
        epilog=_EPILOG,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_security_arguments(parser)
    groups = parser.add_subparsers(dest="group", required=True, metavar="COMMAND")

    def leaf(
        sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
    ) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], help=help_text)

    topic = groups.add_parser("topic", help="topics").add_subparsers(
        dest="action", required=True, metavar="COMMAND"
    )
    _add_create(topic, common)
    _add_update(topic, common)
    delete = leaf(topic, "delete", "delete a topic from brokers and name servers")
    delete.add_argument("topic")
    delete.add_argument("-c", "--cluster", help="cluster name (default: every cluster)")
    delete.set_defaults(command=_topic_delete)
    leaf(topic, "list", "every topic the name server knows").set_defaults(command=_verbs.topic_list)
    route = leaf(topic, "route", "a topic's route as indented JSON")
    route.add_argument("topic")
    route.set_defaults(command=_topic_route)
    status = leaf(topic, "status", "min/max offset and last store time per queue")
    status.add_argument("topic")
    status.set_defaults(command=_topic_status)

    consumer = groups.add_parser("consumer", help="consumer groups").add_subparsers(
        dest="action", required=True, metavar="COMMAND"
    )
    progress = leaf(consumer, "progress", "committed offset, broker offset and lag per queue")
    progress.add_argument("group")
    progress.add_argument("-t", "--topic", help="topic (default: every topic where the group committed)")
    progress.set_defaults(command=_consumer_progress)
    reset = leaf(consumer, "reset-offset", "move a group's offsets to a point in time")
    reset.add_argument("group")
    reset.add_argument("topic")
    reset.add_argument(
        "-s", "--timestamp", type=parse_time_ms, required=True, help="'now', epoch ms or ISO-8601"
    )
    reset.set_defaults(command=_consumer_reset)

    cluster = groups.add_parser("cluster", help="clusters").add_subparsers(
        dest="action", required=True, metavar="COMMAND"
    )
    cluster_list = leaf(
        cluster, "list", "brokers of every cluster: role, and each slave's replication lag and in-sync flag"
    )
    cluster_list.add_argument("-c", "--cluster", help="only this cluster")
    cluster_list.set_defaults(command=_verbs.cluster_members)
    shared: dict[str, _Command] = {
        "topic_route": _topic_route,
        "topic_status": _topic_status,
        "topic_delete": _topic_delete,
        "topic_create": _topic_create,
        "topic_update": _topic_update,
        "consumer_progress": _consumer_progress,
    }
    add_verbs(groups, common, shared, parse_time_ms, _perm)
    add_dlq_verbs(groups, common, parse_time_ms)
    add_acl_parser(groups)

    controller = groups.add_parser("controller", help="controller mode").add_subparsers(
        dest="action", required=True, metavar="COMMAND"
    )
    view = leaf(
        controller,
        "list",
        "the controller's view: per group its master, epoch, SyncStateSet and live replicas",
    )
    view.add_argument("-c", "--controllers", required=True, help="controller addresses host:port;host:port")
    view.set_defaults(command=_controller_list)
    return parser


async def _run(args: argparse.Namespace, namesrv_addr: str, options: dict[str, object]) -> None:
    command: _Command = args.command
    timeout_ms = getattr(args, "timeout_ms", DEFAULT_TIMEOUT_MS)
    async with AdminClient(namesrv_addr, request_timeout_ms=timeout_ms, **options) as admin:
        await command(admin, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``orbitmq admin``; returns the exit status."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    namesrv_addr = getattr(args, "namesrv", None) or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR
    try:
        options = security_options(args, os.environ)
    except ConfigError as exc:
        print(f"orbitmq admin: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        asyncio.run(_run(args, namesrv_addr, options))
    except KeyboardInterrupt:
        # asyncio.run cancelled the verb: its finally blocks ran (clients shut down), and a verb
        # that repeats or resends printed what it had done. A second Ctrl-C lands here too.
        print("orbitmq admin: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _NOT_FOUND as exc:
        print(f"orbitmq admin: {exc.remark}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except BrokerResponseError as exc:
        print(f"orbitmq admin: {exc.remark or exc} (response code {exc.code})", file=sys.stderr)
        return EXIT_FAILED
    except OrbitError as exc:
        print(f"orbitmq admin: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
