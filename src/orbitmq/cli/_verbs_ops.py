"""``mqadmin``'s operations verbs: permissions, name server config, consume queues, send RT.

``updateTopicPerm``, ``topicClusterList``, ``getNamesrvConfig``, ``updateNamesrvConfig``,
``deleteKvConfig``, ``getConsumerConfig``, ``brokerConsumeStats``, ``clusterRT``,
``wipeWritePerm``/``addWritePerm``, ``allocateMQ`` and ``queryCq``, with mqadmin's option
letters and, without ``--json``, the lines mqadmin prints (operators' scripts grep them).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import time

import orjson

from orbitmq.cli._render import Output
from orbitmq.client import Message, Producer
from orbitmq.client._admin_core import invoke
from orbitmq.client._consumer_config import queues_of_route
from orbitmq.client._topic_names import check_topic_perm
from orbitmq.client.admin import AdminClient
from orbitmq.errors import ClientError, OrbitError, SubscriptionGroupNotExistError, error_for_code
from orbitmq.protocol.admin_bodies import decode_consume_stats_list
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.headers import CreateTopicRequestHeader

__all__ = [
    "allocate_mq",
    "broker_consume_stats",
    "cluster_rt",
    "delete_kv_config",
    "get_consumer_config",
    "get_namesrv_config",
    "query_cq",
    "topic_cluster_list",
    "update_namesrv_config",
    "update_topic_perm",
    "write_perm",
]


def _out(args: argparse.Namespace) -> Output:
    return Output(bool(getattr(args, "json", False)))


def _namesrv_list(admin: AdminClient) -> list[str]:
    """The name servers of ``-n`` (every one of them, as mqadmin's name server verbs ask)."""
    return list(admin.client_config.namesrv_addrs)


# -- topics -------------------------------------------------------------------------------------


async def update_topic_perm(admin: AdminClient, args: argparse.Namespace) -> None:
    """``updateTopicPerm -t T -p P (-b ADDR | -c CLUSTER)``: the route's layout with a new perm."""
    if not args.broker and not args.cluster:
        raise ClientError("updateTopicPerm: give -b (a broker address) or -c (a cluster's masters)")
    check_topic_perm(args.topic, args.perm)
    route = await admin.topic_route(args.topic)
    queue_data = route.queue_datas[0]
    out = _out(args)
    old_perm = queue_data.perm
    if args.perm == old_perm:
        if out.as_json:
            out.json({"topic": args.topic, "perm": old_perm, "changed": []})
        else:
            out.line("new perm equals to the old one!")
        return
    header = CreateTopicRequestHeader(
        topic=args.topic,
        read_queue_nums=queue_data.read_queue_nums,
        write_queue_nums=queue_data.write_queue_nums,
        perm=args.perm,
        topic_sys_flag=queue_data.topic_sys_flag,
    )
    addrs = [args.broker] if args.broker else await admin._master_addrs(args.cluster)
    for addr in addrs:
        await admin._broker(
            addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext(), f"update perm of {args.topic}"
        )
        out.line(f"update topic perm from {old_perm} to {args.perm} in {addr} success.")
    if out.as_json:
        out.json({"topic": args.topic, "oldPerm": old_perm, "perm": args.perm, "changed": addrs})


async def topic_cluster_list(admin: AdminClient, args: argparse.Namespace) -> None:
    """``topicClusterList -t T``: the clusters whose brokers host the topic, one per line."""
    route = await admin.topic_route(args.topic)
    info = await admin.cluster_info()
    names = {data.broker_name for data in route.broker_datas}
    clusters = sorted(cluster for cluster, brokers in info.cluster_addr_table.items() if brokers & names)
    out = _out(args)
    if out.as_json:
        out.json(clusters)
        return
    for cluster in clusters:
        out.line(cluster)


async def allocate_mq(admin: AdminClient, args: argparse.Namespace) -> None:
    """``allocateMQ -t T -i IP,IP``: how AllocateMessageQueueAveragely shares the topic's readable
    queues among those client ids, as mqadmin's RebalanceResult JSON."""
    client_ids = list(dict.fromkeys(part.strip() for part in args.ip_list.split(",") if part.strip()))
    if not client_ids:
        raise ClientError("allocateMQ: -i names no client (a comma-separated list)")
    queues = queues_of_route(args.topic, await admin.topic_route(args.topic))
    base, extra = divmod(len(queues), len(client_ids))
    result: dict[str, list[dict[str, object]]] = {}
    for index, client_id in enumerate(client_ids):
        start = index * base + min(index, extra)
        count = base + (1 if index < extra else 0)
        result[client_id] = [
            {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}
            for mq in queues[start : start + count]
        ]
    print(orjson.dumps({"result": result}).decode())


# -- name servers -------------------------------------------------------------------------------


async def get_namesrv_config(admin: AdminClient, args: argparse.Namespace) -> None:
    configs = await admin.namesrv_config(_namesrv_list(admin))
    out = _out(args)
    if out.as_json:
        out.json(configs)
        return
    for addr, config in configs.items():
        out.line(f"============{addr}============")
        for key, value in config.items():
            out.line(f"{key:<50}=  {value}")


async def update_namesrv_config(admin: AdminClient, args: argparse.Namespace) -> None:
    servers = await admin.update_namesrv_config({args.key: args.value}, _namesrv_list(admin))
    out = _out(args)
    if out.as_json:
        out.json({"key": args.key, "value": args.value, "nameServers": servers})
    else:
        out.line(f"update name server config success!{servers}\n{args.key} : {args.value}")


async def delete_kv_config(admin: AdminClient, args: argparse.Namespace) -> None:
    await admin.delete_kv_config(args.namespace, args.key)
    out = _out(args)
    if out.as_json:
        out.json({"namespace": args.namespace, "key": args.key, "deleted": True})
    else:
        out.line("delete kv config from namespace success.")


async def write_perm(admin: AdminClient, args: argparse.Namespace) -> None:
    """``wipeWritePerm -b NAME`` / ``addWritePerm -b NAME`` on every name server; one failing
    server is reported and the others still asked, as mqadmin does."""
    writable = args.writable
    what = "add" if writable else "wipe"
    out = _out(args)
    counts: dict[str, int | None] = {}
    for addr in _namesrv_list(admin):
        try:
            counts[addr] = await admin.set_write_perm(addr, args.broker_name, writable=writable)
        except OrbitError as exc:
            counts[addr] = None
            out.line(f"{what} write perm of broker[{args.broker_name}] in name server[{addr}] Failed")
            print(f"orbitmq admin: {exc}", file=sys.stderr)
            continue
        out.line(f"{what} write perm of broker[{args.broker_name}] in name server[{addr}] OK, {counts[addr]}")
    if out.as_json:
        out.json({"brokerName": args.broker_name, "writable": writable, "topicCounts": counts})
    if None in counts.values():
        raise ClientError(f"{what}WritePerm failed on some name server")


# -- groups and brokers -------------------------------------------------------------------------


async def get_consumer_config(admin: AdminClient, args: argparse.Namespace) -> None:
    """``getConsumerConfig -g G``: the group's subscription group config on each broker that has it.

    Each broker's whole table is read (GET_ALL_SUBSCRIPTIONGROUP_CONFIG): GET_SUBSCRIPTIONGROUP_CONFIG
    would create a group the broker does not have (autoCreateSubscriptionGroup, as RocketMQ 5's
    broker does), so a mistyped name would be shown, and kept, as a new group.
    """
    info = await admin.cluster_info()
    cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    found: list[tuple[str, str, dict[str, object]]] = []
    for name, data in sorted(info.broker_addr_table.items()):
        # RocketMQ's selectBrokerAddr: the master, else a slave.
        addr = data.master_addr or (min(data.broker_addrs.items())[1] if data.broker_addrs else None)
        if addr is None:
            continue
        response = await invoke(admin, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
        if response.code != ResponseCode.SUCCESS:
            continue
        config = orjson.loads(response.body).get("subscriptionGroupTable", {}).get(args.group)
        if config is not None:
            found.append((cluster_of.get(name, ""), name, config))
    if not found:
        raise SubscriptionGroupNotExistError(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"no broker has the subscription group {args.group}"
        )
    out = _out(args)
    if out.as_json:
        out.json([{"clusterName": c, "brokerName": b, "config": config} for c, b, config in found])
        return
    for cluster, broker, config in found:
        out.line(f"============================={cluster}:{broker}=============================")
        for key, value in config.items():
            text = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
            out.line(f"{key:<40}=  {text}")


async def broker_consume_stats(admin: AdminClient, args: argparse.Namespace) -> None:
    """``brokerConsumeStats -b ADDR [-l LEVEL] [-o ORDER]``: every group's lag per queue on one
    broker (GET_BROKER_CONSUME_STATS), rows under ``-l`` diff left out."""
    response = await invoke(
        admin, args.broker, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": str(args.order).lower()}
    )
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(response.code, f"consume stats of broker {args.broker}: {response.remark}")
    by_group = decode_consume_stats_list(response.body)
    rows = []
    total_diff = 0
    for group, stats_list in sorted(by_group.items()):
        for stats in stats_list:
            for mq in sorted(stats.offset_table):
                wrapper = stats.offset_table[mq]
                diff = wrapper.broker_offset - wrapper.consumer_offset
                total_diff += diff
                if diff < args.level or wrapper.last_timestamp <= 0:
                    continue
                last = datetime.datetime.fromtimestamp(wrapper.last_timestamp / 1000).strftime(
                    "%Y-%m-%d %H:%M:%S"
                )
                rows.append((mq, group, wrapper.broker_offset, wrapper.consumer_offset, diff, last))
    out = _out(args)
    if out.as_json:
        out.json(
            {
                "brokerAddr": args.broker,
                "rows": [
                    {
                        "topic": mq.topic,
                        "group": group,
                        "brokerName": mq.broker_name,
                        "queueId": mq.queue_id,
                        "brokerOffset": broker_offset,
                        "consumerOffset": consumer_offset,
                        "diff": diff,
                        "lastTime": last,
                    }
                    for mq, group, broker_offset, consumer_offset, diff, last in rows
                ],
                "totalDiff": total_diff,
            }
        )
        return
    print(
        f"{'#Topic':<32}  {'#Group':<32}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
        f"{'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime"
    )
    for mq, group, broker_offset, consumer_offset, diff, last in rows:
        print(
            f"{mq.topic:<32}  {group:<32}  {mq.broker_name:<32}  {mq.queue_id:<4}  {broker_offset:<20}  "
            f"{consumer_offset:<20}  {diff:<20}  {last}"
        )
    print(f"\nDiff Total: {total_diff}")


async def cluster_rt(admin: AdminClient, args: argparse.Namespace) -> None:
    """``clusterRT``: send ``-a`` messages of ``-s`` bytes to each broker's own topic (named after
    the broker) and print the mean send time, all ``-i`` seconds; ``--rounds`` stops (mqadmin
    runs until interrupted)."""
    if args.amount < 2:
        raise ClientError("-a amount must be >= 2: the first message is a warm-up sample and is excluded")
    info = await admin.cluster_info()
    clusters = [args.cluster] if args.cluster else sorted(info.cluster_addr_table)
    out = _out(args)
    if not args.print_log and not out.as_json:
        print(
            f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<4}  {'#successCount':<8}  {'#failCount':<8}"
        )
    results = []
    producer = Producer(f"CLUSTER_RT_{time.time_ns()}", ";".join(admin.client_config.namesrv_addrs))
    await producer.start()
    try:
        round_number = 0
        while True:
            for cluster in clusters:
                names = info.cluster_addr_table.get(cluster)
                if names is None:
                    out.line(f"cluster [{cluster}] not exist")
                    break
                for name in sorted(names):
                    rt_ms, ok, failed = await _send_rt(producer, Message(name, b"a" * args.size), args.amount)
                    results.append(
                        {
                            "clusterName": cluster,
                            "brokerName": name,
                            "rt": round(rt_ms, 2),
                            "successCount": ok,
                            "failCount": failed,
                        }
                    )
                    if out.as_json:
                        continue
                    if args.print_log:
                        now = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=8)))
                        print(f"{now:%Y-%m-%d %H:%M:%S}|{args.machine_room}|{cluster}|{name}|{round(rt_ms)}")
                    else:
                        print(f"{cluster:<24}  {name:<24}  {rt_ms:<8.2f}  {ok:<16}  {failed:<16}")
            round_number += 1
            if args.rounds and round_number >= args.rounds:
                break
            await asyncio.sleep(args.interval)
    except asyncio.CancelledError:  # Ctrl-C: what was measured still counts
        if out.as_json:
            out.json(results)
        print(f"clusterRT: {round_number} rounds, {len(results)} samples before Ctrl-C", file=sys.stderr)
        raise
    finally:
        await producer.shutdown()
    if out.as_json:
        out.json(results)


async def _send_rt(producer: Producer, message: Message, amount: int) -> tuple[float, int, int]:
    elapsed_ms = 0.0
    ok = failed = 0
    for index in range(amount):
        started = time.monotonic()
        try:
            await producer.send(message)
            ok += 1
        except OrbitError:
            failed += 1
        if index:
            elapsed_ms += (time.monotonic() - started) * 1000
    return elapsed_ms / (amount - 1), ok, failed


# -- consume queues -----------------------------------------------------------------------------


async def query_cq(admin: AdminClient, args: argparse.Namespace) -> None:
    """``queryCq -t T -q QUEUE -i INDEX [-c COUNT] [-b ADDR] [-g GROUP]``: consume queue entries."""
    addr = args.broker
    if not addr:
        route = await admin.topic_route(args.topic)
        addrs = [data.broker_addrs[0] for data in route.broker_datas if 0 in data.broker_addrs]
        if not addrs:
            raise ClientError(f"topic {args.topic} has no master in its route")
        addr = addrs[0]
    body = await admin.query_consume_queue(addr, args.topic, args.queue, args.index, args.count, args.group)
    out = _out(args)
    if out.as_json:
        out.json(
            {
                "brokerAddr": addr,
                "maxQueueIndex": body.max_queue_index,
                "minQueueIndex": body.min_queue_index,
                "filterData": body.filter_data,
                "subscriptionData": None
                if body.subscription_data is None
                else {"topic": body.subscription_data.topic, "subString": body.subscription_data.sub_string},
                "queueData": [
                    {
                        "index": args.index + position,
                        "physicOffset": entry.physic_offset,
                        "physicSize": entry.physic_size,
                        "tagsCode": entry.tags_code,
                        "eval": entry.eval,
                    }
                    for position, entry in enumerate(body.queue_data)
                ],
            }
        )
        return
    rule = "======================================"
    if body.subscription_data is not None:
        subscription = body.subscription_data
        document = {
            "expressionType": subscription.expression_type,
            "subString": subscription.sub_string,
            "tagsSet": sorted(subscription.tags_set),
            "topic": subscription.topic,
        }
        print(f"Subscription data: \n{orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()}")
        print(rule)
    if body.filter_data is not None:
        print(f"Filter data: \n{body.filter_data}")
        print(rule)
    print(f"Queue data: \nmax: {body.max_queue_index}, min: {body.min_queue_index}")
    print(rule)
    for position, entry in enumerate(body.queue_data):
        print(f"idx: {args.index + position}\n{entry.java_string()}\n{rule}")
