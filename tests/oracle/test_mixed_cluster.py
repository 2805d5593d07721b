"""Mixed clusters: Apache RocketMQ's and OrbitMQ's name servers and brokers in one cluster.

One cluster for the module: an Apache name server and an OrbitMQ one, every broker registered
with both; broker group ``broker-ap`` is an Apache SYNC_MASTER (``inSyncReplicas=2``: each send
waits for the slave's acknowledgement) with an OrbitMQ SLAVE, and broker group ``broker-or`` an
OrbitMQ SYNC_MASTER with an Apache SLAVE. One topic lives on both groups. A client routes
through either name server to both groups; then each master is killed and a consumer reads
every acknowledged message of that group from its slave, and each slave (the OrbitMQ one, then
the Apache one) starts again as its group's master on its own store with what it replicated:
the messages and the consumer offsets. The tests run in file order (the last ones kill the
masters). docs/migration.md runs these steps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orbitmq.client import SendStatus
from orbitmq.client.producer import Producer
from orbitmq.model.message import Message, MessageQueue
from orbitmq.protocol import fastjson
from orbitmq.protocol.bodies import decode_topic_route
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import GetRouteInfoRequestHeader
from orbitmq.transport.connection import RemotingClient
from tests.oracle import workload
from tests.support.oracle_servers import start_apache_broker, start_apache_namesrv, tools_available
from tests.support.processes import ServerProcess, create_topic, start_broker, start_namesrv, wait_route

pytestmark = [pytest.mark.oracle, pytest.mark.xdist_group("oracle-mixed"), pytest.mark.timeout(600)]

TOPIC = "MixedOrders"
PROBE_TOPIC = "MixedProbe"
GROUPS = ("broker-ap", "broker-or")
MESSAGES = 100


@dataclass
class Cluster:
    apache_namesrv: ServerProcess
    orbitmq_namesrv: ServerProcess
    masters: dict[str, ServerProcess]
    slaves: dict[str, ServerProcess]
    tmp_path: Path
    servers: list[ServerProcess]
    written: dict[str, workload.Written] = field(default_factory=dict)

    @property
    def namesrv_list(self) -> str:
        return f"{self.apache_namesrv.addr};{self.orbitmq_namesrv.addr}"

    @property
    def namesrvs(self) -> tuple[str, str]:
        return self.apache_namesrv.addr, self.orbitmq_namesrv.addr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    missing = tools_available()
    if missing:
        pytest.skip(f"the oracle tier needs {missing} on PATH")
    tmp_path = tmp_path_factory.mktemp("mixed")
    servers: list[ServerProcess] = []
    try:
        servers.append(start_apache_namesrv(tmp_path))
        servers.append(start_namesrv(tmp_path, "orbitmq-namesrv"))
        names = f"{servers[0].addr};{servers[1].addr}"
        apache_master = start_apache_broker(
            tmp_path, names, "broker-ap", brokerRole="SYNC_MASTER", inSyncReplicas=2
        )
        servers.append(apache_master)
        # vipChannelEnabled: the Java slave fetches its master's topics on listenPort - 2.
        orbitmq_master = start_broker(
            tmp_path, names, "broker-or", brokerRole="SYNC_MASTER", vipChannelEnabled=True
        )
        servers.append(orbitmq_master)
        # Topics first: a slave copies the master's topics when it starts.
        for master in (apache_master, orbitmq_master):
            create_topic(master.addr, TOPIC, queues=4)
        orbitmq_slave = start_broker(
            tmp_path,
            names,
            "broker-ap",
            brokerId=1,
            brokerRole="SLAVE",
            storePathRootDir=str(tmp_path / "slave-ap"),
        )
        servers.append(orbitmq_slave)
        apache_slave = start_apache_broker(
            tmp_path,
            names,
            "broker-or",
            brokerId=1,
            brokerRole="SLAVE",
            # RocketMQ 5's slave refuses every pull ("[REJECTREQUEST]system busy") without it.
            slaveReadEnable=True,
            storePathRootDir=str(tmp_path / "slave-or"),
            storePathCommitLog=str(tmp_path / "slave-or" / "commitlog"),
        )
        servers.append(apache_slave)
        for master in (apache_master, orbitmq_master):
            create_topic(master.addr, PROBE_TOPIC, queues=1)
        for namesrv in servers[:2]:
            wait_route(namesrv.addr, TOPIC, set(GROUPS), timeout_s=60)
        asyncio.run(_wait_replicating(servers[0].addr))
        yield Cluster(
            servers[0],
            servers[1],
            {"broker-ap": apache_master, "broker-or": orbitmq_master},
            {"broker-ap": orbitmq_slave, "broker-or": apache_slave},
            tmp_path,
            servers,
        )
    finally:
        for server in reversed(servers):
            server.stop(timeout_s=15)


async def _wait_replicating(namesrv_addr: str, timeout_s: float = 90) -> None:
    """Until a send to each group answers SEND_OK: its SYNC_MASTER has a slave in sync.

    A slave connects to its master's HA port only after its first registration (a Java one a
    few seconds after its ports open); sends before that answer SLAVE_NOT_AVAILABLE.
    """
    synced: set[str] = set()
    producer = Producer("mixed_probe", namesrv_addr)
    await producer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while synced != set(GROUPS):
            if time.monotonic() > deadline:
                raise AssertionError(f"no slave in sync for {set(GROUPS) - synced} after {timeout_s} s")
            result = await producer.send(Message(PROBE_TOPIC, b"probe"))
            if result.status is SendStatus.OK:
                synced.add(result.message_queue.broker_name)
            else:
                await asyncio.sleep(0.5)
    finally:
        await producer.shutdown()


async def _route(namesrv_addr: str, topic: str) -> dict[str, dict[int, str]]:
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext()
        )
        response = await client.invoke(namesrv_addr, request, timeout_ms=5000)
    finally:
        await client.close()
    if response.code != ResponseCode.SUCCESS or not response.body:
        return {}
    route = decode_topic_route(response.body)
    return {data.broker_name: dict(data.broker_addrs) for data in route.broker_datas}


def _wait_for_route(namesrv_addr: str, wanted: dict[str, set[int]], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        route = asyncio.run(_route(namesrv_addr, TOPIC))
        ids = {name: set(addrs) for name, addrs in route.items()}
        if ids == wanted:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"route of {TOPIC} at {namesrv_addr}: {ids}, wanted {wanted}")
        time.sleep(0.5)


def test_mixed_cluster_both_nameservers_route_to_both_broker_groups(cluster: Cluster) -> None:
    # An OrbitMQ broker registered with Apache's name server and the reverse, slaves included.
    for namesrv_addr in cluster.namesrvs:
        _wait_for_route(namesrv_addr, {"broker-ap": {0, 1}, "broker-or": {0, 1}})


def test_mixed_cluster_client_produces_and_consumes_across_both_groups(cluster: Cluster) -> None:
    apache_ns, orbitmq_ns = cluster.namesrvs
    # Written through Apache's name server (SYNC_MASTER sends answer SEND_OK once the slave has
    # the message), read back through OrbitMQ's, and the reverse.
    first = asyncio.run(workload.write(apache_ns, [TOPIC], MESSAGES, tag="_via_apache"))
    assert {m.topic for m in first.messages} == {TOPIC}
    second = asyncio.run(workload.write(orbitmq_ns, [TOPIC], MESSAGES, tag="_via_orbitmq"))
    expected = workload.Written(first.messages + second.messages, second.offsets)
    for namesrv_addr in (orbitmq_ns, apache_ns):
        found = asyncio.run(workload.read(namesrv_addr, [TOPIC]))
        assert workload.missing(expected, found) == []
        assert found.offsets == expected.offsets
    cluster.written["all"] = expected


def _wait_for_topic(broker_addr: str, topic: str, timeout_s: float) -> None:
    async def topics() -> set[str]:
        client = RemotingClient()
        try:
            request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
            response = await client.invoke(broker_addr, request, timeout_ms=5000)
        finally:
            await client.close()
        return set(fastjson.loads(response.body)["topicConfigTable"]) if response.body else set()

    deadline = time.monotonic() + timeout_s
    while topic not in asyncio.run(topics()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{broker_addr} did not learn topic {topic} in {timeout_s} s")
        time.sleep(1)


def _alive(server: ServerProcess) -> bool:
    return server.proc is not None and server.proc.poll() is None


@pytest.mark.parametrize("group", GROUPS)
def test_mixed_cluster_slave_serves_every_acknowledged_message_after_master_dies(
    cluster: Cluster, group: str
) -> None:
    expected = cluster.written.get("all")
    if expected is None:
        pytest.skip("needs the messages of the produce-and-consume test")
    # A RocketMQ 5 slave copies its master's topics 60 s after it starts, then every 60 s
    # (SlaveSynchronize); until then it answers TOPIC_NOT_EXIST. An OrbitMQ slave copies them at once.
    _wait_for_topic(cluster.slaves[group].addr, TOPIC, timeout_s=120)
    # A slave's consumer offsets: an OrbitMQ slave copies its master's every 10 s
    # (slaveSyncInterval), a RocketMQ 5 one with its topics, every 60 s; the wait for the topic
    # above usually covers it, since the offsets were committed before the first copy.
    _wait_for_offsets(
        cluster.slaves[group].addr, group, expected, timeout_s=30 if group == "broker-ap" else 75
    )
    cluster.masters[group].kill()
    wanted = {name: {1} if not _alive(cluster.masters[name]) else {0, 1} for name in GROUPS}
    for namesrv_addr in cluster.namesrvs:
        _wait_for_route(namesrv_addr, wanted)
    found = asyncio.run(workload.read(cluster.orbitmq_namesrv.addr, [TOPIC]))
    assert workload.missing(expected, found) == []


def test_mixed_cluster_orbitmq_slave_restarted_as_master_takes_over_its_group(cluster: Cluster) -> None:
    # The last step of a move: the OrbitMQ slave of the (gone) Apache master starts again as
    # the group's master on its own store, with the messages and offsets it replicated.
    expected = cluster.written.get("all")
    if expected is None or _alive(cluster.masters["broker-ap"]):
        pytest.skip("needs the Apache master killed by the previous test")
    slave = cluster.slaves["broker-ap"]
    slave.stop()
    master = start_broker(
        cluster.tmp_path,
        cluster.namesrv_list,
        "broker-ap",
        brokerRole="ASYNC_MASTER",
        storePathRootDir=str(cluster.tmp_path / "slave-ap"),
    )
    cluster.servers.append(master)
    for namesrv_addr in cluster.namesrvs:
        _wait_for_route(namesrv_addr, {"broker-ap": {0}, "broker-or": {1}})
    more = asyncio.run(_send(cluster.orbitmq_namesrv.addr, 20))
    assert {m.topic for m in more.messages} == {TOPIC}
    found = asyncio.run(workload.read(cluster.apache_namesrv.addr, [TOPIC]))
    assert workload.missing(workload.Written(expected.messages + more.messages), found) == []
    kept = {key: offset for key, offset in expected.offsets.items() if key[1] == "broker-ap"}
    assert {key: offset for key, offset in found.offsets.items() if key[1] == "broker-ap"} == kept


def test_mixed_cluster_apache_slave_restarted_as_master_takes_over_its_group(cluster: Cluster) -> None:
    # The last step of the move back: the Apache slave of the (gone) OrbitMQ master starts again
    # as the group's master (brokerId 0) on its own store: RocketMQ's broker reads the CommitLog,
    # ConsumeQueue and config/*.json its slave wrote whatever its role, so the replicated
    # messages and the consumer offsets it copied are served.
    expected = cluster.written.get("all")
    if expected is None or _alive(cluster.masters["broker-or"]):
        pytest.skip("needs the OrbitMQ master killed by the slave test")
    slave = cluster.slaves["broker-or"]
    slave.stop(timeout_s=15)
    master = start_apache_broker(
        cluster.tmp_path,
        cluster.namesrv_list,
        "broker-or",
        brokerRole="ASYNC_MASTER",
        storePathRootDir=str(cluster.tmp_path / "slave-or"),
        storePathCommitLog=str(cluster.tmp_path / "slave-or" / "commitlog"),
    )
    cluster.servers.append(master)
    for namesrv_addr in cluster.namesrvs:
        _wait_for_group_route(namesrv_addr, "broker-or", {0})
    more = asyncio.run(_send(cluster.apache_namesrv.addr, 20, "broker-or", first_seq=2000))
    found = asyncio.run(workload.read(cluster.orbitmq_namesrv.addr, [TOPIC]))
    assert workload.missing(workload.Written(expected.messages + more.messages), found) == []
    kept = {key: offset for key, offset in expected.offsets.items() if key[1] == "broker-or"}
    assert kept, "the workload committed no offset on broker-or"
    assert {key: offset for key, offset in found.offsets.items() if key[1] == "broker-or"} == kept


def _wait_for_group_route(namesrv_addr: str, group: str, broker_ids: set[int], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while (ids := set(asyncio.run(_route(namesrv_addr, TOPIC)).get(group, {}))) != broker_ids:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{group} in the route of {TOPIC} at {namesrv_addr}: {ids}, wanted {broker_ids}"
            )
        time.sleep(0.5)


async def _send(
    namesrv_addr: str, count: int, group: str = "broker-ap", first_seq: int = 1000
) -> workload.Written:
    """``count`` messages with SEND_OK, each to a queue of the master of ``group``."""
    sent = workload.Written()
    producer = Producer("mixed_takeover", namesrv_addr)
    await producer.start()
    try:
        for seq in range(first_seq, first_seq + count):
            message = Message(TOPIC, f"takeover:{seq}".encode(), properties={workload.PROPERTY: str(seq)})
            message.keys = [f"k{seq}"]
            message.tags = "takeover"
            result = await producer.send_orderly(message, seq, _queue_of(group))
            assert result.status is SendStatus.OK and result.message_queue.broker_name == group
            sent.messages.append(workload.Stored(TOPIC, message.body, (f"k{seq}",), "takeover", str(seq)))
    finally:
        await producer.shutdown()
    return sent


def _queue_of(group: str) -> Callable[[Sequence[MessageQueue], Message, int], MessageQueue]:
    """A queue selector that picks among ``group``'s queues only."""

    def select(queues: Sequence[MessageQueue], message: Message, seq: int) -> MessageQueue:
        own = [mq for mq in queues if mq.broker_name == group]
        return own[seq % len(own)]

    return select


def _wait_for_offsets(
    broker_addr: str, broker_name: str, expected: workload.Written, timeout_s: float
) -> None:
    wanted = {key: offset for key, offset in expected.offsets.items() if key[1] == broker_name}

    async def offsets() -> dict[tuple[str, str, int], int]:
        client = RemotingClient()
        found: dict[tuple[str, str, int], int] = {}
        try:
            for topic, name, queue_id in wanted:
                header = {"consumerGroup": workload.GROUP, "topic": topic, "queueId": queue_id}
                request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header)
                response = await client.invoke(broker_addr, request, timeout_ms=5000)
                if response.code == ResponseCode.SUCCESS:
                    found[(topic, name, queue_id)] = int(response.ext_fields.get("offset", -1))
        finally:
            await client.close()
        return found

    deadline = time.monotonic() + timeout_s
    while (found := asyncio.run(offsets())) != wanted:
        if time.monotonic() > deadline:
            raise AssertionError(f"offsets on {broker_addr}: {found}, wanted {wanted}")
        time.sleep(1)
