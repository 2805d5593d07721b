"""RouteTable: RocketMQ's RouteInfoManager rules, tested as pure state (no loop, no sockets)."""

from __future__ import annotations

import pytest

from orbitmq.model.route import PERM_INHERIT, PERM_READ_WRITE, DataVersion, QueueData, TopicConfig
from orbitmq.namesrv.route_table import RegisterResult, RouteTable, topic_table_changes
from tests.support.calls import python_calls

V1 = DataVersion(timestamp=1000, counter=1)
V2 = DataVersion(timestamp=2000, counter=2)


def topics(*names: str, queues: int = 4) -> dict[str, TopicConfig]:
    return {name: TopicConfig(name, read_queue_nums=queues, write_queue_nums=queues) for name in names}


def register(
    table: RouteTable,
    name: str = "broker-a",
    addr: str = "10.0.0.1:10911",
    broker_id: int = 0,
    topic_table: dict[str, TopicConfig] | None = None,
    version: DataVersion = V1,
    connection_id: int = 1,
    now_ms: int = 0,
    cluster: str = "DefaultCluster",
) -> RegisterResult:
    return table.register_broker(
        cluster, name, addr, broker_id, f"{addr}-ha", topic_table, version, connection_id, now_ms
    )


def test_route_table_master_registration_publishes_route() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"))
    route = table.topic_route("TopicA")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 4, 4, PERM_READ_WRITE, 0)]
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        ("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})
    ]


def test_route_table_unknown_topic_has_no_route() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"))
    assert table.topic_route("TopicB") is None


def test_route_table_tbw102_is_an_ordinary_topic() -> None:
    table = RouteTable()
    tbw = {"TBW102": TopicConfig("TBW102", 8, 8, PERM_READ_WRITE | PERM_INHERIT)}
    register(table, topic_table=tbw)
    route = table.topic_route("TBW102")
    assert route is not None and route.queue_datas[0].perm == 7
    assert table.all_topics() == ["TBW102"]


def test_route_table_same_version_does_not_replace_queue_data() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA", queues=4))
    register(table, topic_table=topics("TopicA", queues=8))
    route = table.topic_route("TopicA")
    assert route is not None and route.queue_datas[0].write_queue_nums == 4


def test_route_table_registration_listing_some_topics_keeps_the_others() -> None:
    # RocketMQ 5's broker registers a topic it just created on its own (an "increment"), with
    # a new data version; the name server keeps the broker's other topics, as RocketMQ's does
    # unless deleteTopicWithBrokerRegistration=true.
    table = RouteTable()
    register(table, topic_table=topics("TopicA", "TopicB"))
    register(table, topic_table=topics("TopicC", queues=8), version=V2)
    assert table.all_topics() == ["TopicA", "TopicB", "TopicC"]
    route = table.topic_route("TopicC")
    assert route is not None and route.queue_datas[0].write_queue_nums == 8


def test_route_table_new_version_replaces_and_drops_absent_topics() -> None:
    table = RouteTable(delete_topic_with_broker_registration=True)
    register(table, topic_table=topics("TopicA", "TopicB"))
    register(table, topic_table=topics("TopicA", queues=8), version=V2)
    route = table.topic_route("TopicA")
    assert route is not None and route.queue_datas[0].write_queue_nums == 8
    assert table.topic_route("TopicB") is None
    assert table.all_topics() == ["TopicA"]


def test_route_table_dropping_topic_keeps_other_brokers_queues() -> None:
    table = RouteTable(delete_topic_with_broker_registration=True)
    register(table, "broker-a", "10.0.0.1:10911", topic_table=topics("TopicA"))
    register(table, "broker-b", "10.0.0.2:10911", topic_table=topics("TopicA"), connection_id=2)
    register(table, "broker-a", "10.0.0.1:10911", topic_table={}, version=V2)
    route = table.topic_route("TopicA")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]


def test_route_table_slave_does_not_publish_queues_and_learns_master() -> None:
    table = RouteTable()
    register(table, addr="10.0.0.1:10911", topic_table=topics("TopicA"))
    result = register(
        table, addr="10.0.0.9:10911", broker_id=1, topic_table=topics("TopicZ"), connection_id=2
    )
    assert result == RegisterResult(ha_server_addr="10.0.0.1:10911-ha", master_addr="10.0.0.1:10911")
    assert table.topic_route("TopicZ") is None
    route = table.topic_route("TopicA")
    assert route is not None and route.broker_datas[0].broker_addrs == {
        0: "10.0.0.1:10911",
        1: "10.0.0.9:10911",
    }


def test_route_table_promoted_slave_drops_its_old_id() -> None:
    table = RouteTable()
    register(table, addr="10.0.0.9:10911", broker_id=1)
    register(table, addr="10.0.0.9:10911", broker_id=0, topic_table=topics("TopicA"))
    assert table.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.9:10911"}


def test_route_table_scan_inactive_removes_silent_broker_and_its_queues() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911", topic_table=topics("TopicA"), now_ms=0)
    register(
        table, "broker-b", "10.0.0.2:10911", topic_table=topics("TopicA"), connection_id=2, now_ms=100_000
    )
    assert table.scan_inactive(now_ms=120_000) == []
    assert table.scan_inactive(now_ms=120_001) == ["10.0.0.1:10911"]
    route = table.topic_route("TopicA")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert table.cluster_addr_table == {"DefaultCluster": {"broker-b"}}


def test_route_table_scan_inactive_custom_expiry() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"), now_ms=0)
    assert table.scan_inactive(now_ms=1_001, expiry_ms=1_000) == ["10.0.0.1:10911"]
    assert table.topic_route("TopicA") is None
    assert table.broker_addr_table == {} and table.cluster_addr_table == {}


def test_route_table_connection_close_removes_only_brokers_on_it() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911", topic_table=topics("TopicA"), connection_id=7)
    register(table, "broker-b", "10.0.0.2:10911", topic_table=topics("TopicB"), connection_id=8)
    assert table.on_connection_closed(7) == ["10.0.0.1:10911"]
    assert table.topic_route("TopicA") is None
    assert table.topic_route("TopicB") is not None


def test_route_table_reregistration_on_new_connection_survives_old_close() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"), connection_id=7)
    register(table, topic_table=topics("TopicA"), connection_id=9)
    assert table.on_connection_closed(7) == []
    assert table.topic_route("TopicA") is not None


def test_route_table_slave_expiry_keeps_master_queues() -> None:
    table = RouteTable()
    register(table, addr="10.0.0.1:10911", topic_table=topics("TopicA"), connection_id=1)
    register(table, addr="10.0.0.9:10911", broker_id=1, connection_id=2)
    table.on_connection_closed(2)
    route = table.topic_route("TopicA")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}


def test_route_table_unregister_removes_broker_name_when_last_address_goes() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"))
    assert table.unregister_broker("DefaultCluster", "broker-a", "10.0.0.1:10911", 0)
    assert table.topic_route("TopicA") is None
    assert table.cluster_info().broker_addr_table == {}
    assert not table.unregister_broker("DefaultCluster", "broker-a", "10.0.0.1:10911", 0)


def test_route_table_cluster_info_is_a_copy() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"))
    info = table.cluster_info()
    info.broker_addr_table["broker-a"].broker_addrs[5] = "x"
    info.cluster_addr_table["DefaultCluster"].add("y")
    assert table.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.1:10911"}
    assert table.cluster_addr_table == {"DefaultCluster": {"broker-a"}}


def test_route_table_delete_topic_everywhere_or_per_cluster() -> None:
    table = RouteTable()
    register(table, "broker-a", "10.0.0.1:10911", topic_table=topics("TopicA", "TopicB"), cluster="c1")
    register(table, "broker-b", "10.0.0.2:10911", topic_table=topics("TopicA"), cluster="c2", connection_id=2)
    assert table.delete_topic("TopicA", "c1")
    route = table.topic_route("TopicA")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert table.delete_topic("TopicB")
    assert table.all_topics() == ["TopicA"]
    assert not table.delete_topic("Missing")


def test_route_table_data_version_queries() -> None:
    table = RouteTable()
    assert table.is_data_version_changed("10.0.0.1:10911", V1)
    register(table, now_ms=0)
    assert not table.is_data_version_changed("10.0.0.1:10911", V1)
    assert table.is_data_version_changed("10.0.0.1:10911", V2)
    assert table.data_version_of("10.0.0.1:10911") == V1
    table.touch("10.0.0.1:10911", now_ms=500_000)
    assert table.scan_inactive(now_ms=600_000) == []


def test_route_table_version_moves_on_route_changes_only() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"))
    after_first = table.version
    assert after_first > 0
    register(table, topic_table=topics("TopicA"), now_ms=30_000)
    assert table.version == after_first, "an unchanged re-registration changes no route"
    steps = [
        lambda: register(table, addr="10.0.0.2:10911", broker_id=1, connection_id=2),
        lambda: register(table, topic_table=topics("TopicA", queues=8), version=V2),
        lambda: table.unregister_broker("DefaultCluster", "broker-a", "10.0.0.2:10911", 1),
        lambda: table.delete_topic("TopicA"),
        lambda: register(table, topic_table=topics("TopicB"), version=V1),
        lambda: table.on_connection_closed(1),
    ]
    for step in steps:
        before = table.version
        step()
        assert table.version > before
    assert table.topic_route("TopicB") is None


def test_route_table_route_copies_broker_data() -> None:
    table = RouteTable()
    register(table, topic_table=topics("TopicA"))
    route = table.topic_route("TopicA")
    assert route is not None
    route.broker_datas[0].broker_addrs[5] = "elsewhere:1"
    again = table.topic_route("TopicA")
    assert again is not None and again.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}


def _publish(table: RouteTable, topic_table: dict[str, TopicConfig], counter: int) -> None:
    """A master's registration of a new version, with its changes against what was published."""
    base = table.published_table("broker-a")
    changes = topic_table_changes(base, topic_table) if base is not None else None
    table.register_broker(
        "DefaultCluster",
        "broker-a",
        "10.0.0.1:10911",
        0,
        "ha",
        topic_table,
        DataVersion(1000, counter),
        1,
        0,
        changes=changes,
    )


def test_route_table_publication_applies_only_the_topics_that_changed() -> None:
    # With 50,000 topics, replacing every queue data on each new version held the name
    # server's event loop half a second per registration while topics were being created.
    work = []
    for count in (10, 2_000):
        table = RouteTable(delete_topic_with_broker_registration=True)
        published = topics(*(f"T{index}" for index in range(count)))
        _publish(table, published, 1)
        newer = {**published, "New": TopicConfig("New", 2, 2)}
        del newer["T0"]
        base = table.published_table("broker-a")
        assert base is not None
        changes = topic_table_changes(base, newer)
        work.append(
            python_calls(
                lambda table=table, newer=newer, changes=changes: table.register_broker(
                    "DefaultCluster", "broker-a", "10.0.0.1:10911", 0, "ha", newer, V2, 1, 0, changes=changes
                )
            )
        )
        assert table.topic_route("T0") is None and table.topic_route("New") is not None
    assert work[0] == work[1]


@pytest.mark.parametrize("delete_topics", [True, False], ids=["deleteTopicWithBrokerRegistration", "keep"])
def test_route_table_changed_publications_end_as_a_full_replacement(delete_topics: bool) -> None:
    # The tables reached by publishing changes, or by replacing everything each time, are one,
    # whether a topic left out of a registration is dropped or kept (RocketMQ's default).
    steps = [
        topics("A", "B", "C"),
        {**topics("A", "C"), "D": TopicConfig("D", 8, 8, PERM_READ_WRITE | PERM_INHERIT)},
        topics("A", "C", "D", queues=2),
    ]
    incremental = RouteTable(delete_topic_with_broker_registration=delete_topics)
    full = RouteTable(delete_topic_with_broker_registration=delete_topics)
    for counter, topic_table in enumerate(steps, 1):
        _publish(incremental, topic_table, counter)
        register(full, topic_table=topic_table, version=DataVersion(1000, counter))
        assert incremental.topic_queue_table == full.topic_queue_table
    assert (incremental.topic_route("B") is None) == delete_topics
    # Something else changed the broker's queue data (a topic deleted on the name server):
    # the next publication replaces everything, so the deleted topic comes back.
    incremental.delete_topic("A")
    assert incremental.published_table("broker-a") is None
    _publish(incremental, {**steps[-1], "E": TopicConfig("E", 1, 1)}, 9)
    assert incremental.topic_route("A") is not None and incremental.topic_route("E") is not None
    incremental.set_write_perm("broker-a", False)
    assert incremental.published_table("broker-a") is None
