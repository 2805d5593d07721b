"""`python -m orbitmq.namesrv` as a real process on 127.0.0.1.

Method: start the command on a free port, register a fake broker over a RemotingClient, read
routes and cluster info as a client would, then close the broker's connection and watch its
routes go. Every process is killed in teardown.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.model.route import PERM_INHERIT, PERM_READ_WRITE, DataVersion, TopicConfig
from orbitmq.protocol.bodies import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    decode_cluster_info,
    decode_topic_route,
    encode_register_broker_body,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, start_namesrv

pytestmark = pytest.mark.integration

BROKER_ADDR = "127.0.0.1:10911"


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_namesrv(tmp_path)
    try:
        yield proc
    finally:
        proc.kill()


def register_request(broker_name: str = "broker-a", broker_addr: str = BROKER_ADDR) -> RemotingCommand:
    topics = {
        "TopicA": TopicConfig("TopicA", 4, 4),
        "TBW102": TopicConfig("TBW102", 8, 8, PERM_READ_WRITE | PERM_INHERIT),
    }
    body = encode_register_broker_body(
        RegisterBrokerBody(TopicConfigSerializeWrapper(topics, DataVersion(1, 1)))
    )
    ext = {
        "brokerName": broker_name,
        "brokerAddr": broker_addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": "",
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


async def route_code(client: RemotingClient, addr: str, topic: str) -> int:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return int((await client.invoke(addr, request)).code)


async def test_namesrv_process_serves_routes_and_forgets_closed_broker(namesrv: ServerProcess) -> None:
    broker = RemotingClient()
    reader = RemotingClient()
    try:
        assert (await broker.invoke(namesrv.addr, register_request())).code == ResponseCode.SUCCESS
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})
        route = decode_topic_route((await reader.invoke(namesrv.addr, request)).body)
        assert [b.broker_addrs for b in route.broker_datas] == [{0: BROKER_ADDR}]
        info_request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        info = decode_cluster_info((await reader.invoke(namesrv.addr, info_request)).body)
        assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}

        await broker.close()
        for _ in range(100):
            if await route_code(reader, namesrv.addr, "TopicA") == ResponseCode.TOPIC_NOT_EXIST:
                break
            await asyncio.sleep(0.05)
        assert await route_code(reader, namesrv.addr, "TopicA") == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await broker.close()
        await reader.close()


async def test_namesrv_processes_side_by_side_are_independent(tmp_path: Path, namesrv: ServerProcess) -> None:
    second = start_namesrv(tmp_path, name="namesrv-2")
    client = RemotingClient()
    try:
        await client.invoke(namesrv.addr, register_request())
        assert await route_code(client, namesrv.addr, "TopicA") == ResponseCode.SUCCESS
        assert await route_code(client, second.addr, "TopicA") == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await client.close()
        second.kill()


def test_namesrv_process_exits_cleanly_on_sigterm(namesrv: ServerProcess) -> None:
    assert namesrv.proc is not None
    namesrv.proc.send_signal(signal.SIGTERM)
    assert namesrv.proc.wait(15) == 0
    assert "stopped" in namesrv.log()


def test_namesrv_process_rejects_unknown_config_key(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=0\nlistenPrt=1\n")
    result = subprocess.run(
        [sys.executable, "-m", "orbitmq.namesrv", "-c", str(conf)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "listenPrt" in result.stderr and "listenPort" in result.stderr
