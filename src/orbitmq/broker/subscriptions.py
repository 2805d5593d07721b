"""Subscription group configs: per consumer group settings (retry queues, max reconsume times).

A group gets a config the first time it heartbeats or sends back a message when
``autoCreateSubscriptionGroup`` is on (the default); with it off, unknown groups are refused with
SUBSCRIPTION_GROUP_NOT_EXIST. Persisted as RocketMQ's ``subscriptionGroup.json``::

    {"subscriptionGroupTable": {"<group>": {"groupName": ..., "consumeEnable": true,
        "retryQueueNums": 1, "retryMaxTimes": 16, ...}}, "dataVersion": {...}}

The table holds at most ``maxConsumerGroups`` groups, and only legal group names: creating
one more, or an illegal one, raises a BrokerResponseError naming the limit or the rule. A
damaged entry of the file is skipped with a warning at load; the broker still starts.

Pure state: the persistence service writes what :meth:`SubscriptionGroupTable.encode` returns.
"""

from __future__ import annotations

import logging
import threading
import time

import orjson

from orbitmq.errors import BrokerResponseError, ConfigError
from orbitmq.model.subscription_group import DEFAULT_RETRY_MAX_TIMES, SubscriptionGroupConfig
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.names import group_name_problem, shorten

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_RETRY_MAX_TIMES", "SubscriptionGroupConfig", "SubscriptionGroupTable"]

# Groups a RocketMQ broker creates at start-up; tools and clients expect them to exist.
_BUILTIN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONSAPI_OWNER")


class SubscriptionGroupTable:
    """Consumer group configs by name (thread-safe; handlers and the persistence service share it)."""

    def __init__(self, groups_max: int = 0) -> None:
        self._groups: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig(name) for name in _BUILTIN_GROUPS
        }
        self._lock = threading.Lock()
        self._data_version = (int(time.time() * 1000), 0)
        self._dirty = False
        self.groups_max = groups_max

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._groups.get(group)

    def find_or_create(self, group: str, auto_create: bool) -> SubscriptionGroupConfig | None:
        """The group's config, created with defaults when missing and ``auto_create`` is on."""
        config = self._groups.get(group)
        if config is not None or not auto_create:
            return config
        return self.put(SubscriptionGroupConfig(group))

    def put(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        """Create or replace a group's config.

        Raises:
            BrokerResponseError: the name is not a legal group, or the table is full.
        """
        problem = group_name_problem(config.group_name)
        if problem is not None:
            raise BrokerResponseError(ResponseCode.SYSTEM_ERROR, problem)
        with self._lock:
            if (
                self.groups_max
                and config.group_name not in self._groups
                and len(self._groups) >= self.groups_max
            ):
                raise BrokerResponseError(
                    ResponseCode.SYSTEM_ERROR,
                    f"cannot create consumer group {config.group_name}: this broker already has "
                    f"{len(self._groups)} groups (maxConsumerGroups={self.groups_max})",
                )
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

    def configs(self) -> tuple[dict[str, SubscriptionGroupConfig], tuple[int, int]]:
        """Every group's config and the table's data version (timestamp ms, counter)."""
        with self._lock:
            return dict(self._groups), self._data_version

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
            "dataVersion": {
                "timestamp": self._data_version[0],
                "counter": self._data_version[1],
                "stateVersion": 0,
            },
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
    def decode(
        cls, data: bytes, source: str = "subscriptionGroup.json", groups_max: int = 0
    ) -> SubscriptionGroupTable:
        """Load a table written by :meth:`encode`; a damaged group entry is skipped with a warning.

        Raises:
            ConfigError: the document is not JSON or has no subscriptionGroupTable; names ``source``.
        """
        table = cls(groups_max)
        try:
            document = orjson.loads(data)
            raw_groups = document["subscriptionGroupTable"]
            if not isinstance(raw_groups, dict):
                raise TypeError("subscriptionGroupTable is not an object")
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(f"{source}: malformed subscription group table: {exc}") from exc
        for name, raw in raw_groups.items():
            try:
                problem = group_name_problem(str(name))
                if problem is None:
                    table._groups[str(name)] = SubscriptionGroupConfig.from_json(str(name), raw)
            except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                problem = str(exc)
            if problem is not None:
                logger.warning("%s: group entry %s skipped: %s", source, shorten(name), shorten(problem, 200))
        try:
            version = document.get("dataVersion") or {}
            table._data_version = (int(version.get("timestamp", 0)), int(version.get("counter", 0)))
        except (TypeError, ValueError, AttributeError) as exc:
            logger.warning("%s: dataVersion unreadable (%s); starting a new one", source, exc)
        return table
