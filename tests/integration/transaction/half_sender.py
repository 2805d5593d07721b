"""A producer process that sends one half message and then hangs without deciding.

``python -m tests.integration.transaction.half_sender BROKER_ADDR GROUP TOPIC`` heartbeats its
producer group, sends a TRAN_MSG half message, prints ``{"queue_offset": n, "msg_id": ...}``
as one JSON line and sleeps until killed: the broker must resolve the transaction through
another producer of the group.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import orjson

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.connection import RemotingClient
from tests.integration.delay.raw_commands import send_command


async def main(addr: str, group: str, topic: str) -> int:
    client = RemotingClient()
    heartbeat = {
        "clientID": f"dying-{time.time_ns()}",
        "producerDataSet": [{"groupName": group}],
        "consumerDataSet": [],
    }
    await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(heartbeat)))
    request = send_command(
        topic, b"from the dying producer", {"TRAN_MSG": "true", "PGROUP": group}, group=group
    )
    response = await client.invoke(addr, request)
    if response.code != ResponseCode.SUCCESS:
        print(json.dumps({"error": response.remark}), flush=True)
        return 1
    print(
        json.dumps(
            {"queue_offset": int(response.ext_fields["queueOffset"]), "msg_id": response.ext_fields["msgId"]}
        ),
        flush=True,
    )
    await asyncio.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:4])))
