"""The name server's KV configuration table and its kvConfig.json form."""

from __future__ import annotations

import pytest

from orbitmq.errors import ConfigError
from orbitmq.namesrv.kv_config import KVConfigTable


def test_kv_table_put_get_delete_and_round_trip() -> None:
    table = KVConfigTable()
    table.put("ns", "k", "v")
    table.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    assert table.dirty and table.get("ns", "k") == "v"
    assert KVConfigTable.decode(table.encode()).namespace("ORDER_TOPIC_CONFIG") == {"T": "broker-a:4"}
    assert not table.dirty
    assert table.delete("ns", "k") and not table.delete("ns", "k")
    assert table.namespace("ns") == {}


def test_kv_table_reads_rocketmq_file_and_refuses_garbage() -> None:
    table = KVConfigTable.decode(b'{"configTable":{"ns":{"a":"1"}}}')
    assert table.get("ns", "a") == "1"
    with pytest.raises(ConfigError, match="kvConfig.json"):
        KVConfigTable.decode(b"[1]")
