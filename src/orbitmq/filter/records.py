"""Property filters applied to stored records, one at a time or many in one call (pure).

A SQL92 subscription is decided on each stored record's properties (remoting-protocol §3.3:
the property string sits after the body and the topic). :class:`StoredRecordFilter` is that
check as the store's read path asks it: ``filter(record)`` for one record's bytes, and
:meth:`StoredRecordFilter.matches_in` for the records of a pull that lie in one buffer (a
mapped commit-log segment), which needs no record copied out before it is known to match.

``matches_in`` reads the named properties' raw values of every record with
:func:`record_values`, compiled in ``_property_scan.c`` when it built (see
``orbitmq/native.py``), else the pure-Python twin :func:`record_values_py`, which answers the
same; then each record costs one lookup in the expression's memo (:class:`PropertyMemo`).
Without the compiled helper it asks the memoized matcher record by record instead, in place
(the twin's values would cost the same searches and then be looked up again).
Both forms answer alike for every record: a record whose properties cannot be read, or whose
value is not UTF-8, never matches.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from typing import cast

from orbitmq import native
from orbitmq.errors import RemoteProtocolError
from orbitmq.filter.properties import PropertyMemo, RawValue, raw_value_reader
from orbitmq.protocol.message_codec import stored_message_property_bytes

__all__ = [
    "MAX_NAMES",
    "ReadableBuffer",
    "RecordValues",
    "Row",
    "StoredRecordFilter",
    "record_values",
    "record_values_py",
]

ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap
Row = tuple[int, int, int]
"""A record's place: (position in the log, length in bytes, anything); a consume-queue entry."""
RecordValues = tuple[RawValue, ...] | bool | None
"""One record's answer from :func:`record_values`: its values, False (unreadable) or None (elsewhere)."""

MAX_NAMES = 64
"""Most property names :func:`record_values` reads (an expression names a handful)."""


def record_values_py(
    buffer: ReadableBuffer,
    base: int,
    limit: int,
    rows: list[Row],
    names: tuple[str, ...],
) -> list[RecordValues]:
    """The raw values of ``names`` in each record of ``rows`` that lies in ``buffer``.

    ``buffer[0]`` is at position ``base`` of the log and its first ``limit`` bytes may be read.
    Each row's answer: None when its record does not lie wholly in ``buffer[:limit]`` (or its
    length is not positive; the caller reads it another way), False when the record is
    truncated before the end of its properties, else a tuple of one value per name, as
    :func:`~orbitmq.filter.properties.raw_value_reader` reads it (None when absent). The
    pure-Python twin of ``_property_scan.record_values``, which answers the same.

    Raises:
        ValueError: ``limit`` outside ``buffer``, or more than :data:`MAX_NAMES` names.
    """
    if len(names) > MAX_NAMES:
        raise ValueError(f"record_values: at most {MAX_NAMES} names")
    if not 0 <= limit <= len(buffer):
        raise ValueError(f"record_values: limit {limit} is outside a buffer of {len(buffer)}")
    readers = [raw_value_reader(name) for name in names]
    answers: list[RecordValues] = []
    for span in _spans(base, limit, rows):
        if span is None:
            answers.append(None)
            continue
        try:
            text = stored_message_property_bytes(bytes(buffer[span[0] : span[1]]))
        except RemoteProtocolError:
            answers.append(False)
            continue
        answers.append(tuple([read(text) for read in readers]))
    return answers


def _spans(base: int, limit: int, rows: list[Row]) -> Iterator[tuple[int, int] | None]:
    """Where each row's record lies in a buffer whose byte 0 is at ``base`` (start, end), or
    None when it does not lie wholly in the first ``limit`` bytes or its length is not positive."""
    for row in rows:
        position = row[0] - base
        size = row[1]
        if size <= 0 or position < 0 or position + size > limit:
            yield None
        else:
            yield position, position + size


RecordValuesFunction = Callable[[ReadableBuffer, int, int, list[Row], tuple[str, ...]], list[RecordValues]]
_scan_module = native.load("orbitmq.filter._property_scan")
record_values: RecordValuesFunction = (
    _scan_module.record_values if _scan_module is not None else record_values_py
)


class StoredRecordFilter:
    """A property filter over stored records (see the module docstring).

    Built from ``match``, the filter over a raw property string, and, for a memoized filter
    (SQL92), its :class:`PropertyMemo`, which ``match`` must consult: :meth:`matches_in` then
    reads the values itself and asks the memo. Without a memo it calls ``match`` per record.
    """

    __slots__ = ("_match", "_memo")

    def __init__(self, match: Callable[[bytes], bool], memo: PropertyMemo | None = None) -> None:
        self._match = match
        self._memo = memo

    def __call__(self, record: bytes, /) -> bool:
        """Whether one stored record matches (False when its properties cannot be read)."""
        try:
            return self._match(stored_message_property_bytes(record))
        except RemoteProtocolError:
            return False

    def matches_in(self, buffer: ReadableBuffer, base: int, limit: int, rows: list[Row]) -> list[bool | None]:
        """Whether each record of ``rows`` matches; None for one not in ``buffer[:limit]``.

        ``buffer[0]`` is at position ``base`` of the log (see :func:`record_values`); a record
        answered True or False is answered as :meth:`__call__` answers its bytes.
        """
        memo = self._memo
        if memo is None or record_values is record_values_py:
            # Per record, in place: the twin's values would only be looked up again.
            match = self._match
            answers: list[bool | None] = []
            for span in _spans(base, limit, rows):
                if span is None:
                    answers.append(None)
                    continue
                try:
                    answers.append(match(stored_message_property_bytes(buffer[span[0] : span[1]])))
                except RemoteProtocolError:
                    answers.append(False)
            return answers
        keys = record_values(buffer, base, limit, rows, memo.names)
        # False and None are never keys of the memo: their lookups answer None.
        lookup = cast(Callable[[RecordValues], bool | None], memo.answers.get)
        found = list(map(lookup, keys))
        if None in found:
            answer = memo.answer
            for index, decided in enumerate(found):
                if decided is None:
                    key = keys[index]
                    if key is False:
                        found[index] = False
                    elif isinstance(key, tuple):
                        found[index] = answer(key)
        return found
