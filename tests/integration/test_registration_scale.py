"""A broker with 100,000 topics stays routable: its registration fits the name server's frame limit.

Method: a name server process and a broker process whose topics.json already holds 100,000
topics (as 100,000 UPDATE_AND_CREATE_TOPIC requests would leave it, written before the start
so the test does not spend a minute creating them). The broker must register them all: the
name server then routes the first and the last, and keeps routing them after the broker
restarts. The JSON form of that registration is about 17 MiB (checked here), more than one
frame carries; the broker sends RocketMQ's compressed form.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from orbitmq.broker.topics import TopicConfigTable
from orbitmq.model.route import TopicConfig
from orbitmq.protocol.bodies import RegisterBrokerBody, decode_topic_route, encode_register_broker_body
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.frame import MAX_FRAME_BYTES
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import start_broker, start_namesrv

TOPIC_COUNT = 100_000


def _seed_topics(store: Path) -> list[str]:
    names = [f"ScaleTopic_{index:06d}_of_100000" for index in range(TOPIC_COUNT)]
    table = TopicConfigTable()
    for name in names:
        table.put(TopicConfig(name, 4, 4))
    # Sent as plain JSON, this registration would not fit in one frame.
    assert len(encode_register_broker_body(RegisterBrokerBody(table.snapshot()))) > MAX_FRAME_BYTES
    config_dir = store / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "topics.json").write_bytes(table.encode())
    return names


def _wait_route(namesrv_addr: str, topic: str, timeout_s: float = 60) -> None:
    """Until the name server routes ``topic`` to broker-a (a busy machine may answer slowly)."""

    async def poll() -> None:
        client = RemotingClient()
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                response = await client.invoke(namesrv_addr, request, timeout_ms=10_000)
                if response.code == ResponseCode.SUCCESS:
                    assert {q.broker_name for q in decode_topic_route(response.body).queue_datas} == {
                        "broker-a"
                    }
                    return
                await asyncio.sleep(0.1)
            raise AssertionError(f"no route of {topic} within {timeout_s} s")
        finally:
            await client.close()

    asyncio.run(poll())


def test_registration_publishes_routes_of_100000_topics(tmp_path: Path) -> None:
    names = _seed_topics(tmp_path / "broker-a" / "store")
    namesrv = start_namesrv(tmp_path)
    broker = None
    try:
        broker = start_broker(tmp_path, namesrv.addr)
        for topic in (names[0], names[-1]):
            _wait_route(namesrv.addr, topic)
        assert broker.stop() == 0
        broker.start()
        _wait_route(namesrv.addr, names[-1])
        assert "Traceback" not in namesrv.log() + broker.log()
    finally:
        if broker is not None:
            broker.kill()
        namesrv.kill()
