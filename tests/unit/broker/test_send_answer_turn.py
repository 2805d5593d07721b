"""A send is answered in the loop turn that read it, and the answers of one read leave in one write;
a pull parked on the queue the send fills is answered in that turn too.

A real broker on 127.0.0.1 in this process (ASYNC_FLUSH, no slaves: nothing to wait for) and a
plain socket as the producer, so the test sees the bytes the broker hands to the kernel. The
store's arrival listener, called by the put, schedules a probe on the loop: when it runs, the
send's answer must already be readable, i.e. written before the loop went on to anything else.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from orbitmq.broker.app import BrokerApp
from orbitmq.client._send import build_send_request
from orbitmq.model.message import MessageQueue
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand, decode_command
from orbitmq.protocol.frame import FrameDecoder
from orbitmq.protocol.headers import PullMessageRequestHeader
from tests.unit.broker._apps import start_broker_app

_TOPIC = "TurnTopic"


def _frame(index: int, opaque: int) -> bytes:
    request = build_send_request(
        "PG_TURN", MessageQueue(_TOPIC, "broker-a", index % 4), body=b"m" * 200,
        properties=f"UNIQ_KEY\x01{index:032X}",
    )  # fmt: skip
    request.opaque = opaque
    return request.encode()


async def _answers(sock: socket.socket, count: int) -> list[int]:
    loop = asyncio.get_running_loop()
    decoder = FrameDecoder()
    codes: list[int] = []
    while len(codes) < count:
        data = await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 10)
        assert data, "the broker closed the connection"
        codes += [decode_command(frame).code for frame in decoder.feed(data)]
    return codes


async def _connect(app: BrokerApp) -> socket.socket:
    sock = socket.socket()
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", app.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


async def test_send_answer_is_written_in_the_turn_that_read_the_send(tmp_path: Path) -> None:
    app = await start_broker_app(tmp_path)
    sock = await _connect(app)
    loop = asyncio.get_running_loop()
    seen: list[bool] = []

    def probe() -> None:
        try:
            seen.append(bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)))
        except BlockingIOError:
            seen.append(False)

    try:
        sock.sendall(_frame(0, 1))  # creates the topic
        assert await _answers(sock, 1) == [ResponseCode.SUCCESS]
        app.state.store.add_arrival_listener(
            lambda topic, *_: loop.call_soon(probe) if topic == _TOPIC else None
        )
        for index in range(1, 6):
            sock.sendall(_frame(index, index + 1))
            assert await _answers(sock, 1) == [ResponseCode.SUCCESS]
        # Each probe ran after its put, on the next loop callback: the answer was already out.
        assert seen == [True] * 5
    finally:
        sock.close()
        await app.shutdown()


async def test_send_answers_of_one_read_leave_in_one_write(tmp_path: Path) -> None:
    app = await start_broker_app(tmp_path)
    sock = await _connect(app)
    try:
        sock.sendall(_frame(0, 1))
        assert await _answers(sock, 1) == [ResponseCode.SUCCESS]
        (connection,) = app._server.connections
        writer = connection._writer
        writes_before = writer.writes
        # 64 sends written at once (about 19 KiB) reach the broker in one read.
        sock.sendall(b"".join(_frame(index, index + 1) for index in range(1, 65)))
        assert await _answers(sock, 64) == [ResponseCode.SUCCESS] * 64
        assert writer.writes - writes_before == 1
    finally:
        sock.close()
        await app.shutdown()


def _parking_pull(queue_offset: int, opaque: int) -> bytes:
    header = PullMessageRequestHeader(
        consumer_group="CG_TURN", topic=_TOPIC, queue_id=0, queue_offset=queue_offset, max_msg_nums=32,
        sys_flag=0x2 | 0x4, suspend_timeout_millis=10_000, subscription="*",
    )  # fmt: skip
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    request.opaque = opaque
    return request.encode()


async def test_pull_parked_on_a_queue_is_answered_in_the_write_of_the_send_that_fills_it(
    tmp_path: Path,
) -> None:
    """One connection parks a pull, then sends to its queue: both answers leave in one write.
    (A pull woken a turn later, by a task, went out in a second write after the send's.)"""
    app = await start_broker_app(tmp_path)
    sock = await _connect(app)
    try:
        sock.sendall(_frame(0, 1))  # creates the topic; queue 0 holds offset 0
        assert await _answers(sock, 1) == [ResponseCode.SUCCESS]
        (connection,) = app._server.connections
        writer = connection._writer
        sock.sendall(_parking_pull(1, 2))
        for _ in range(100):
            if app.state.long_polling.parked_count:
                break
            await asyncio.sleep(0.01)
        assert app.state.long_polling.parked_count == 1
        writes_before = writer.writes
        sock.sendall(_frame(4, 3))  # queue 0 again: offset 1
        assert sorted(await _answers(sock, 2)) == [ResponseCode.SUCCESS] * 2
        assert writer.writes - writes_before == 1
        assert app.state.long_polling.parked_count == 0
    finally:
        sock.close()
        await app.shutdown()
