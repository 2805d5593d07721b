"""The client's fast pull-body decoder agrees with the protocol's reference decoder."""

from __future__ import annotations

import random
import zlib

import pytest

from orbitmq.client._record_decode import decode_records
from orbitmq.errors import RemoteProtocolError
from orbitmq.model.message import MessageExt, SysFlag
from orbitmq.protocol.message_codec import decode_stored_messages, encode_stored_message


def record(index: int, **overrides: object) -> bytes:
    values: dict[str, object] = {
        "topic": "TopicÄ",
        "body": bytes([index % 251]) * (index % 40),
        "properties": {"UNIQ_KEY": f"K{index}", "TAGS": "t", "KEYS": "a b"},
        "queue_id": 3,
        "queue_offset": index,
        "commit_log_offset": 1000 + index * 300,
        "born_timestamp": 1_700_000_000_000 + index,
        "store_timestamp": 1_700_000_000_100 + index,
        "born_host": ("10.1.2.3", 40000 + index),
        "store_host": ("127.0.0.1", 10911),
        "reconsume_times": index % 3,
    }
    values.update(overrides)
    return encode_stored_message(MessageExt(**values))  # type: ignore[arg-type]


def test_consume_record_decode_matches_reference() -> None:
    compressed = zlib.compress(b"hello" * 100)
    body = b"".join(
        [record(i) for i in range(20)]
        + [record(20, born_host=("::1", 5))]
        + [record(21, body=compressed, sys_flag=SysFlag.COMPRESSED)]
        + [record(22, properties={})]
    )
    assert decode_records(body) == decode_stored_messages(body, decompress=True)
    assert decode_records(body)[21].body == b"hello" * 100


def test_consume_record_decode_rejects_garbage_with_protocol_error() -> None:
    good = record(1)
    rng = random.Random(5)
    for _ in range(300):
        damaged = bytearray(good)
        for _ in range(3):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            decoded = decode_records(bytes(damaged))
        except RemoteProtocolError:
            continue
        assert decoded == decode_stored_messages(bytes(damaged), decompress=True)
    with pytest.raises(RemoteProtocolError):
        decode_records(good[:-1])
