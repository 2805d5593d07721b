"""Bad input never costs the broker its service or its acknowledged messages.

Method: against `orbitmq standalone`, acknowledge a set of messages first; then send, each on
its own raw socket or through the client, garbage bytes, a truncated frame, a frame declaring
more than 16 MiB, a header that is not JSON, a body over 4 MiB, illegal topic and group names,
a property string over 32 KiB, an out-of-range queue id, a system topic and an unknown request
code. Each must get RocketMQ's response code with a remark naming what was wrong, or a closed
connection; afterwards the broker still serves new sends and every earlier message reads back
byte for byte.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient
from tests.integration.test_broker_messaging import pull_request, send_request
from tests.support.processes import ServerProcess


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()


def _broker_port(standalone: ServerProcess) -> int:
    return standalone.extra_ports[0]


def _raw_exchange(port: int, payload: bytes, timeout_s: float = 5.0) -> bytes:
    """Send ``payload`` on a fresh connection; return what came back before the peer closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def _connection_closed_without_answer(port: int, payload: bytes) -> bool:
    return _raw_exchange(port, payload) == b""


async def _read_queue(client: RemotingClient, addr: str, topic: str) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while True:
        response = await client.invoke(addr, pull_request(topic, "CG_BAD_INPUT", offset))
        if response.code != ResponseCode.SUCCESS:
            return bodies
        messages = decode_stored_messages(response.body)
        bodies.extend(message.body for message in messages)
        offset = int(response.ext_fields["nextBeginOffset"])


async def test_bad_input_is_refused_and_nothing_is_lost(
    standalone: ServerProcess, client: RemotingClient
) -> None:
    addr = f"127.0.0.1:{_broker_port(standalone)}"
    port = _broker_port(standalone)
    acknowledged = [bytes([index % 250 + 1]) * (100 + index) for index in range(50)]
    for body in acknowledged:
        response = await client.invoke(addr, send_request("BadInputTopic", body))
        assert response.code == ResponseCode.SUCCESS, response.remark

    # Malformed frames: the connection closes, nothing is answered.
    assert _connection_closed_without_answer(port, b"\x00\x00\x00\x10garbage-garbage!")
    assert _connection_closed_without_answer(port, struct.pack(">i", 17 * 1024 * 1024) + b"\x00" * 64)
    assert _connection_closed_without_answer(port, struct.pack(">i", -5))
    truncated = send_request("BadInputTopic", b"never stored").encode()[:-3]
    assert _connection_closed_without_answer(port, truncated)
    not_json = b"{not json"
    assert _connection_closed_without_answer(
        port, struct.pack(">ii", 4 + len(not_json), len(not_json)) + not_json
    )
    header_too_long = struct.pack(">ii", 8, 1000) + b"{}\x00\x00"
    assert _connection_closed_without_answer(port, header_too_long)

    # Well-formed requests with bad content: RocketMQ's codes, remarks that name the problem.
    cases = [
        (send_request("bad topic!", b"x"), ResponseCode.SYSTEM_ERROR, "bad topic!"),
        (send_request("T" * 128, b"x"), ResponseCode.SYSTEM_ERROR, "max length 127"),
        (
            send_request("BadInputTopic", b"x" * (4 * 1024 * 1024 + 1)),
            ResponseCode.MESSAGE_ILLEGAL,
            "4194304",
        ),
        (
            send_request("BadInputTopic", b"x", properties={"k": "v" * 40000}),
            ResponseCode.MESSAGE_ILLEGAL,
            "propert",
        ),
        (send_request("BadInputTopic", b"x", queue_id=1000), ResponseCode.SYSTEM_ERROR, "queueId[1000]"),
        (send_request("SCHEDULE_TOPIC_XXXX", b"x"), ResponseCode.NO_PERMISSION, "SCHEDULE_TOPIC_XXXX"),
        (RemotingCommand.request(9999, {}), ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "9999"),
        (pull_request("BadInputTopic", "bad group!", 0), ResponseCode.SYSTEM_ERROR, "bad group!"),
        (
            RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "BadInputTopic"}),
            ResponseCode.SYSTEM_ERROR,
            "consumerGroup",
        ),
    ]
    for request, code, named in cases:
        response = await client.invoke(addr, request, timeout_ms=10_000)
        assert response.code == code, (request.code, response.code, response.remark)
        assert named.lower() in (response.remark or "").lower(), (named, response.remark)

    # Still serving, and every acknowledged message is intact.
    after = await client.invoke(addr, send_request("BadInputTopic", b"after the storm"))
    assert after.code == ResponseCode.SUCCESS
    await asyncio.sleep(0)
    stored = await _read_queue(client, addr, "BadInputTopic")
    assert stored == [*acknowledged, b"after the storm"]
