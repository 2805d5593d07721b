"""Record requests signed by the real C++ client, for the golden signature fixture.

Run once by hand (the fixture is committed; tests only read it)::

    python -m tests.support.record_signed_requests tests/fixtures/acl/cpp_signed_requests.jsonl

It starts a name server and a broker in this process with ACL off, records the raw frame of
every request the server decodes, and runs ``rocketmq==0.4.4`` in a child process with
``set_session_credentials(ACCESS_KEY, SECRET_KEY, "ALIYUN")``: sync sends (non-ASCII
properties and bodies), a batch send, a push consumer that pulls, commits and heartbeats. The
first frame of each request code (and of batch and single SEND_MESSAGE) that carries a ``Signature`` is written as one JSON line
``{"code": n, "frame_hex": "..."}`` (the frame after its length field).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.config import load_broker_config
from orbitmq.namesrv.app import NamesrvApp
from orbitmq.namesrv.config import load_namesrv_config
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport import server as server_module

ACCESS_KEY = "rocketmq2"
SECRET_KEY = "12345678"

_CLIENT = textwrap.dedent(
    """
    import sys, threading, time
    from rocketmq.client import Message, Producer, PushConsumer
    namesrv, ak, sk = sys.argv[1:4]
    producer = Producer("PG_SIGNED")
    producer.set_namesrv_addr(namesrv)
    producer.set_session_credentials(ak, sk, "ALIYUN")
    producer.start()
    for i in range(3):
        msg = Message("SignedTopic")
        msg.set_tags("TagA")
        msg.set_keys("k%d" % i)
        msg.set_property("note", "v\\u00e9rifi\\u00e9")
        msg.set_body(("h\\u00e9llo %d" % i).encode())
        producer.send_sync(msg)
    batch = []
    for i in range(2):
        msg = Message("SignedTopic")
        msg.set_body(b"batch %d" % i)
        batch.append(msg)
    producer.send_batch(batch)
    producer.shutdown()
    got = threading.Semaphore(0)
    consumer = PushConsumer("CG_SIGNED")
    consumer.set_namesrv_addr(namesrv)
    consumer.set_session_credentials(ak, sk, "ALIYUN")
    consumer.subscribe("SignedTopic", lambda msg: got.release())
    consumer.start()
    for _ in range(5):
        got.acquire(timeout=30)
    time.sleep(6)
    consumer.shutdown()
    """
)


async def record(out: Path) -> None:
    frames: dict[tuple[int, str], bytes] = {}
    decode = server_module.decode_command

    def recording_decode(frame: bytes | bytearray | memoryview) -> RemotingCommand:
        command = decode(frame)
        if not command.is_response and "Signature" in command.ext_fields:
            # A C++ batch is SEND_MESSAGE with batch=1: keep one of each kind.
            frames.setdefault((command.code, command.ext_fields.get("batch", "")), bytes(frame))
        return command

    server_module.decode_command = recording_decode  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as data:
        namesrv = NamesrvApp(load_namesrv_config(None, {"listenPort": 0, "bindAddress": "127.0.0.1"}))
        await namesrv.startup()
        broker_config, store_config = load_broker_config(
            None,
            {
                "namesrvAddr": namesrv.address,
                "listenPort": 0,
                "bindAddress": "127.0.0.1",
                "brokerIP1": "127.0.0.1",
                "storePathRootDir": data,
            },
        )
        broker = BrokerApp(broker_config, store_config)
        await broker.startup()
        try:
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _CLIENT, namesrv.address, ACCESS_KEY, SECRET_KEY,
                env={**os.environ, "HOME": data}, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            await child.wait()
        finally:
            await broker.shutdown()
            await namesrv.shutdown()
    lines = [
        json.dumps({"code": code, "frame_hex": frame.hex()}) for (code, _), frame in sorted(frames.items())
    ]
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} request codes recorded in {out}: {sorted(frames)}")


if __name__ == "__main__":
    asyncio.run(record(Path(sys.argv[1])))
