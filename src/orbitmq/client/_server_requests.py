"""Bodies of the requests brokers send to clients (sans-IO helpers of the client instance).

RESET_CONSUMER_CLIENT_OFFSET carries a ResetOffsetBody whose ``offsetTable`` fastjson writes
with MessageQueue objects as map keys (not valid JSON); GET_CONSUMER_RUNNING_INFO expects a
ConsumerRunningInfo JSON object, of which OrbitMQ fills the properties and subscriptions.
"""

from __future__ import annotations

from typing import Any

import orjson

from orbitmq.model.heartbeat import ConsumerData
from orbitmq.model.message import MessageQueue
from orbitmq.protocol import admin_bodies

__all__ = ["decode_reset_offset_body", "encode_running_info"]


def decode_reset_offset_body(body: bytes) -> dict[MessageQueue, int]:
    """The ``offsetTable`` of a RESET_CONSUMER_CLIENT_OFFSET body, Java's map or the C++ array form.

    Raises:
        RemoteProtocolError: an entry's queue is not a valid MessageQueue object.
    """
    return admin_bodies.decode_reset_offset_body(body)


def encode_running_info(client_id: str, data: ConsumerData) -> bytes:
    """A minimal ConsumerRunningInfo body for GET_CONSUMER_RUNNING_INFO."""
    info: dict[str, Any] = {
        "properties": {
            "clientId": client_id,
            "consumeType": data.consume_type.name,
            "messageModel": data.message_model.name,
            "consumeFromWhere": data.consume_from_where.name,
            "PROP_CLIENT_VERSION": "OrbitMQ",
        },
        "subscriptionSet": [
            {"topic": sub.topic, "subString": sub.sub_string, "expressionType": sub.expression_type}
            for sub in data.subscription_data_set
        ],
        "mqTable": {},
        "statusTable": {},
        "jstack": "",
    }
    return orjson.dumps(info)
