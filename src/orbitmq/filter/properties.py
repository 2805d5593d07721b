"""Property lookups in a raw property string, without decoding all of it (pure).

A stored message's properties are ``name 0x01 value 0x02 ...`` in UTF-8
(remoting-protocol §3.3). A SQL92 filter reads a few names per message, so
:class:`PropertyBytes` finds each one with a byte search instead of building a dict of every
property (the message's UNIQ_KEY, KEYS, CLUSTER...). A later duplicate wins, as when Java
decodes the string into a HashMap; names and values cannot contain the separators, so a search
for ``0x02 name 0x01`` never matches inside a value.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["PropertyBytes", "PropertyLookup"]

_KEY_CACHE_MAX = 4096
_keys: dict[str, tuple[bytes, bytes]] = {}


class PropertyLookup(Protocol):
    """What a filter reads properties through: a dict, or :class:`PropertyBytes`."""

    def get(self, key: str, /) -> str | None: ...


def _key(name: str) -> tuple[bytes, bytes]:
    entry = _keys.get(name)
    if entry is None:
        if len(_keys) >= _KEY_CACHE_MAX:
            _keys.clear()
        head = name.encode("utf-8") + b"\x01"
        entry = _keys[name] = (head, b"\x02" + head)
    return entry


class PropertyBytes:
    """Read-only ``get(name)`` over a raw property string.

    Raises (from ``get``):
        UnicodeDecodeError: the value found is not UTF-8.
    """

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def get(self, key: str, /) -> str | None:
        head, inner = _key(key)
        data = self._data
        index = data.rfind(inner)
        if index >= 0:
            start = index + len(inner)
        elif data.startswith(head):
            start = len(head)
        else:
            return None
        end = data.find(b"\x02", start)
        return (data[start:end] if end >= 0 else data[start:]).decode("utf-8")
