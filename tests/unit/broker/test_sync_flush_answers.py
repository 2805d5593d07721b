"""SYNC_FLUSH sends: a lone send is flushed on the event loop, sends arriving together by group commit.

A real broker on 127.0.0.1 (in this process, so the loop's thread is the test's) and a real
remoting client; the store's ``commit_log.before_fsync`` failpoint records which thread
flushed.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from orbitmq.broker.app import BrokerApp
from orbitmq.client._send import build_send_request
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_id import decode_offset_msg_id
from orbitmq.store._fs import failpoints
from orbitmq.transport.connection import RemotingClient
from tests.unit.broker._apps import start_broker_app

_FLUSH_THREAD = "orbitmq-commit-log-flush"


def _send(app: BrokerApp, body: bytes, wait: bool = True) -> RemotingCommand:
    properties = "UNIQ_KEY\x01" + body.hex() + ("" if wait else "\x02WAIT\x01false")
    return build_send_request(
        "PG_SYNC", MessageQueue("SyncTopic", "broker-a", 0), body=body, properties=properties
    )


def _end_offset(app: BrokerApp, answer: RemotingCommand) -> int:
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    offset = decode_offset_msg_id(answer.ext_fields["msgId"]).commit_log_offset
    record = app.state.store.read_message(offset)
    assert record is not None
    return offset + len(record)


async def test_sync_flush_sends_alone_and_together(tmp_path: Path, client: RemotingClient) -> None:
    app = await start_broker_app(tmp_path, flushDiskType="SYNC_FLUSH")
    flushed_by: list[str] = []
    failpoints.arm("commit_log.before_fsync", lambda: flushed_by.append(threading.current_thread().name))
    addr = f"127.0.0.1:{app.port}"
    loop_thread = threading.current_thread().name
    try:
        await client.invoke(addr, _send(app, b"warm-up"))  # creates the topic
        # One at a time: each answer comes after a flush that covered it, made on the loop.
        on_loop = 0
        for index in range(20):
            flushed_by.clear()
            answer = await client.invoke(addr, _send(app, f"alone-{index}".encode()))
            end = _end_offset(app, answer)
            assert app.state.store.flushed_commit_log_offset >= end
            on_loop += flushed_by[:1] == [loop_thread]
        assert on_loop >= 15, on_loop  # the thread's 10 ms look may take a put first

        # Together: 32 requests written at once reach the broker in one read; the flush
        # thread's group commit answers them, with far fewer flushes than sends.
        flushed_by.clear()
        answers = await asyncio.gather(
            *(client.invoke(addr, _send(app, f"together-{index}".encode())) for index in range(32))
        )
        ends = [_end_offset(app, answer) for answer in answers]
        assert app.state.store.flushed_commit_log_offset >= max(ends)
        assert flushed_by and len(flushed_by) < 16, flushed_by
        assert _FLUSH_THREAD in flushed_by

        # A send that does not wait (WAIT=false) is answered at once and flushed soon after.
        answer = await client.invoke(addr, _send(app, b"no-wait", wait=False))
        end = _end_offset(app, answer)
        for _ in range(100):
            if app.state.store.flushed_commit_log_offset >= end:
                break
            await asyncio.sleep(0.01)
        assert app.state.store.flushed_commit_log_offset >= end
    finally:
        failpoints.disarm()
        await app.shutdown()
