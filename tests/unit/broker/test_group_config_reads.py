"""GET_SUBSCRIPTIONGROUP_CONFIG for a group the broker does not have, against an in-process broker.

Method: a BrokerApp on 127.0.0.1 (port 0, tmp dir) with autoCreateSubscriptionGroup on (the
default) or off; raw admin commands from a RemotingClient, the group table read back with
GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app


async def _call(
    client: RemotingClient, addr: str, code: int, ext: dict[str, str], body: bytes = b""
) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext, body))


async def _table(client: RemotingClient, addr: str) -> dict[str, dict[str, object]]:
    listed = await _call(client, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
    table: dict[str, dict[str, object]] = orjson.loads(listed.body)["subscriptionGroupTable"]
    return table


async def test_group_config_read_of_a_deleted_group_answers_and_keeps_the_default_config(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path)
    try:
        addr = app.address
        config = orjson.dumps({"groupName": "CG_READ", "retryMaxTimes": 5, "retryQueueNums": 1})
        created = await _call(client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, config)
        assert created.code == ResponseCode.SUCCESS, created.remark
        deleted = await _call(client, addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "CG_READ"})
        assert deleted.code == ResponseCode.SUCCESS
        assert "CG_READ" not in await _table(client, addr)
        # RocketMQ 5's broker (autoCreateSubscriptionGroup) creates the group the read names and
        # answers its default config (oracle: subscription_groups / get deleted).
        for group in ("CG_READ", "CG_NEVER_SEEN"):
            answer = await _call(client, addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            document = orjson.loads(answer.body)
            assert (document["groupName"], document["retryMaxTimes"], document["retryQueueNums"]) == (
                group,
                16,
                1,
            )
            assert group in await _table(client, addr)
    finally:
        await app.shutdown()


async def test_group_config_read_without_auto_create_answers_group_not_exist(
    tmp_path: Path, client: RemotingClient
) -> None:
    app = await start_broker_app(tmp_path, autoCreateSubscriptionGroup="false")
    try:
        answer = await _call(
            client, app.address, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "CG_NO"}
        )
        assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "CG_NO" in (answer.remark or "")
        assert "CG_NO" not in await _table(client, app.address)
    finally:
        await app.shutdown()
