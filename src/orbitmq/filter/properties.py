"""Property lookups in a raw property string, without decoding all of it (pure).

A stored message's properties are ``name 0x01 value 0x02 ...`` in UTF-8
(remoting-protocol §3.3). A SQL92 filter reads a few names per message, so
:class:`PropertyBytes` finds each one with a byte search instead of building a dict of every
property (the message's UNIQ_KEY, KEYS, CLUSTER...). A later duplicate wins, as when Java
decodes the string into a HashMap; names and values cannot contain the separators, so a search
for ``0x02 name 0x01`` never matches inside a value.

:class:`PropertyMemo` is the broker's per-record check: it reads only the properties an
expression names and remembers the expression's answer per tuple of their raw values
(:func:`memoized_matcher` is its ``raw property string -> bool`` form).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["PropertyBytes", "PropertyLookup", "PropertyMemo", "memoized_matcher", "raw_value_reader"]

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


RawValue = bytes | None
"""A property's value as it sits in the raw string (undecoded), None when it is absent."""

MEMO_MAX_ENTRIES = 4096
"""Answers one memo keeps before it starts over (values of ``price`` x ``region``, say)."""
MEMO_MAX_KEY_BYTES = 256
"""Longer value tuples are evaluated without being remembered: the memo's memory stays small."""


def raw_value_reader(name: str) -> Callable[[bytes], RawValue]:
    """A reader of ``name``'s undecoded value in a raw property string (a later duplicate wins)."""
    head, inner = _key(name)
    head_len, inner_len = len(head), len(inner)

    def read(data: bytes) -> RawValue:
        index = data.rfind(inner)
        if index >= 0:
            start = index + inner_len
        elif data.startswith(head):
            start = head_len
        else:
            return None
        end = data.find(b"\x02", start)
        return data[start:end] if end >= 0 else data[start:]

    return read


class PropertyMemo:
    """``decide`` over the named properties, remembered per tuple of their raw values.

    ``decide`` must depend on those properties alone (a compiled filter reads no others), so
    its answer for one tuple of raw values is its answer for every message carrying them: a
    filter over ``price`` and ``region`` evaluates once per distinct pair. A value that is not
    UTF-8 never matches. :attr:`answers` is the memo itself, for callers that look many keys up
    at once (``orbitmq.filter.records``); :meth:`answer` decides a key it lacks and remembers it.
    """

    __slots__ = ("answers", "decide", "names")

    def __init__(self, names: tuple[str, ...], decide: Callable[[dict[str, str]], bool]) -> None:
        self.names = names
        self.decide = decide
        self.answers: dict[tuple[RawValue, ...], bool] = {}

    def answer(self, key: tuple[RawValue, ...]) -> bool:
        """The decision for one tuple of raw values (one per name), remembered when small."""
        try:
            values = {
                name: value.decode("utf-8")
                for name, value in zip(self.names, key, strict=True)
                if value is not None
            }
        except UnicodeDecodeError:
            decided = False
        else:
            decided = self.decide(values)
        if sum(len(value) for value in key if value is not None) <= MEMO_MAX_KEY_BYTES:
            memo = self.answers
            if len(memo) >= MEMO_MAX_ENTRIES:
                memo.clear()
            memo[key] = decided
        return decided

    def matcher(self) -> Callable[[bytes], bool]:
        """``raw property string -> bool``: the byte searches, then the memo (see the class)."""
        readers = tuple(raw_value_reader(name) for name in self.names)
        memo = self.answers
        answer = self.answer
        if len(readers) == 1:
            (read,) = readers

            def matches_one(data: bytes) -> bool:
                key = (read(data),)
                decided = memo.get(key)
                return answer(key) if decided is None else decided

            return matches_one
        if len(readers) == 2:
            first, second = readers

            def matches_two(data: bytes) -> bool:
                key = (first(data), second(data))
                decided = memo.get(key)
                return answer(key) if decided is None else decided

            return matches_two

        def matches(data: bytes) -> bool:
            key = tuple([read(data) for read in readers])
            decided = memo.get(key)
            return answer(key) if decided is None else decided

        return matches


def memoized_matcher(
    names: tuple[str, ...], decide: Callable[[dict[str, str]], bool]
) -> Callable[[bytes], bool]:
    """``raw property string -> bool``: ``decide`` over the named properties, remembered by their values.

    Each message costs the byte searches and a dict lookup once its tuple of values has been
    decided (see :class:`PropertyMemo`, which this builds).
    """
    return PropertyMemo(names, decide).matcher()
