"""Subscription group configs: per consumer group settings (retry queues, max reconsume times).

A group gets a config the first time it heartbeats or sends back a message when
``autoCreateSubscriptionGroup`` is on (the default); with it off, unknown groups are refused with
SUBSCRIPTION_GROUP_NOT_EXIST. Persisted as RocketMQ's ``subscriptionGroup.json``::

    {"subscriptionGroupTable": {"<group>": {"groupName": ..., "consumeEnable": true,
        "retryQueueNums": 1, "retryMaxTimes": 16, ...}}, "dataVersion": {...}}

Pure state: the persistence service writes what :meth:`SubscriptionGroupTable.encode` returns.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import orjson

from orbitmq.errors import ConfigError

DEFAULT_RETRY_MAX_TIMES = 16

# Groups a RocketMQ broker creates at start-up; tools and clients expect them to exist.
_BUILTIN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONSAPI_OWNER")


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """Settings of one consumer group (RocketMQ's SubscriptionGroupConfig)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False  # POP/gRPC consumers get FIFO delivery per message group
    retry_queue_nums: int = 1
    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
        }

    @classmethod
    def from_json(cls, group: str, raw: dict[str, Any]) -> SubscriptionGroupConfig:
        base = cls(group)
        return replace(
            base,
            consume_enable=bool(raw.get("consumeEnable", base.consume_enable)),
            consume_from_min_enable=bool(raw.get("consumeFromMinEnable", base.consume_from_min_enable)),
            consume_broadcast_enable=bool(raw.get("consumeBroadcastEnable", base.consume_broadcast_enable)),
            consume_message_orderly=bool(raw.get("consumeMessageOrderly", base.consume_message_orderly)),
            retry_queue_nums=int(raw.get("retryQueueNums", base.retry_queue_nums)),
            retry_max_times=int(raw.get("retryMaxTimes", base.retry_max_times)),
            broker_id=int(raw.get("brokerId", base.broker_id)),
            which_broker_when_consume_slowly=int(
                raw.get("whichBrokerWhenConsumeSlowly", base.which_broker_when_consume_slowly)
            ),
            notify_consumer_ids_changed_enable=bool(
                raw.get("notifyConsumerIdsChangedEnable", base.notify_consumer_ids_changed_enable)
            ),
        )


class SubscriptionGroupTable:
    """Consumer group configs by name (thread-safe; handlers and the persistence service share it)."""

    def __init__(self) -> None:
        self._groups: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig(name) for name in _BUILTIN_GROUPS
        }
        self._lock = threading.Lock()
        self._data_version = (int(time.time() * 1000), 0)
        self._dirty = False

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._groups.get(group)

    def find_or_create(self, group: str, auto_create: bool) -> SubscriptionGroupConfig | None:
        """The group's config, created with defaults when missing and ``auto_create`` is on."""
        config = self._groups.get(group)
        if config is not None or not auto_create:
            return config
        return self.put(SubscriptionGroupConfig(group))

    def put(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        with self._lock:
            self._groups[config.group_name] = config
            self._bump()
        return config

    def remove(self, group: str) -> bool:
        with self._lock:
            removed = self._groups.pop(group, None) is not None
            if removed:
                self._bump()
        return removed

    def names(self) -> list[str]:
        return list(self._groups)

    @property
    def dirty(self) -> bool:
        return self._dirty

    def _bump(self) -> None:
        timestamp_ms, counter = self._data_version
        self._data_version = (int(time.time() * 1000), counter + 1)
        self._dirty = True

    def encode(self) -> bytes:
        """The table as RocketMQ's subscriptionGroup.json; clears the dirty flag."""
        with self._lock:
            data = self.snapshot()
            self._dirty = False
        return data

    def snapshot(self) -> bytes:
        """The table as subscriptionGroup.json, leaving the dirty flag alone (a slave's copy)."""
        document = {
            "subscriptionGroupTable": {
                name: config.to_json() for name, config in sorted(self._groups.items())
            },
            "dataVersion": {"timestamp": self._data_version[0], "counter": self._data_version[1]},
        }
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)

    def adopt(self, other: SubscriptionGroupTable) -> bool:
        """A slave takes its master's table and version, unless the version is the same.

        Returns True when the table changed (SlaveSynchronize, ha-replication §3).
        """
        with self._lock:
            if other._data_version == self._data_version:
                return False
            self._groups = dict(other._groups)
            self._data_version = other._data_version
            self._dirty = True
            return True

    @classmethod
    def decode(cls, data: bytes, source: str = "subscriptionGroup.json") -> SubscriptionGroupTable:
        """Load a table written by :meth:`encode`; raises ConfigError naming ``source`` when malformed."""
        table = cls()
        try:
            document = orjson.loads(data)
            raw_groups = document["subscriptionGroupTable"]
            for name, raw in raw_groups.items():
                table._groups[str(name)] = SubscriptionGroupConfig.from_json(str(name), raw)
            version = document.get("dataVersion") or {}
            table._data_version = (int(version.get("timestamp", 0)), int(version.get("counter", 0)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{source}: malformed subscription group table: {exc}") from exc
        return table
