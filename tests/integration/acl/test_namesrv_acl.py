"""Acceptance 3: a name server with ``aclEnable=true`` keeps a stranger from taking a broker's routes.

A real broker registers with its admin key (``innerClientAuthenticationCredentials``); then a
stranger registers the same broker name at another address, unsigned, with an ordinary
account's key and with a wrong secret, and tries to unregister and delete the broker's
topics. Every attempt is refused with RocketMQ's ACL answer and the routes still name only the
real broker's address. Clients read routes without credentials, as RocketMQ's clients do.
"""

from __future__ import annotations

import asyncio
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.acl.signature import Credentials
from orbitmq.model.route import DataVersion, TopicConfig
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    decode_topic_route,
    encode_register_broker_body,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import (
    DeleteTopicFromNamesrvRequestHeader,
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)
from orbitmq.security import ACL_EXCEPTION
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, free_port, start_broker, wait_route, write_conf

pytestmark = pytest.mark.integration

ACCOUNTS = """accounts:
  - accessKey: brokeradmin
    secretKey: brokeradminsecret
    admin: true
  - accessKey: ordinary1
    secretKey: ordinarysecret
    defaultTopicPerm: PUB|SUB
"""
STRANGER_ADDR = "127.0.0.1:1"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    accounts = tmp_path / "plain_acl.yml"
    accounts.write_text(ACCOUNTS)
    port = free_port()
    conf = write_conf(
        tmp_path / "namesrv.conf",
        {"aclEnable": True, "aclFile": str(accounts), "bindAddress": "127.0.0.1", "listenPort": port},
    )
    namesrv = ServerProcess(
        "namesrv", [sys.executable, "-m", "orbitmq.namesrv", "-c", str(conf)], port, tmp_path / "namesrv",
        tmp_path / "namesrv.log",
    ).start()  # fmt: skip
    try:
        credentials = '{"accessKey":"brokeradmin","secretKey":"brokeradminsecret"}'
        broker = start_broker(
            tmp_path, namesrv.addr, bindAddress="127.0.0.1", innerClientAuthenticationCredentials=credentials
        )
        try:
            wait_route(namesrv.addr, "TBW102", {"broker-a"})
            yield namesrv, broker
        finally:
            broker.kill()
    finally:
        namesrv.kill()


def hijack_register() -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper({"TBW102": TopicConfig("TBW102", 8, 8)}, DataVersion())
    body = encode_register_broker_body(RegisterBrokerBody(wrapper))
    header = RegisterBrokerRequestHeader(
        broker_name="broker-a", broker_addr=STRANGER_ADDR, cluster_name="DefaultCluster", broker_id=0,
        ha_server_addr="", compressed=False, body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), body)


def hijack_unregister(real_addr: str) -> RemotingCommand:
    header = UnregisterBrokerRequestHeader("broker-a", real_addr, "DefaultCluster", 0)
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext())


def delete_topic() -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.DELETE_TOPIC_IN_NAMESRV, DeleteTopicFromNamesrvRequestHeader("TBW102").to_ext()
    )


def test_namesrv_acl_refuses_a_strangers_registration_and_keeps_the_route(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    namesrv, broker = cluster
    attempts = [
        (None, "No accessKey is configured"),
        (Credentials("ordinary1", "ordinarysecret"), "Need admin permission for request code={code}, but accessKey=ordinary1 is not"),
        (Credentials("brokeradmin", "guessed-secret"), "Check signature failed for accessKey=brokeradmin"),
    ]  # fmt: skip

    async def run() -> list[str]:
        client = RemotingClient()
        problems = []
        try:
            for credentials, reason in attempts:
                for request in (hijack_register(), hijack_unregister(broker.addr), delete_topic()):
                    if credentials is not None:
                        credentials.sign(request)
                    response = await client.invoke(namesrv.addr, request, 5000)
                    wanted = f"{ACL_EXCEPTION}: {reason.format(code=request.code)}"
                    if (response.code, response.remark) != (ResponseCode.SYSTEM_ERROR, wanted):
                        problems.append(
                            f"{request.code} with {credentials}: {response.code} {response.remark}"
                        )
            route = await client.invoke(
                namesrv.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
            )
            assert route.code == ResponseCode.SUCCESS
            addrs = [
                addr
                for data in decode_topic_route(route.body).broker_datas
                for addr in data.broker_addrs.values()
            ]
            if addrs != [broker.addr]:
                problems.append(f"route of TBW102 lists {addrs}, not only {broker.addr}")
        finally:
            await client.close()
        return problems

    problems = asyncio.run(run())
    assert not problems, "\n".join(problems)
    assert "refused request code 103" in namesrv.log()


def test_namesrv_acl_refuses_a_broker_without_credentials(
    cluster: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    namesrv, _ = cluster
    intruder = start_broker(tmp_path, namesrv.addr, name="broker-b", bindAddress="127.0.0.1")
    try:
        with pytest.raises(RuntimeError, match="not all of"):
            wait_route(namesrv.addr, "TBW102", {"broker-b"}, timeout_s=2.0)
        assert (
            "REGISTER_BROKER to name server" in intruder.log()
            and "No accessKey is configured" in intruder.log()
        )
    finally:
        intruder.kill()
