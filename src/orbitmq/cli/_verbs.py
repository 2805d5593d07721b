"""``mqadmin``'s everyday verbs on clusters, topics, groups, brokers and KV config.

Each verb is ``async def verb(admin, args)``: it calls the admin client and prints through
:class:`~orbitmq.cli._render.Output` (a table, or JSON with ``--json``). Option letters follow
``mqadmin``'s (``-t`` topic, ``-g`` group, ``-b`` broker address, ``-c`` cluster, ...). Message
verbs live in ``orbitmq.cli._verbs_messages``, the operations verbs (permissions, name server
config, consume queues, send RT) in ``orbitmq.cli._verbs_ops``.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import asdict, replace

from orbitmq.cli._render import Output
from orbitmq.client.admin import AdminClient
from orbitmq.errors import ConsumerNotOnlineError, OrbitError
from orbitmq.model.subscription_group import SubscriptionGroupConfig
from orbitmq.protocol.admin_bodies import ConsumeStats

__all__ = [
    "broker_status",
    "clone_group_offset",
    "cluster_list",
    "cluster_members",
    "consumer_connection",
    "consumer_progress_all",
    "consumer_status",
    "delete_sub_group",
    "get_broker_config",
    "producer_connection",
    "reset_offset_by_time",
    "skip_accumulated_message",
    "stats_all",
    "topic_list",
    "update_broker_config",
    "update_kv_config",
    "update_sub_group",
]


def _out(args: argparse.Namespace) -> Output:
    return Output(bool(getattr(args, "json", False)))


async def _broker_addrs(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    """``-b`` when given, else every master of ``-c`` (or of every cluster)."""
    if getattr(args, "broker", None):
        return [args.broker]
    return await admin._master_addrs(getattr(args, "cluster", None))


# -- clusters and topics ------------------------------------------------------------------------


async def cluster_list(admin: AdminClient, args: argparse.Namespace) -> None:
    info = await admin.cluster_info()
    rows = []
    addrs = sorted({addr for data in info.broker_addr_table.values() for addr in data.broker_addrs.values()})
    runtime = dict(
        zip(addrs, await asyncio.gather(*(_runtime_or_none(admin, addr) for addr in addrs)), strict=True)
    )
    for cluster, names in sorted(info.cluster_addr_table.items()):
        if args.cluster and cluster != args.cluster:
            continue
        for name in sorted(names):
            broker = info.broker_addr_table.get(name)
            for broker_id, addr in sorted((broker.broker_addrs if broker else {}).items()):
                table = runtime.get(addr) or {}
                rows.append(
                    (
                        cluster,
                        name,
                        broker_id,
                        addr,
                        table.get("brokerVersionDesc", "-"),
                        table.get("putTps", "-").split(" ")[0],
                        table.get("getTransferedTps", "-").split(" ")[0],
                    )
                )
    _out(args).table(("cluster", "broker", "id", "address", "version", "in_tps", "out_tps"), rows)


async def cluster_members(admin: AdminClient, args: argparse.Namespace) -> None:
    """``cluster list``: every broker's role and, for a slave, its replication lag and state."""
    members = [
        member
        for member in await admin.cluster_members()
        if not args.cluster or member.cluster == args.cluster
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
    rows = [
        (
            member.cluster,
            member.broker_name,
            member.broker_id,
            member.address,
            member.role,
            member.max_offset,
            member.lag_bytes,
            member.lag_ms,
            None if member.in_sync is None else ("yes" if member.in_sync else "NO"),
            member.state,
        )
        for member in members
    ]
    _out(args).table(headers, rows, document=[asdict(member) for member in members])


async def _runtime_or_none(admin: AdminClient, addr: str) -> dict[str, str] | None:
    try:
        return await admin.broker_runtime_info(addr)
    except OrbitError:
        return None


async def topic_list(admin: AdminClient, args: argparse.Namespace) -> None:
    topics = await admin.list_topics()
    out = _out(args)
    if out.as_json:
        out.json(topics)
    else:
        for topic in topics:
            print(topic)


# -- consumer groups ----------------------------------------------------------------------------


async def update_sub_group(admin: AdminClient, args: argparse.Namespace) -> None:
    current = (await admin.subscription_groups(args.cluster)).get(args.group) or SubscriptionGroupConfig(
        args.group
    )
    changes = {
        name: value
        for name, value in (
            ("consume_enable", args.consume_enable),
            ("consume_from_min_enable", args.consume_from_min_enable),
            ("consume_broadcast_enable", args.consume_broadcast_enable),
            ("consume_message_orderly", args.consume_message_orderly),
            ("retry_queue_nums", args.retry_queue_nums),
            ("retry_max_times", args.retry_max_times),
            ("broker_id", args.broker_id),
            ("which_broker_when_consume_slowly", args.which_broker_when_consume_slowly),
            ("notify_consumer_ids_changed_enable", args.notify_consumer_ids_changed_enable),
        )
        if value is not None
    }
    config = replace(current, **changes)
    brokers = await admin.create_subscription_group(config, args.cluster)
    document = {"brokers": brokers, "config": config.to_json()}
    out = _out(args)
    if out.as_json:
        out.json(document)
        return
    out.key_values({key: str(value) for key, value in config.to_json().items()})
    out.line(f"group {args.group} written to {', '.join(brokers)}")


async def delete_sub_group(admin: AdminClient, args: argparse.Namespace) -> None:
    brokers = await admin.delete_subscription_group(args.group, args.cluster, clean_offset=args.remove_offset)
    out = _out(args)
    if out.as_json:
        out.json({"group": args.group, "deletedFrom": brokers})
    else:
        out.line(f"group {args.group} deleted from {', '.join(brokers)}")


async def consumer_progress_all(admin: AdminClient, args: argparse.Namespace) -> None:
    """``consumerProgress`` without ``-g``: every group with its members and total lag."""
    stats = await admin.all_consume_stats(getattr(args, "cluster", None))
    connections = await asyncio.gather(*(_connection_or_none(admin, group) for group in stats))
    rows = []
    for (group, group_stats), connection in zip(stats.items(), connections, strict=True):
        members = connection.connection_set if connection else []
        rows.append(
            (
                group,
                len(members),
                members[0].version if members else "-",
                connection.consume_type if connection else "-",
                connection.message_model if connection else "-",
                f"{group_stats.consume_tps:.2f}",
                group_stats.total_diff,
            )
        )
    _out(args).table(("group", "count", "version", "type", "model", "tps", "diff_total"), rows)


async def _connection_or_none(admin: AdminClient, group: str):  # type: ignore[no-untyped-def]
    try:
        return await admin.consumer_connection(group)
    except ConsumerNotOnlineError:
        return None


async def consumer_connection(admin: AdminClient, args: argparse.Namespace) -> None:
    connection = await admin.consumer_connection(args.group)
    out = _out(args)
    members = [(c.client_id, c.client_addr, c.language, c.version) for c in connection.connection_set]
    subscriptions = [
        (topic, sub.expression_type, sub.sub_string)
        for topic, sub in sorted(connection.subscription_table.items())
    ]
    if out.as_json:
        out.json(
            {
                "connectionSet": [
                    dict(zip(("clientId", "clientAddr", "language", "version"), m, strict=True))
                    for m in members
                ],
                "subscriptionTable": {t: {"expressionType": e, "subString": s} for t, e, s in subscriptions},
                "consumeType": connection.consume_type,
                "messageModel": connection.message_model,
                "consumeFromWhere": connection.consume_from_where,
            }
        )
        return
    out.print_table(("client_id", "client_addr", "language", "version"), members)
    out.line("")
    out.print_table(("topic", "expression_type", "expression"), subscriptions)
    out.line("")
    out.line(f"ConsumeType: {connection.consume_type}")
    out.line(f"MessageModel: {connection.message_model}")
    out.line(f"ConsumeFromWhere: {connection.consume_from_where}")


async def producer_connection(admin: AdminClient, args: argparse.Namespace) -> None:
    connections = await admin.producer_connection(args.group, args.topic)
    rows = [(c.client_id, c.client_addr, c.language, c.version) for c in connections]
    _out(args).table(("client_id", "client_addr", "language", "version"), rows)


async def consumer_status(admin: AdminClient, args: argparse.Namespace) -> None:
    """Each online member's running info (one member with ``-i``)."""
    connection = await admin.consumer_connection(args.group)
    client_ids = [args.client_id] if args.client_id else [c.client_id for c in connection.connection_set]
    infos = await asyncio.gather(
        *(admin.consumer_running_info(args.group, client_id, jstack=args.jstack) for client_id in client_ids)
    )
    out = _out(args)
    if out.as_json:
        out.json(
            {
                client_id: {
                    "properties": info.properties,
                    "mqTable": {
                        f"{mq.topic}/{mq.broker_name}/{mq.queue_id}": vars_of(item)
                        for mq, item in info.mq_table.items()
                    },
                    "statusTable": {topic: vars_of(status) for topic, status in info.status_table.items()},
                }
                for client_id, info in zip(client_ids, infos, strict=True)
            }
        )
        return
    for client_id, info in zip(client_ids, infos, strict=True):
        out.line(f"client {client_id}")
        rows = [
            (
                mq.topic,
                mq.broker_name,
                mq.queue_id,
                item.commit_offset,
                item.cached_msg_count,
                item.locked,
                item.droped,
            )
            for mq, item in sorted(info.mq_table.items())
        ]
        out.print_table(("topic", "broker", "queue", "commit_offset", "cached", "locked", "dropped"), rows)
        rates = [
            (
                topic,
                f"{s.pull_tps:.2f}",
                f"{s.pull_rt:.2f}",
                f"{s.consume_ok_tps:.2f}",
                f"{s.consume_failed_tps:.2f}",
                s.consume_failed_msgs,
            )
            for topic, s in sorted(info.status_table.items())
        ]
        out.print_table(
            ("topic", "pull_tps", "pull_rt_ms", "consume_ok_tps", "consume_failed_tps", "failed_msgs"), rates
        )
        out.line("")


def vars_of(value: object) -> dict[str, object]:
    """A dataclass value as a dict of its fields (slots dataclasses have no __dict__)."""
    return {name: getattr(value, name) for name in getattr(value, "__dataclass_fields__", {})}


async def reset_offset_by_time(admin: AdminClient, args: argparse.Namespace) -> None:
    offsets = await admin.reset_offset(args.group, args.topic, args.timestamp, force=args.force)
    rows = [(mq.broker_name, mq.queue_id, offset) for mq, offset in offsets.items()]
    _out(args).table(("broker", "queue", "new_offset"), rows)


async def skip_accumulated_message(admin: AdminClient, args: argparse.Namespace) -> None:
    offsets = await admin.reset_offset(args.group, args.topic, -1, force=True)
    rows = [(mq.broker_name, mq.queue_id, offset) for mq, offset in offsets.items()]
    _out(args).table(("broker", "queue", "new_offset"), rows)


async def clone_group_offset(admin: AdminClient, args: argparse.Namespace) -> None:
    brokers = await admin.clone_group_offset(
        args.src_group, args.dest_group, args.topic, offline=args.offline
    )
    out = _out(args)
    if out.as_json:
        out.json({"srcGroup": args.src_group, "destGroup": args.dest_group, "brokers": brokers})
    else:
        out.line(f"offsets of {args.src_group} cloned to {args.dest_group} on {', '.join(brokers)}")


# -- brokers and statistics ---------------------------------------------------------------------


async def broker_status(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await _broker_addrs(admin, args)
    tables = await asyncio.gather(*(admin.broker_runtime_info(addr) for addr in addrs))
    out = _out(args)
    if out.as_json:
        out.json(dict(zip(addrs, tables, strict=True)))
        return
    for addr, table in zip(addrs, tables, strict=True):
        if len(addrs) > 1:
            out.line(f"broker {addr}")
        out.key_values(table)


async def get_broker_config(admin: AdminClient, args: argparse.Namespace) -> None:
    addrs = await _broker_addrs(admin, args)
    configs = await asyncio.gather(*(admin.broker_config(addr) for addr in addrs))
    out = _out(args)
    if out.as_json:
        out.json(dict(zip(addrs, configs, strict=True)))
        return
    for addr, config in zip(addrs, configs, strict=True):
        out.line(f"============{addr}============")
        out.key_values(config, separator=" = ")


async def update_broker_config(admin: AdminClient, args: argparse.Namespace) -> None:
    brokers = await admin.update_broker_config({args.key: args.value}, addr=args.broker, cluster=args.cluster)
    out = _out(args)
    if out.as_json:
        out.json({"key": args.key, "value": args.value, "brokers": brokers})
    else:
        out.line(f"{args.key}={args.value} set on {', '.join(brokers)}")


async def stats_all(admin: AdminClient, args: argparse.Namespace) -> None:
    """``mqadmin statsAll``: per topic and consuming group, accumulation and rates."""
    topics = [args.topic] if args.topic else await admin.user_topics()
    rows = []
    for topic in topics:
        brokers = list((await _route_masters(admin, topic)).values())
        puts = await asyncio.gather(*(admin.broker_stats(addr, "TOPIC_PUT_NUMS", topic) for addr in brokers))
        in_tps = sum(item.stats_minute.tps for item in puts if item)
        in_day = sum(_day_sum(item) for item in puts if item)
        if args.active and not in_day:
            continue
        groups = await admin.topic_consumers(topic)
        if not groups:
            rows.append((topic, "NO_CONSUMER", 0, f"{in_tps:.2f}", "0.00", in_day, 0))
            continue
        for group in groups:
            gets = await asyncio.gather(
                *(admin.broker_stats(addr, "GROUP_GET_NUMS", f"{topic}@{group}") for addr in brokers)
            )
            stats = await _consume_stats_or_empty(admin, group, topic)
            rows.append(
                (
                    topic,
                    group,
                    stats.total_diff,
                    f"{in_tps:.2f}",
                    f"{sum(item.stats_minute.tps for item in gets if item):.2f}",
                    in_day,
                    sum(_day_sum(item) for item in gets if item),
                )
            )
    headers = ("topic", "consumer_group", "accumulation", "in_tps", "out_tps", "in_msg_24h", "out_msg_24h")
    _out(args).table(headers, rows)


def _day_sum(item: object) -> int:
    """mqadmin's InMsg24Hour: the first non-zero sum of the day, hour and minute windows."""
    for window in ("stats_day", "stats_hour", "stats_minute"):
        total = int(getattr(getattr(item, window), "sum", 0))
        if total:
            return total
    return 0


async def _route_masters(admin: AdminClient, topic: str) -> dict[str, str]:
    route = await admin.topic_route(topic)
    return {data.broker_name: data.broker_addrs[0] for data in route.broker_datas if 0 in data.broker_addrs}


async def _consume_stats_or_empty(admin: AdminClient, group: str, topic: str) -> ConsumeStats:
    try:
        return await admin.consume_stats(group, topic)
    except ConsumerNotOnlineError:
        return ConsumeStats()


async def update_kv_config(admin: AdminClient, args: argparse.Namespace) -> None:
    await admin.put_kv_config(args.namespace, args.key, args.value)
    out = _out(args)
    if out.as_json:
        out.json({"namespace": args.namespace, "key": args.key, "value": args.value})
    else:
        out.line(
            f"{args.namespace}/{args.key}={args.value} set on {', '.join(admin.client_config.namesrv_addrs)}"
        )
