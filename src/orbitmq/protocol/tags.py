"""Tag hash codes and TAG subscription expressions.

A consume-queue entry carries the tag's hash code: Java's ``String.hashCode()``
over UTF-16 code units, as a signed 32-bit value. A TAG expression is ``*`` (or
empty) for everything, or tags separated by ``||``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from operator import mul

SUB_ALL = "*"


_MASK_32 = 0xFFFFFFFF
# Per code-unit count n: ([31**(n-1), ..., 31**0] mod 2**32, 31**n mod 2**32). With it a
# hash is one C-level dot product, sum(map(mul, units, powers)), reduced once. Entries are
# only ever added whole, so threads may share the table.
_descending_powers: dict[int, tuple[list[int], int]] = {}
_DESCENDING_POWERS_CACHED_MAX = 4096


def _powers_for(count: int) -> tuple[list[int], int]:
    """The descending powers of 31 for ``count`` code units, and 31**count (mod 2**32)."""
    entry = _descending_powers.get(count)
    if entry is None:
        ascending = [1]
        for _ in range(count):
            ascending.append((ascending[-1] * 31) & _MASK_32)
        entry = (ascending[count - 1 :: -1] if count else [], ascending[count])
        if count <= _DESCENDING_POWERS_CACHED_MAX:
            _descending_powers[count] = entry
    return entry


def _utf16_units(text: str) -> bytes | list[int]:
    """The UTF-16 code units of ``text`` (its bytes when ASCII, as for nearly every key and tag)."""
    if text.isascii():
        return text.encode("ascii")
    raw = text.encode("utf-16-be")
    return [(raw[index] << 8) | raw[index + 1] for index in range(0, len(raw), 2)]


def java_string_hash_unsigned(text: str) -> int:
    """Java's ``String.hashCode()`` of ``text`` as an unsigned 32-bit value.

    ``h = sum(c[i] * 31**(n-1-i))`` over the n UTF-16 code units ``c``: the same value as
    Java's ``h = 31*h + c`` loop, computed as one dot product and reduced once.
    """
    units = _utf16_units(text)
    value: int = sum(map(mul, units, _powers_for(len(units))[0]))
    return value & _MASK_32


def to_signed_32(value: int) -> int:
    """An unsigned 32-bit value as Java's signed int."""
    return value - 0x100000000 if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, signed 32-bit."""
    return to_signed_32(java_string_hash_unsigned(text))


def descending_powers_31(count: int) -> tuple[list[int], int]:
    """``([31**(count-1), ..., 31**0], 31**count)`` mod 2**32, for callers that inline the hash."""
    return _descending_powers.get(count) or _powers_for(count)


def java_string_hash_concat(prefix_hash_unsigned: int, suffix: str) -> int:
    """Java's hashCode of ``prefix + suffix`` from the prefix's unsigned hash, signed 32-bit.

    ``h(prefix + suffix) = h(prefix) * 31**n + h(suffix)`` mod 2**32, n being the suffix's
    UTF-16 code units: callers that hash many keys under one prefix (the index's
    ``topic#key``) hash the prefix once.
    """
    units = _utf16_units(suffix)
    powers, shift = _powers_for(len(units))
    value: int = prefix_hash_unsigned * shift + sum(map(mul, units, powers))
    value &= _MASK_32
    return value - 0x100000000 if value & 0x80000000 else value


@lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """The consume-queue tags code of a message's TAGS property (0 when it has none).

    Cached: a topic's messages carry few distinct tags, and this runs once per stored message.
    """
    return java_string_hash(tags) if tags else 0


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A parsed TAG expression. ``tags`` is empty for "match everything"."""

    expression: str
    tags: frozenset[str]
    codes: frozenset[int]

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        text = (expression or "").strip()
        if not text or text == SUB_ALL:
            return cls(SUB_ALL, frozenset(), frozenset())
        tags = frozenset(part.strip() for part in text.split("||") if part.strip())
        if not tags:
            return cls(SUB_ALL, frozenset(), frozenset())
        return cls(text, tags, frozenset(java_string_hash(tag) for tag in tags))

    @property
    def matches_all(self) -> bool:
        return not self.tags

    def matches_code(self, code: int) -> bool:
        """Consume-queue level check (may pass a hash collision; clients re-check the tag)."""
        return not self.codes or code in self.codes

    def matches_tag(self, tag: str | None) -> bool:
        return not self.tags or (tag is not None and tag in self.tags)
