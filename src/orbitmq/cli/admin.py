"""``orbitmq admin ...``: argparse over :class:`orbitmq.client.AdminClient`, printed as tables.

Commands (``mqadmin`` equivalents in brackets)::

    orbitmq admin [-n NAMESRV] topic create|update TOPIC [-q N] [-c CLUSTER] [--perm P] [--order]
                                                                      [updateTopic]
    orbitmq admin topic delete TOPIC [-c CLUSTER]                     [deleteTopic]
    orbitmq admin topic list                                          [topicList]
    orbitmq admin topic route TOPIC                                   [topicRoute]
    orbitmq admin topic status TOPIC                                  [topicStatus]
    orbitmq admin consumer progress GROUP [-t TOPIC]                  [consumerProgress]
    orbitmq admin consumer reset-offset GROUP TOPIC -s TIME           [resetOffsetByTime]
    orbitmq admin cluster list                                        [clusterList]
    orbitmq admin controller list -c CONTROLLERS                      [getSyncStateSet,
                                                                       getControllerMetaData]

The name-server list comes from ``-n``, else the ``NAMESRV_ADDR`` environment variable, else
``127.0.0.1:9876``. Exit status: 0 on success, 1 when the operation failed, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

from orbitmq.client.admin import AdminClient
from orbitmq.errors import OrbitError
from orbitmq.protocol.bodies import encode_topic_route

__all__ = ["build_parser", "main"]

DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"

_Command = Callable[[AdminClient, argparse.Namespace], Awaitable[None]]


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(header), *(len(row[index]) for row in cells)]) for index, header in enumerate(headers)]
    lines = ["  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def _format_ms(timestamp_ms: int) -> str:
    if timestamp_ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000).astimezone()
    return moment.isoformat(timespec="milliseconds")


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


async def _topic_create(admin: AdminClient, args: argparse.Namespace) -> None:
    await admin.create_topic(args.topic, args.queues, cluster=args.cluster, perm=args.perm, order=args.order)
    print(f"topic {args.topic}: {args.queues} queues on {args.cluster or 'every cluster'}")


async def _topic_delete(admin: AdminClient, args: argparse.Namespace) -> None:
    await admin.delete_topic(args.topic, cluster=args.cluster)
    print(f"topic {args.topic} deleted")


async def _topic_list(admin: AdminClient, args: argparse.Namespace) -> None:
    for topic in await admin.list_topics():
        print(topic)


async def _topic_route(admin: AdminClient, args: argparse.Namespace) -> None:
    print(encode_topic_route(await admin.topic_route(args.topic)).decode())


async def _topic_status(admin: AdminClient, args: argparse.Namespace) -> None:
    status = await admin.topic_status(args.topic)
    rows = [
        (
            mq.broker_name,
            mq.queue_id,
            item.min_offset,
            item.max_offset,
            _format_ms(item.last_update_timestamp_ms),
        )
        for mq, item in sorted(status.items())
    ]
    print(_table(("broker", "queue", "min_offset", "max_offset", "last_updated"), rows))


async def _consumer_progress(admin: AdminClient, args: argparse.Namespace) -> None:
    progress = await admin.consumer_progress(args.group, args.topic)
    rows = [
        (mq.topic, mq.broker_name, mq.queue_id, item.broker_offset, item.committed_offset, item.lag)
        for mq, item in sorted(progress.items())
    ]
    print(_table(("topic", "broker", "queue", "broker_offset", "consumer_offset", "lag"), rows))
    print(f"total lag: {sum(item.lag for item in progress.values())}")


async def _consumer_reset(admin: AdminClient, args: argparse.Namespace) -> None:
    offsets = await admin.reset_offset_by_time(args.group, args.topic, args.timestamp)
    rows = [(mq.broker_name, mq.queue_id, offset) for mq, offset in sorted(offsets.items())]
    print(_table(("broker", "queue", "new_offset"), rows))
    print("note: restart online consumers of the group, or they will commit their old offsets again")


def _shown(value: object) -> object:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return value


async def _cluster_list(admin: AdminClient, args: argparse.Namespace) -> None:
    rows = [
        (
            member.cluster,
            member.broker_name,
            member.broker_id,
            member.address,
            _shown(member.role),
            _shown(member.max_offset),
            _shown(member.lag_bytes),
            _shown(member.lag_ms),
            _shown(member.in_sync),
            _shown(member.state),
        )
        for member in await admin.cluster_members()
    ]
    headers = (
        "cluster",
        "broker",
        "id",
        "address",
        "role",
        "max_offset",
        "lag_bytes",
        "lag_ms",
        "in_sync",
        "ha_link",
    )
    print(_table(headers, rows))


# -- parser ------------------------------------------------------------------------------------


async def _controller_list(admin: AdminClient, args: argparse.Namespace) -> None:
    state = await admin.controller_state([addr for addr in args.controllers.split(";") if addr])
    raft = state.get("controller", {})
    print(
        f"controller leader {raft.get('leader') or '-'} (term {raft.get('term')}); "
        f"answered by {raft.get('self')}{' (leader)' if raft.get('isLeader') else ''}"
    )
    rows = []
    for group in state.get("groups", []):
        members = set(group["syncStateSet"])
        for replica in group.get("replicaStates", []):
            broker_id = replica["brokerId"]
            rows.append(
                [
                    group["clusterName"],
                    group["brokerName"],
                    broker_id,
                    replica["address"],
                    "MASTER" if broker_id == group["masterBrokerId"] else "SLAVE",
                    group["masterEpoch"],
                    "yes" if broker_id in members else "no",
                    group["syncStateSetEpoch"],
                    "yes" if replica["alive"] else "NO",
                    _shown(replica["maxOffset"]),
                    _shown(replica["confirmOffset"]),
                ]
            )
        if group["masterBrokerId"] < 0:
            print(f"{group['brokerName']}: NO MASTER (SyncStateSet {sorted(members)})")
    headers = ["cluster", "broker", "id", "address", "role", "epoch", "in_sss", "sss_epoch", "alive"]
    print(_table([*headers, "max_offset", "confirm_offset"], rows))


def _add_create(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    parser = sub.add_parser(name, help="create or update a topic on every master of a cluster")
    parser.add_argument("topic")
    parser.add_argument("-q", "--queues", type=int, default=8, help="read and write queues per broker (8)")
    parser.add_argument("-c", "--cluster", help="cluster name (default: every cluster)")
    parser.add_argument("--perm", type=int, default=6, help="permission: 2 write, 4 read, 6 both (6)")
    parser.add_argument("--order", action="store_true", help="mark the topic as ordered")
    parser.set_defaults(command=_topic_create)


def build_parser() -> argparse.ArgumentParser:
    """The ``orbitmq admin`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="orbitmq admin", description="Administer an OrbitMQ/RocketMQ cluster."
    )
    parser.add_argument(
        "-n", "--namesrv", help=f"name servers host:port;host:port (default {DEFAULT_NAMESRV_ADDR})"
    )
    parser.add_argument("--timeout-ms", type=int, default=5000, help="request timeout (5000)")
    groups = parser.add_subparsers(dest="group", required=True)

    topic = groups.add_parser("topic", help="topics").add_subparsers(dest="action", required=True)
    _add_create(topic, "create")
    _add_create(topic, "update")
    delete = topic.add_parser("delete", help="delete a topic from brokers and name servers")
    delete.add_argument("topic")
    delete.add_argument("-c", "--cluster", help="cluster name (default: every cluster)")
    delete.set_defaults(command=_topic_delete)
    topic.add_parser("list", help="every topic the name server knows").set_defaults(command=_topic_list)
    route = topic.add_parser("route", help="a topic's route as JSON")
    route.add_argument("topic")
    route.set_defaults(command=_topic_route)
    status = topic.add_parser("status", help="min/max offset and last store time per queue")
    status.add_argument("topic")
    status.set_defaults(command=_topic_status)

    consumer = groups.add_parser("consumer", help="consumer groups").add_subparsers(
        dest="action", required=True
    )
    progress = consumer.add_parser("progress", help="committed offset, broker offset and lag per queue")
    progress.add_argument("group")
    progress.add_argument("-t", "--topic", help="topic (default: every topic where the group committed)")
    progress.set_defaults(command=_consumer_progress)
    reset = consumer.add_parser("reset-offset", help="move a group's offsets to a point in time")
    reset.add_argument("group")
    reset.add_argument("topic")
    reset.add_argument(
        "-s", "--timestamp", type=parse_time_ms, required=True, help="'now', epoch ms or ISO-8601"
    )
    reset.set_defaults(command=_consumer_reset)

    cluster = groups.add_parser("cluster", help="clusters").add_subparsers(dest="action", required=True)
    cluster.add_parser(
        "list", help="brokers of every cluster: role, and each slave's replication lag and in-sync flag"
    ).set_defaults(command=_cluster_list)

    controller = groups.add_parser("controller", help="controller mode").add_subparsers(
        dest="action", required=True
    )
    view = controller.add_parser(
        "list", help="the controller's view: per group its master, epoch, SyncStateSet and live replicas"
    )
    view.add_argument("-c", "--controllers", required=True, help="controller addresses host:port;host:port")
    view.set_defaults(command=_controller_list)
    return parser


async def _run(args: argparse.Namespace, namesrv_addr: str) -> None:
    command: _Command = args.command
    async with AdminClient(namesrv_addr, request_timeout_ms=args.timeout_ms) as admin:
        await command(admin, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``orbitmq admin``; returns the exit status."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    namesrv_addr = args.namesrv or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV_ADDR
    try:
        asyncio.run(_run(args, namesrv_addr))
    except OrbitError as exc:
        print(f"orbitmq admin: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
