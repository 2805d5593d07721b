"""A full disk refuses sends cleanly: no SIGBUS, reads go on, nothing acknowledged is lost.

Method: the test mounts a small tmpfs (it needs root; it is skipped, saying why, where mount
is not permitted), writes a filler file there, and runs a nameserver and a broker whose store
lives on it, with 1 MiB commit-log segments and RocketMQ's ratios at their defaults except
``cleanFileForciblyEnable=false`` (past 85 % RocketMQ deletes unexpired segments, which here
would be acknowledged messages). 4 KiB messages are sent one by one, each acknowledged one
kept in a ledger, until a send is refused: the refusal must be SERVICE_NOT_AVAILABLE (14)
saying "disk full", with the disk past ``diskSpaceWarningLevelRatio`` (90 %); the broker must
be alive. Then pulls read back every acknowledged message, the verifier runs on the full
store (never SIGBUS), the broker restarts on the full disk and still serves reads and refuses
sends; the filler is deleted and sends are accepted again without a restart; after a clean
restart every acknowledged message reads back by content and the verifier passes.

A second test drives a store past its last free block between two disk checks, so the put
path meets ENOSPC itself: the put is refused (no SIGBUS), the store reopens on the full disk,
reads everything back and answers key queries (whose slots mostly lie in pages the index
never wrote), and the verifier runs there too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.bench._fuzz_run import read_back
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import SendMessageRequestHeader
from orbitmq.protocol.message_codec import encode_properties
from orbitmq.transport.connection import RemotingClient
from tests.support.processes import ServerProcess, create_topic, start_broker, start_namesrv

pytestmark = pytest.mark.fault

DISK_BYTES = 40 << 20
FILLER_BYTES = 24 << 20  # 60 % of the disk: the broker's sends take it past 75, 85 and 90 %
BODY_BYTES = 4096
TOPIC = "DiskFull"
SIGBUS_STATUSES = (-signal.SIGBUS, 128 + signal.SIGBUS)


def _used_percent(path: Path) -> float:
    stats = os.statvfs(path)
    return 100.0 * (stats.f_blocks - stats.f_bfree) / stats.f_blocks


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_BYTES mounted under tmp_path (unmounted at teardown)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(path: Path, size_bytes: int) -> None:
    with open(path, "wb") as handle:
        chunk = b"\xa5" * (1 << 20)
        for _ in range(size_bytes // len(chunk)):
            handle.write(chunk)


def _body(serial: int) -> bytes:
    head = f"disk-full-{serial:08d}-".encode()
    return head + bytes([serial % 251]) * (BODY_BYTES - len(head))


async def _send(client: RemotingClient, addr: str, body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="disk-full-producer",
        topic=TOPIC,
        queue_id=0,
        born_timestamp=int(time.time() * 1000),
        properties=encode_properties({"UNIQ_KEY": f"U{time.time_ns()}", "KEYS": body[:18].decode()}),
    )
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)
    return await client.invoke(addr, request, 10_000)


async def _send_until_refused(addr: str, ledger: list[bytes], limit: int) -> RemotingCommand | None:
    """Send bodies one by one, ledger the acknowledged ones; the first refusal, or None."""
    client = RemotingClient()
    try:
        for _ in range(limit):
            body = _body(len(ledger))
            response = await _send(client, addr, body)
            if response.code != ResponseCode.SUCCESS:
                return response
            ledger.append(body)
    finally:
        await client.close()
    return None


def _verify(store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orbitmq.store.verify", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_alive(broker: ServerProcess) -> None:
    assert broker.proc is not None
    assert broker.proc.poll() is None, f"broker died with status {broker.proc.returncode}:\n{broker.log()}"


def test_broker_disk_full_refuses_sends_keeps_reads_and_recovers(tmp_path: Path, small_disk: Path) -> None:
    filler = small_disk / "filler"
    _fill(filler, FILLER_BYTES)
    store = small_disk / "store"
    namesrv = start_namesrv(tmp_path)
    broker = start_broker(
        tmp_path,
        namesrv.addr,
        storePathRootDir=str(store),
        mapedFileSizeCommitLog=1 << 20,
        mapedFileSizeConsumeQueue=20 * 2000,
        maxHashSlotNum=1000,
        maxIndexNum=8000,
        cleanFileForciblyEnable=False,
        flushIntervalConsumeQueue=200,
        timerMaxDelaySec=3600,
    )
    try:
        create_topic(broker.addr, TOPIC, queues=1)
        ledger: list[bytes] = []
        refusal = asyncio.run(_send_until_refused(broker.addr, ledger, limit=20_000))
        assert refusal is not None, f"{len(ledger)} sends all acknowledged on a {DISK_BYTES} byte disk"
        assert refusal.code == ResponseCode.SERVICE_NOT_AVAILABLE, (refusal.code, refusal.remark)
        assert "disk full" in (refusal.remark or ""), refusal.remark
        assert _used_percent(small_disk) > 90, _used_percent(small_disk)
        _assert_alive(broker)
        log = broker.log()
        assert "above diskMaxUsedSpaceRatio=75" in log and "above diskSpaceWarningLevelRatio=90" in log, log
        assert log.count("disk full:") <= 2, log  # once per change of level, never per request
        again = asyncio.run(_send_until_refused(broker.addr, ledger, limit=50))
        assert again is not None and again.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert asyncio.run(read_back(broker.addr, TOPIC)) == ledger

        running = _verify(store)  # on the full store, under the running broker
        assert running.returncode not in SIGBUS_STATUSES, running.stdout + running.stderr
        assert broker.stop() == 0, broker.log()
        stopped = _verify(store)
        assert stopped.returncode in (0, 3), stopped.stdout + stopped.stderr

        broker.start()  # on the full disk
        _assert_alive(broker)
        assert asyncio.run(read_back(broker.addr, TOPIC)) == ledger
        still = asyncio.run(_send_until_refused(broker.addr, ledger, limit=50))
        assert still is not None and still.code == ResponseCode.SERVICE_NOT_AVAILABLE, still

        filler.unlink()
        deadline = time.monotonic() + 15
        resumed = asyncio.run(_send_until_refused(broker.addr, ledger, limit=200))
        while resumed is not None and time.monotonic() < deadline:
            time.sleep(0.2)
            resumed = asyncio.run(_send_until_refused(broker.addr, ledger, limit=200))
        assert resumed is None, f"sends still refused after space was freed: {resumed}"
        _assert_alive(broker)
        assert broker.stop() == 0, broker.log()
        broker.start()
        assert asyncio.run(read_back(broker.addr, TOPIC)) == ledger
        assert broker.stop() == 0, broker.log()
        clean = _verify(store)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert "Traceback" not in broker.log()
    finally:
        broker.kill()
        namesrv.kill()


STORE_CHILD = """
import sys
from pathlib import Path
from orbitmq.store.config import StoreConfig
from orbitmq.store.message_store import MessageStore, PutMessageRequest, PutStatus

root, puts = Path(sys.argv[1]), int(sys.argv[2])
store = MessageStore(StoreConfig(
    store_path_root_dir=root, commit_log_segment_bytes=1 << 20, consume_queue_entries_per_file=4000,
    max_hash_slot_num=1_000_000, max_index_num=8000, clean_file_forcibly_enable=False,
    flush_interval_consume_queue_ms=60_000,  # no disk check between puts: the put path meets ENOSPC
))
store.open()
acked = store.get_max_queue_offset("T", 0)
if acked == 0:  # a first key, queried: the index has a file before the disk fills
    store.put_message(PutMessageRequest("T", 0, bytes(4096), properties={"KEYS": "k0"}))
    assert store.query_messages_by_key("T", "k0", 1, 0, 1 << 62)
    acked = 1
for _ in range(puts):
    body = acked.to_bytes(4, "big") * 1024
    result = store.put_message(PutMessageRequest("T", 0, body, properties={"KEYS": f"k{acked}"}))
    if result.status is not PutStatus.PUT_OK:
        print("REFUSED", result.status.name, result.remark, flush=True)
        break
    acked += 1
offset = read = 0
while True:
    got = store.get_messages("T", 0, offset, 32)
    if not got.commit_log_offsets:
        break
    read += len(got.commit_log_offsets)
    offset = got.next_begin_offset
print("ACKED", acked, "READ", read, flush=True)
sampled = range(0, acked, max(1, acked // 50))
found = sum(1 for i in sampled if store.query_messages_by_key("T", f"k{i}", 1, 0, 1 << 62))
absent = sum(len(store.query_messages_by_key("T", f"absent{i}", 1, 0, 1 << 62)) for i in range(500))
print("QUERIED", len(sampled), "FOUND", found, "ABSENT", absent, flush=True)
store.close()
"""


def _store_child(store: Path, puts: int) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", STORE_CHILD, str(store), str(puts)], capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout + done.stderr


def test_store_put_meeting_enospc_is_refused_without_sigbus(small_disk: Path) -> None:
    filler = small_disk / "filler"
    _fill(filler, 30 << 20)
    store = small_disk / "store"
    status, output = _store_child(store, puts=100_000)
    assert status == 0, output
    assert "REFUSED SERVICE_NOT_AVAILABLE disk full" in output, output
    acked = int(output.split("ACKED ")[1].split()[0])
    assert f"ACKED {acked} READ {acked}" in output, output
    assert _used_percent(small_disk) > 99
    verified = _verify(store)
    assert verified.returncode in (0, 3), verified.stdout + verified.stderr
    status, output = _store_child(store, puts=10)  # reopened on the full disk
    assert status == 0, output
    assert f"ACKED {acked} READ {acked}" in output and "REFUSED SERVICE_NOT_AVAILABLE" in output, output
    assert "ABSENT 0" in output, output  # key queries read slot pages the index never wrote
    filler.unlink()
    status, output = _store_child(store, puts=10)
    assert status == 0 and f"ACKED {acked + 10} READ {acked + 10}" in output, output
    sampled = len(range(0, acked + 10, max(1, (acked + 10) // 50)))
    assert f"QUERIED {sampled} FOUND {sampled} ABSENT 0" in output, output
    verified = _verify(store)
    assert verified.returncode == 0, verified.stdout + verified.stderr
