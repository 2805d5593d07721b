"""Admin operations on brokers and name servers: runtime figures, stats items, live config, KV.

==========================  ======================================================================
operation                   requests
==========================  ======================================================================
broker_runtime_info         GET_BROKER_RUNTIME_INFO (28) to one broker; ``..._infos`` to every
                            master of a cluster at once
broker_stats                VIEW_BROKER_STATS_DATA (315)
broker_config               GET_BROKER_CONFIG (26)
update_broker_config        UPDATE_BROKER_CONFIG (25) to one broker or every master of a cluster
kv (put/get/delete/list)    PUT_KV_CONFIG (100), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102),
                            GET_KVLIST_BY_NAMESPACE (219) to the name servers (writes to each)
namesrv_config              GET_NAMESRV_CONFIG (319) to each name server
update_namesrv_config       UPDATE_NAMESRV_CONFIG (318) to each name server
set_write_perm              WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327) to
                            one name server
query_consume_queue         QUERY_CONSUME_QUEUE (321) to one broker
==========================  ======================================================================
"""

from __future__ import annotations

from orbitmq.client._admin_core import AdminCore, gather_by, invoke
from orbitmq.errors import error_for_code
from orbitmq.protocol.admin_bodies import (
    BrokerStatsData,
    QueryConsumeQueueResponseBody,
    decode_broker_stats_data,
    decode_query_consume_queue,
)
from orbitmq.protocol.admin_headers import (
    AddWritePermOfBrokerRequestHeader,
    DeleteKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    PutKVConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from orbitmq.protocol.bodies import decode_kv_table
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.headers import GetKVConfigRequestHeader

__all__ = [
    "broker_config",
    "broker_runtime_info",
    "broker_runtime_infos",
    "broker_stats",
    "delete_kv_config",
    "get_kv_config",
    "kv_list",
    "namesrv_config",
    "put_kv_config",
    "query_consume_queue",
    "set_write_perm",
    "update_broker_config",
    "update_namesrv_config",
]


async def broker_runtime_info(admin: AdminCore, addr: str) -> dict[str, str]:
    response = await admin._broker(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {}, "runtime info")
    return decode_kv_table(response.body)


async def broker_runtime_infos(admin: AdminCore, cluster: str | None = None) -> dict[str, dict[str, str]]:
    return await gather_by(await admin._master_addrs(cluster), lambda addr: broker_runtime_info(admin, addr))


async def broker_stats(
    admin: AdminCore, addr: str, stats_name: str, stats_key: str
) -> BrokerStatsData | None:
    """One stats item of one broker; None when the broker never recorded it."""
    ext = ViewBrokerStatsDataRequestHeader(stats_name, stats_key).to_ext()
    response = await invoke(admin, addr, RequestCode.VIEW_BROKER_STATS_DATA, ext)
    if response.code == ResponseCode.SYSTEM_ERROR and "not exist" in (response.remark or ""):
        return None
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(
            response.code, f"stats {stats_name} {stats_key} on broker {addr}: {response.remark}"
        )
    return decode_broker_stats_data(response.body)


async def broker_config(admin: AdminCore, addr: str) -> dict[str, str]:
    response = await admin._broker(addr, RequestCode.GET_BROKER_CONFIG, {}, "get broker config")
    config: dict[str, str] = {}
    for line in response.body.decode("utf-8", "replace").splitlines():
        key, separator, value = line.partition("=")
        if separator and key.strip():
            config[key.strip()] = value.strip()
    return config


async def update_broker_config(
    admin: AdminCore, updates: dict[str, str], *, addr: str | None = None, cluster: str | None = None
) -> list[str]:
    """Apply ``updates`` to ``addr``, or to every master of ``cluster``; the brokers updated."""
    addrs = [addr] if addr else await admin._master_addrs(cluster)
    body = "".join(f"{key}={value}\n" for key, value in updates.items()).encode()
    for target in addrs:
        response = await invoke(admin, target, RequestCode.UPDATE_BROKER_CONFIG, {}, body)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"update config of broker {target}: {response.remark}")
    return addrs


async def _namesrv_each(admin: AdminCore, code: int, ext: dict[str, str], what: str) -> None:
    for addr in admin.client_config.namesrv_addrs:
        response = await invoke(admin, addr, code, ext)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"{what} on name server {addr}: {response.remark}")


async def put_kv_config(admin: AdminCore, namespace: str, key: str, value: str) -> None:
    ext = PutKVConfigRequestHeader(namespace, key, value).to_ext()
    await _namesrv_each(admin, RequestCode.PUT_KV_CONFIG, ext, f"put KV {namespace}/{key}")


async def delete_kv_config(admin: AdminCore, namespace: str, key: str) -> None:
    ext = DeleteKVConfigRequestHeader(namespace, key).to_ext()
    await _namesrv_each(admin, RequestCode.DELETE_KV_CONFIG, ext, f"delete KV {namespace}/{key}")


async def get_kv_config(admin: AdminCore, namespace: str, key: str) -> str | None:
    """The value, or None when no name server has it."""
    request_ext = GetKVConfigRequestHeader(namespace, key).to_ext()
    for addr in admin.client_config.namesrv_addrs:
        response = await invoke(admin, addr, RequestCode.GET_KV_CONFIG, request_ext)
        if response.code == ResponseCode.SUCCESS:
            return response.ext_fields.get("value")
        if response.code != ResponseCode.QUERY_NOT_FOUND:
            raise error_for_code(
                response.code, f"get KV {namespace}/{key} on name server {addr}: {response.remark}"
            )
    return None


async def kv_list(admin: AdminCore, namespace: str) -> dict[str, str]:
    """Every key of ``namespace`` (empty when the name server has none)."""
    request_ext = GetKVListByNamespaceRequestHeader(namespace).to_ext()
    addr = admin.client_config.namesrv_addrs[0]
    response = await invoke(admin, addr, RequestCode.GET_KVLIST_BY_NAMESPACE, request_ext)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return {}
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(response.code, f"KV list {namespace} on name server {addr}: {response.remark}")
    return decode_kv_table(response.body)


def _properties(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, separator, value = line.partition("=")
        if separator and key.strip() and not key.lstrip().startswith("#"):
            values[key.strip()] = value.strip()
    return values


async def namesrv_config(admin: AdminCore, addrs: list[str] | None = None) -> dict[str, dict[str, str]]:
    """Every config key of each name server (all of the client's without ``addrs``), by address."""

    async def one(addr: str) -> dict[str, str]:
        response = await invoke(admin, addr, RequestCode.GET_NAMESRV_CONFIG, {})
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"config of name server {addr}: {response.remark}")
        return _properties(bytes(response.body).decode("utf-8", "replace"))

    return await gather_by(addrs or admin.client_config.namesrv_addrs, one)


async def update_namesrv_config(
    admin: AdminCore, updates: dict[str, str], addrs: list[str] | None = None
) -> list[str]:
    """Apply ``updates`` on each name server (all of the client's without ``addrs``); the servers."""
    targets = addrs or list(admin.client_config.namesrv_addrs)
    body = "".join(f"{key}={value}\n" for key, value in updates.items()).encode()
    for addr in targets:
        response = await invoke(admin, addr, RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
        if response.code != ResponseCode.SUCCESS:
            raise error_for_code(response.code, f"update config of name server {addr}: {response.remark}")
    return targets


async def set_write_perm(admin: AdminCore, namesrv_addr: str, broker_name: str, writable: bool) -> int:
    """Wipe (or add back) ``broker_name``'s write permission on one name server; topics changed."""
    if writable:
        code, ext, field = (
            RequestCode.ADD_WRITE_PERM_OF_BROKER,
            AddWritePermOfBrokerRequestHeader(broker_name).to_ext(),
            "addTopicCount",
        )
    else:
        code, ext, field = (
            RequestCode.WIPE_WRITE_PERM_OF_BROKER,
            WipeWritePermOfBrokerRequestHeader(broker_name).to_ext(),
            "wipeTopicCount",
        )
    response = await invoke(admin, namesrv_addr, code, ext)
    if response.code != ResponseCode.SUCCESS:
        what = "add" if writable else "wipe"
        raise error_for_code(
            response.code,
            f"{what} write perm of broker {broker_name} on name server {namesrv_addr}: {response.remark}",
        )
    return int(response.ext_fields.get(field, "0"))


async def query_consume_queue(
    admin: AdminCore, addr: str, topic: str, queue_id: int, index: int, count: int, group: str | None = None
) -> QueryConsumeQueueResponseBody:
    """``count`` consume queue entries of one queue from ``index``, on the broker at ``addr``."""
    ext = QueryConsumeQueueRequestHeader(topic, queue_id, index, count, group).to_ext()
    response = await invoke(admin, addr, RequestCode.QUERY_CONSUME_QUEUE, ext)
    if response.code != ResponseCode.SUCCESS:
        raise error_for_code(
            response.code, f"consume queue {queue_id}@{topic} on broker {addr}: {response.remark}"
        )
    return decode_query_consume_queue(response.body)
