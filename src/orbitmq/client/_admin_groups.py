"""Admin operations on topics' statistics and consumer/producer groups.

Requests go to every relevant master at once and their answers are merged, so one call covers
a whole cluster (one round trip, not one per queue):

==========================  ======================================================================
operation                   requests
==========================  ======================================================================
topic_stats                 GET_TOPIC_STATS_INFO (202) to each master of the topic's route
topic_consumers             QUERY_TOPIC_CONSUME_BY_WHO (300) to each master of the route
consume_stats               GET_CONSUME_STATS (208) to every master of the cluster
all_consume_stats           GET_BROKER_CONSUME_STATS (317) to every master: every group at once
consumer_connection         GET_CONSUMER_CONNECTION_LIST (203); the first master that knows it
producer_connection         GET_PRODUCER_CONNECTION_LIST (204) to each master, merged
subscription_groups         GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) to each master, merged
create/delete_subscription  UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) / DELETE_SUBSCRIPTIONGROUP
_group                      (207) to every master of the cluster
clone_group_offset          CLONE_GROUP_OFFSET (314) to every master
consumer_running_info       GET_CONSUMER_RUNNING_INFO (307), relayed by a broker to the client
consume_message_directly    CONSUME_MESSAGE_DIRECTLY (309), relayed to the client
reset_offset                INVOKE_BROKER_TO_RESET_OFFSET (222) to each master of the route
==========================  ======================================================================
"""

from __future__ import annotations

from orbitmq.client._admin_core import AdminCore, gather_by, invoke, route_master_addrs
from orbitmq.errors import (
    ConsumerNotOnlineError,
    QueryNotFoundError,
    SubscriptionGroupNotExistError,
    error_for_code,
)
from orbitmq.model.message import MessageQueue
from orbitmq.model.subscription_group import SubscriptionGroupConfig
from orbitmq.protocol.admin_bodies import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    TopicOffset,
    decode_consume_stats,
    decode_consume_stats_list,
    decode_consumer_connection,
    decode_group_list,
    decode_mq_offsets,
    decode_producer_connection,
    decode_subscription_group_wrapper,
    decode_topic_stats_table,
    encode_subscription_group_config,
)
from orbitmq.protocol.admin_headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from orbitmq.protocol.client_bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    decode_consume_message_directly_result,
    decode_consumer_running_info,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.fastjson import loads
from orbitmq.protocol.headers import GetConsumerRunningInfoRequestHeader, ResetOffsetRequestHeader

__all__ = [
    "all_consume_stats",
    "clone_group_offset",
    "consume_message_directly",
    "consume_stats",
    "consumer_connection",
    "consumer_running_info",
    "create_subscription_group",
    "delete_subscription_group",
    "producer_connection",
    "reset_offset",
    "subscription_groups",
    "topic_consumers",
    "topic_stats",
]


async def topic_stats(admin: AdminCore, topic: str) -> dict[MessageQueue, TopicOffset]:
    """Every queue's min/max offset and last store time, from each broker hosting ``topic``."""
    ext = GetTopicStatsInfoRequestHeader(topic).to_ext()

    async def one(addr: str) -> dict[MessageQueue, TopicOffset]:
        response = await admin._broker(addr, RequestCode.GET_TOPIC_STATS_INFO, ext, f"stats of topic {topic}")
        return decode_topic_stats_table(response.body)

    merged: dict[MessageQueue, TopicOffset] = {}
    for table in (await gather_by((await route_master_addrs(admin, topic)).values(), one)).values():
        merged.update(table)
    return dict(sorted(merged.items()))


async def topic_consumers(admin: AdminCore, topic: str) -> list[str]:
    """Groups online on ``topic`` or with offsets on it, on any broker hosting it."""
    ext = QueryTopicConsumeByWhoRequestHeader(topic).to_ext()

    async def one(addr: str) -> list[str]:
        response = await admin._broker(
            addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, ext, f"groups of {topic}"
        )
        return decode_group_list(response.body)

    found = await gather_by((await route_master_addrs(admin, topic)).values(), one)
    return sorted({group for groups in found.values() for group in groups})


async def consume_stats(admin: AdminCore, group: str, topic: str | None = None) -> ConsumeStats:
    """``group``'s offsets on every queue (of ``topic``, or every topic it has offsets on).

    Raises:
        ConsumerNotOnlineError: no broker has any offset of the group (RocketMQ's tools say
            the same for a group with no progress anywhere).
    """
    ext = GetConsumeStatsRequestHeader(group, topic).to_ext()

    async def one(addr: str) -> ConsumeStats:
        response = await admin._broker(addr, RequestCode.GET_CONSUME_STATS, ext, f"consume stats of {group}")
        return decode_consume_stats(response.body)

    merged = ConsumeStats()
    for stats in (await gather_by(await admin._master_addrs(None), one)).values():
        merged.offset_table.update(stats.offset_table)
        merged.consume_tps += stats.consume_tps
    if not merged.offset_table:
        raise ConsumerNotOnlineError(
            ResponseCode.CONSUMER_NOT_ONLINE,
            f"consumer group {group} has no offset on any broker{f' for topic {topic}' if topic else ''}",
        )
    merged.offset_table = dict(sorted(merged.offset_table.items()))
    return merged


async def all_consume_stats(admin: AdminCore, cluster: str | None = None) -> dict[str, ConsumeStats]:
    """Every group's consume stats on every master of ``cluster``, one request per broker."""

    async def one(addr: str) -> dict[str, list[ConsumeStats]]:
        response = await admin._broker(addr, RequestCode.GET_BROKER_CONSUME_STATS, {}, "broker consume stats")
        return decode_consume_stats_list(response.body)

    merged: dict[str, ConsumeStats] = {}
    for by_group in (await gather_by(await admin._master_addrs(cluster), one)).values():
        for group, items in by_group.items():
            target = merged.setdefault(group, ConsumeStats())
            for stats in items:
                target.offset_table.update(stats.offset_table)
                target.consume_tps += stats.consume_tps
    return dict(sorted(merged.items()))


async def consumer_connection(admin: AdminCore, group: str) -> ConsumerConnection:
    """The online members of ``group`` (from the first master that has them).

    Raises:
        ConsumerNotOnlineError: no broker has an online member of the group.
    """
    ext = GetConsumerConnectionListRequestHeader(group).to_ext()
    for addr in await admin._master_addrs(None):
        response = await invoke(admin, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, ext)
        if response.code == ResponseCode.SUCCESS:
            return decode_consumer_connection(response.body)
        if response.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise error_for_code(response.code, f"connections of {group} on broker {addr}: {response.remark}")
    raise ConsumerNotOnlineError(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")


async def producer_connection(
    admin: AdminCore, group: str, topic: str | None = None
) -> list[ClientConnection]:
    """The connections of producer ``group`` on the brokers of ``topic`` (or every master).

    Raises:
        QueryNotFoundError: no broker has a connection of the group (each answers SYSTEM_ERROR
            ``the producer group[...] not exist``).
        BrokerResponseError: a broker failed otherwise.
    """
    addrs = (
        list((await route_master_addrs(admin, topic)).values()) if topic else await admin._master_addrs(None)
    )
    ext = GetProducerConnectionListRequestHeader(group).to_ext()
    found: set[ClientConnection] = set()
    for addr in addrs:
        response = await invoke(admin, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, ext)
        if response.code == ResponseCode.SUCCESS:
            found.update(decode_producer_connection(response.body))
        elif "not exist" not in (response.remark or ""):
            raise error_for_code(response.code, f"producer connections on broker {addr}: {response.remark}")
    if not found:
        raise QueryNotFoundError(
            ResponseCode.QUERY_NOT_FOUND,
            f"producer group {group} has no online producer on {', '.join(addrs) or 'any broker'}",
        )
    return sorted(found)


async def subscription_groups(
    admin: AdminCore, cluster: str | None = None
) -> dict[str, SubscriptionGroupConfig]:
    async def one(addr: str) -> dict[str, SubscriptionGroupConfig]:
        response = await admin._broker(
            addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}, "group configs"
        )
        return decode_subscription_group_wrapper(response.body)

    merged: dict[str, SubscriptionGroupConfig] = {}
    for table in (await gather_by(await admin._master_addrs(cluster), one)).values():
        merged.update(table)
    return dict(sorted(merged.items()))


async def create_subscription_group(
    admin: AdminCore, config: SubscriptionGroupConfig, cluster: str | None = None
) -> list[str]:
    body = encode_subscription_group_config(config)
    addrs = await admin._master_addrs(cluster)
    for addr in addrs:
        response = await invoke(admin, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(
                response.code, f"create group {config.group_name} on broker {addr}: {response.remark}"
            )
    return addrs


async def delete_subscription_group(
    admin: AdminCore, group: str, cluster: str | None = None, *, clean_offset: bool = False
) -> list[str]:
    """Delete ``group`` from every master of ``cluster``.

    Raises:
        SubscriptionGroupNotExistError: no master has the group (a mistyped name is not "deleted").
    """
    if group not in await subscription_groups(admin, cluster):
        raise SubscriptionGroupNotExistError(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group {group} does not exist"
        )
    ext = DeleteSubscriptionGroupRequestHeader(group, clean_offset).to_ext()
    addrs = await admin._master_addrs(cluster)
    for addr in addrs:
        await admin._broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext, f"delete group {group}")
    return addrs


async def clone_group_offset(
    admin: AdminCore, src_group: str, dest_group: str, topic: str | None = None, *, offline: bool = False
) -> list[str]:
    ext = CloneGroupOffsetRequestHeader(src_group, dest_group, topic, offline).to_ext()
    addrs = (
        list((await route_master_addrs(admin, topic)).values()) if topic else await admin._master_addrs(None)
    )
    for addr in addrs:
        await admin._broker(
            addr, RequestCode.CLONE_GROUP_OFFSET, ext, f"clone offsets {src_group} -> {dest_group}"
        )
    return addrs


async def _relay(admin: AdminCore, group: str, code: int, ext: dict[str, str], what: str) -> bytes:
    """A request the broker relays to a client of ``group``: try each master until one has it."""
    last = ""
    for addr in await admin._master_addrs(None):
        response = await invoke(admin, addr, code, ext)
        if response.code == ResponseCode.SUCCESS:
            return response.body
        last = f"broker {addr}: {response.remark}"
        if "not online" not in (response.remark or ""):
            raise error_for_code(response.code, f"{what}: {last}")
    raise ConsumerNotOnlineError(ResponseCode.CONSUMER_NOT_ONLINE, f"{what}: {last or 'no broker'}")


async def consumer_running_info(
    admin: AdminCore, group: str, client_id: str, *, jstack: bool = False
) -> ConsumerRunningInfo:
    ext = GetConsumerRunningInfoRequestHeader(group, client_id, jstack).to_ext()
    body = await _relay(
        admin, group, RequestCode.GET_CONSUMER_RUNNING_INFO, ext, f"running info of {client_id}"
    )
    return decode_consumer_running_info(body)


async def consume_message_directly(
    admin: AdminCore, group: str, client_id: str, offset_msg_id: str, topic: str | None = None
) -> ConsumeMessageDirectlyResult:
    ext = ConsumeMessageDirectlyRequestHeader(group, client_id, offset_msg_id, topic=topic).to_ext()
    body = await _relay(
        admin, group, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, f"consume {offset_msg_id} on {client_id}"
    )
    return decode_consume_message_directly_result(body)


async def reset_offset(
    admin: AdminCore, group: str, topic: str, timestamp_ms: int, *, force: bool = True
) -> dict[MessageQueue, int]:
    """INVOKE_BROKER_TO_RESET_OFFSET on every broker hosting ``topic``; the new offsets.

    ``timestamp_ms`` -1 moves every queue to its end (skip accumulated messages).

    Raises:
        TopicNotExistError, SubscriptionGroupNotExistError: from the brokers, naming them.
    """
    ext = ResetOffsetRequestHeader(topic, group, timestamp_ms, force).to_ext()

    async def one(addr: str) -> dict[MessageQueue, int]:
        response = await admin._broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext, f"reset {group}")
        table = loads(response.body, "ResetOffsetBody").get("offsetTable") or {}
        return decode_mq_offsets(table, "ResetOffsetBody")

    merged: dict[MessageQueue, int] = {}
    for offsets in (await gather_by((await route_master_addrs(admin, topic)).values(), one)).values():
        merged.update(offsets)
    return dict(sorted(merged.items()))
