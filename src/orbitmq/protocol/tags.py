"""Tag hash codes and TAG subscription expressions.

A consume-queue entry carries the tag's hash code: Java's ``String.hashCode()``
over UTF-16 code units, as a signed 32-bit value. A TAG expression is ``*`` (or
empty) for everything, or tags separated by ``||``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

SUB_ALL = "*"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, signed 32-bit.

    Python integers do not overflow, so the sum is reduced to 32 bits once at the end;
    for ASCII text (nearly every key and tag) the UTF-16 code units are the bytes.
    """
    value = 0
    if text.isascii():
        for code in text.encode("ascii"):
            value = value * 31 + code
    else:
        units = text.encode("utf-16-be")
        for index in range(0, len(units), 2):
            value = value * 31 + ((units[index] << 8) | units[index + 1])
    value &= 0xFFFFFFFF
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
