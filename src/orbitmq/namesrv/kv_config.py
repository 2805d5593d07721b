"""The name server's KV configuration: namespaced string settings operators put there (pure state).

``mqadmin updateKvConfig`` / ``deleteKvConfig`` write it with PUT_KV_CONFIG / DELETE_KV_CONFIG;
clients read it with GET_KV_CONFIG and GET_KVLIST_BY_NAMESPACE. One namespace has a meaning to
the name server itself: ``ORDER_TOPIC_CONFIG``, whose value for a topic (``broker-a:4;broker-b:4``)
is published as the route's ``orderTopicConf`` (globally ordered topics). Persisted, when the
name server has a ``kvConfigPath``, as RocketMQ's ``kvConfig.json``::

    {"configTable": {"<namespace>": {"<key>": "<value>", ...}, ...}}
"""

from __future__ import annotations

import threading

import orjson

from orbitmq.errors import ConfigError

__all__ = ["ORDER_TOPIC_CONFIG", "KVConfigTable"]

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigTable:
    """namespace -> key -> value, thread-safe; ``dirty`` after a change until :meth:`encode`."""

    def __init__(self) -> None:
        self._table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self.dirty = False

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self._table.setdefault(namespace, {})[key] = value
            self.dirty = True

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove one key; True when it was there."""
        with self._lock:
            entries = self._table.get(namespace)
            if entries is None or entries.pop(key, None) is None:
                return False
            if not entries:
                del self._table[namespace]
            self.dirty = True
            return True

    def namespace(self, namespace: str) -> dict[str, str]:
        with self._lock:
            return dict(self._table.get(namespace, {}))

    def encode(self) -> bytes:
        with self._lock:
            document = {
                "configTable": {ns: dict(sorted(items.items())) for ns, items in sorted(self._table.items())}
            }
            self.dirty = False
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)

    @classmethod
    def decode(cls, data: bytes, source: str = "kvConfig.json") -> KVConfigTable:
        """Load a table RocketMQ or :meth:`encode` wrote.

        Raises:
            ConfigError: not that JSON shape; names ``source``.
        """
        table = cls()
        try:
            document = orjson.loads(data)
            for namespace, items in (document.get("configTable") or {}).items():
                table._table[str(namespace)] = {str(key): str(value) for key, value in items.items()}
        except (orjson.JSONDecodeError, AttributeError, TypeError) as exc:
            raise ConfigError(f"{source}: not a KV config table: {exc}") from exc
        return table
