"""Stores that move: a store Apache RocketMQ's broker wrote served by OrbitMQ, and the reverse.

One Apache name server serves the module. An Apache broker writes a workload (messages across
topics and queues with keys, tags and a property; a group's committed offsets) and is stopped;
``orbitmq store import-rocketmq`` copies its store and an OrbitMQ broker serves it, and an
OrbitMQ broker also starts on a copy of the directory as it is. The reverse: an OrbitMQ broker
writes, ``orbitmq store export-rocketmq`` copies its store and an Apache broker serves it.
Every message is read back by content, the group's offsets and key queries with it.
docs/migration.md runs these steps.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbitmq.broker.config import load_broker_configs
from orbitmq.broker.offsets import ConsumerOffsetTable
from orbitmq.broker.schedule import DelayOffsetTable
from orbitmq.store.dir_lock import lock_store_dir
from tests.oracle import workload
from tests.support.oracle_servers import start_apache_broker, start_apache_namesrv, tools_available
from tests.support.processes import ServerProcess, create_topic, start_broker, start_namesrv, wait_route

pytestmark = [pytest.mark.oracle, pytest.mark.xdist_group("oracle-store-move"), pytest.mark.timeout(600)]

TOPICS = ("MoveOrders", "MovePayments")
MESSAGES = 120
# Both brokers get the same segment size; the converters print the one the target needs.
SEGMENT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Written:
    store: Path
    workload: workload.Written


def _store_cli(verb: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orbitmq.cli", "store", verb, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _sparse_copy(source: Path, target: Path) -> None:
    subprocess.run(["cp", "-r", "--sparse=always", str(source), str(target)], check=True)


@pytest.fixture(scope="module")
def apache_namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    missing = tools_available()
    if missing:
        pytest.skip(f"the oracle tier needs {missing} on PATH")
    server = start_apache_namesrv(tmp_path_factory.mktemp("apache-namesrv"))
    try:
        yield server
    finally:
        server.stop(timeout_s=10)


@pytest.fixture(scope="module")
def apache_written(tmp_path_factory: pytest.TempPathFactory, apache_namesrv: ServerProcess) -> Written:
    """An Apache broker's store holding the workload, the broker stopped."""
    tmp_path = tmp_path_factory.mktemp("apache-writer")
    broker = start_apache_broker(tmp_path, apache_namesrv.addr, "broker-mv")
    try:
        for topic in TOPICS:
            create_topic(broker.addr, topic, queues=4)
        wait_route(apache_namesrv.addr, TOPICS[0], {"broker-mv"}, timeout_s=60)
        written = asyncio.run(workload.write(apache_namesrv.addr, TOPICS, MESSAGES, tag="_apache"))
        store = tmp_path / "apache-broker-mv" / "store"
        # While the Java broker runs, its store is refused (it holds FileChannel's lock).
        busy = _store_cli("import-rocketmq", str(store), str(tmp_path / "too-early"))
        assert busy.returncode == 1 and "in use by a running broker" in busy.stderr, busy
        assert len(busy.stderr.strip().splitlines()) == 1
    finally:
        broker.stop(timeout_s=30)
    return Written(store, written)


def _serve_with_orbitmq(tmp_path: Path, store: Path, expected: workload.Written) -> None:
    namesrv = start_namesrv(tmp_path)
    try:
        broker = start_broker(
            tmp_path,
            namesrv.addr,
            "broker-mv",
            storePathRootDir=str(store),
            mapedFileSizeCommitLog=SEGMENT_BYTES,
        )
        try:
            wait_route(namesrv.addr, TOPICS[0], {"broker-mv"})
            _check_served(namesrv.addr, expected)
        finally:
            broker.stop()
    finally:
        namesrv.stop()


def _check_served(namesrv_addr: str, expected: workload.Written) -> None:
    found = asyncio.run(workload.read(namesrv_addr, TOPICS))
    assert workload.missing(expected, found) == []
    assert len(found.messages) == len(expected.messages)
    assert found.offsets == expected.offsets
    assert asyncio.run(workload.unfound_by_key(namesrv_addr, expected)) == []


def test_store_move_import_rocketmq_serves_every_message_and_offset(
    tmp_path: Path, apache_written: Written
) -> None:
    target = tmp_path / "imported"
    done = _store_cli("import-rocketmq", str(apache_written.store), str(target))
    assert done.returncode == 0, done.stderr
    assert f"imported {MESSAGES} messages" in done.stdout
    # RocketMQ's own state stays behind; OrbitMQ writes its checkpoint afresh.
    assert not (target / "rocksdbstore").exists() and not (target / "checkpoint").exists()
    _serve_with_orbitmq(tmp_path, target, apache_written.workload)


def test_store_move_orbitmq_starts_on_rocketmq_store_as_is(tmp_path: Path, apache_written: Written) -> None:
    store = tmp_path / "as-is"
    _sparse_copy(apache_written.store, store)
    _serve_with_orbitmq(tmp_path, store, apache_written.workload)


def test_store_move_export_rocketmq_serves_in_apache(tmp_path: Path, apache_namesrv: ServerProcess) -> None:
    namesrv = start_namesrv(tmp_path)
    try:
        broker = start_broker(tmp_path, namesrv.addr, "broker-ex", mapedFileSizeCommitLog=SEGMENT_BYTES)
        try:
            for topic in TOPICS:
                create_topic(broker.addr, topic, queues=4)
            wait_route(namesrv.addr, TOPICS[0], {"broker-ex"})
            written = asyncio.run(workload.write(namesrv.addr, TOPICS, MESSAGES, tag="_orbitmq"))
        finally:
            broker.stop()
    finally:
        namesrv.stop()
    target = tmp_path / "exported"
    done = _store_cli("export-rocketmq", str(tmp_path / "broker-ex" / "store"), str(target))
    assert done.returncode == 0, done.stderr
    assert (target / "checkpoint").stat().st_size == 4096
    apache = start_apache_broker(
        tmp_path,
        apache_namesrv.addr,
        "broker-ex",
        storePathRootDir=str(target),
        storePathCommitLog=str(target / "commitlog"),
        mappedFileSizeCommitLog=SEGMENT_BYTES,
    )
    try:
        wait_route(apache_namesrv.addr, TOPICS[0], {"broker-ex"}, timeout_s=60)
        _check_served(apache_namesrv.addr, written)
    finally:
        apache.stop(timeout_s=30)


# -- the converters' refusals (one line each) and the formats they rely on ----------------------


def test_store_move_refuses_a_store_not_stopped_cleanly(tmp_path: Path) -> None:
    source = tmp_path / "crashed"
    (source / "commitlog").mkdir(parents=True)
    (source / "abort").touch()
    done = _store_cli("import-rocketmq", str(source), str(tmp_path / "target"))
    assert done.returncode == 1
    assert "was not stopped cleanly" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "target").exists()


def test_store_move_refuses_a_store_an_orbitmq_broker_holds(tmp_path: Path) -> None:
    source = tmp_path / "open"
    (source / "commitlog").mkdir(parents=True)
    lock = lock_store_dir(source)
    try:
        done = _store_cli("export-rocketmq", str(source), str(tmp_path / "target"))
    finally:
        lock.release()
    assert done.returncode == 1 and "is in use by process" in done.stderr, done.stderr


def test_store_move_refuses_a_target_in_use(tmp_path: Path) -> None:
    (tmp_path / "source" / "commitlog").mkdir(parents=True)
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "x").touch()
    done = _store_cli("export-rocketmq", str(tmp_path / "source"), str(tmp_path / "target"))
    assert done.returncode == 1 and "not an empty directory" in done.stderr
    done = _store_cli("export-rocketmq", str(tmp_path / "nowhere"), str(tmp_path / "t2"))
    assert done.returncode == 1 and "is not a store directory" in done.stderr
    done = _store_cli("export-rocketmq", str(tmp_path / "source"), str(tmp_path / "source" / "inside"))
    assert done.returncode == 1 and "overlap" in done.stderr


def test_consumer_offsets_load_rocketmq_fastjson_file() -> None:
    # RocketMQ's broker writes consumerOffset.json with its queue ids unquoted.
    data = b'{"offsetTable":{"T@g":{0:7,1:9}},"pullOffsetTable":{"T@g":{0:15}}}'
    table = ConsumerOffsetTable.decode(data)
    assert table.query("g", "T", 0) == 7 and table.query("g", "T", 1) == 9


def test_delay_offsets_load_rocketmq_fastjson_file() -> None:
    table = DelayOffsetTable.decode(
        b'{"dataVersion":{"counter":0},"offsetTable":{1:5,3:2}}', "delayOffset.json"
    )
    assert table.get(1) == 5 and table.get(3) == 2


def test_store_config_accepts_rocketmq_5_commit_log_size_key(tmp_path: Path) -> None:
    # RocketMQ 5 spells it mappedFileSizeCommitLog (4.x: mapedFileSizeCommitLog); a broker.conf
    # taken from RocketMQ 5 must give OrbitMQ the segment size of the store it describes.
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"brokerName=b\nstorePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog=16777216\n"
    )
    _, store_config, *_ = load_broker_configs(str(conf), {}, ())
    assert store_config.commit_log_segment_bytes == 16 * 1024 * 1024
