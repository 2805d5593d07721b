"""RocketMQ 5 topic attributes: ``message.type``, ``queue.type``, ``cleanup.policy``, ``reserve.time``.

A topic's attributes are a string map stored in its config (``"attributes": {"message.type":
"FIFO"}`` in topics.json, TopicConfigSerializeWrapper and GET_TOPIC_CONFIG's body). Admins
change them with UPDATE_AND_CREATE_TOPIC's ``attributes`` header, a comma-separated list of
changes as ``mqadmin updateTopic -a`` writes it: ``+key=value`` adds or changes a key, ``-key``
removes one (``+message.type=FIFO,-reserve.time``).

The rules are RocketMQ's (TopicAttributes, AttributeParser, AttributeUtil):

| key | values | changeable after creation |
| --- | --- | --- |
| ``message.type`` | UNSPECIFIED NORMAL FIFO DELAY TRANSACTION MIXED (default NORMAL) | yes |
| ``queue.type`` | BatchCQ SimpleCQ | no |
| ``cleanup.policy`` | DELETE COMPACTION | no |
| ``reserve.time`` | -1 .. 2^63-1 | yes |

Creating a topic accepts only ``+`` changes; a change to an unknown key, an unchangeable key of
an existing topic, a value outside the key's set, or removing a key the topic does not have is
refused with RocketMQ's words (:class:`AttributeError_`). A topic without ``message.type`` is a
NORMAL topic: the gRPC proxy takes only normal messages for it.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "MESSAGE_TYPE",
    "MESSAGE_TYPES",
    "AttributeError_",
    "alter_attributes",
    "format_attribute_changes",
    "message_type_of_attributes",
    "parse_attribute_changes",
]

MESSAGE_TYPE = "message.type"
MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
"""RocketMQ's TopicMessageType values."""

_LONG_MAX = (1 << 63) - 1


class AttributeError_(ValueError):  # noqa: N801 - the builtin AttributeError means something else
    """A topic attribute change RocketMQ refuses; the message is RocketMQ's."""


@dataclass(frozen=True, slots=True)
class _Attribute:
    name: str
    changeable: bool
    values: tuple[str, ...] = ()
    """The allowed values; empty for the long range of ``reserve.time``."""

    def verify(self, value: str) -> None:
        if self.values:
            if value not in self.values:
                raise AttributeError_(f"value is not in set: [{', '.join(self.values)}]")
            return
        try:
            number = int(value)
        except ValueError:
            raise AttributeError_(f"{self.name} is not a number: {value}") from None
        if not -1 <= number <= _LONG_MAX:
            raise AttributeError_(f"value is not in range(-1, {_LONG_MAX})")


_ALL = {
    attribute.name: attribute
    for attribute in (
        _Attribute("queue.type", False, ("BatchCQ", "SimpleCQ")),
        _Attribute("cleanup.policy", False, ("DELETE", "COMPACTION")),
        _Attribute(MESSAGE_TYPE, True, MESSAGE_TYPES),
        _Attribute("reserve.time", True),
    )
}


def parse_attribute_changes(text: str | None) -> dict[str, str]:
    """``+k1=v1,+k2=v2,-k3`` -> ``{"+k1": "v1", "+k2": "v2", "-k3": ""}`` (AttributeParser.parseToMap).

    Raises:
        AttributeError_: a change without its sign, an add without a value, a key given twice.
    """
    changes: dict[str, str] = {}
    if not text:
        return changes
    for change in text.split(","):
        if "=" in change:
            key, _, value = change.partition("=")
            if "+" not in key:
                raise AttributeError_(f"add/alter attribute format is wrong: {key}")
            if not value or "=" in value:
                raise AttributeError_(f"add/alter attribute format is wrong: {change}")
        else:
            key, value = change, ""
            if "-" not in key:
                raise AttributeError_(f"delete attribute format is wrong: {key}")
        if key in changes:
            raise AttributeError_(f"key duplication: {key}")
        changes[key] = value
    return changes


def format_attribute_changes(changes: Mapping[str, str]) -> str:
    """The header form of ``changes`` (AttributeParser.parseToString)."""
    return ",".join(f"{key}={value}" if value else key for key, value in changes.items())


def alter_attributes(create: bool, current: Mapping[str, str], changes: Mapping[str, str]) -> dict[str, str]:
    """A topic's attributes after ``changes`` (AttributeUtil.alterCurrentAttributes).

    Args:
        create: the topic does not exist yet (only ``+`` changes, unchangeable keys allowed).
        current: the topic's attributes now.
        changes: from :func:`parse_attribute_changes`.

    Raises:
        AttributeError_: a change RocketMQ refuses (see the module docstring).
    """
    final = dict(current)
    removed: list[str] = []
    seen: set[str] = set()
    for key, value in changes.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise AttributeError_("kv string format wrong.")
        if real in seen:
            raise AttributeError_(f"alter duplication key. key: {real}")
        seen.add(real)
        if create and not key.startswith("+"):
            raise AttributeError_(f"only add attribute is supported while creating topic. key: {real}")
        if not key.startswith(("+", "-")):
            raise AttributeError_(f"wrong format key: {real}")
        deleting = key.startswith("-")
        if deleting and real not in current:
            raise AttributeError_(f"attempt to delete a nonexistent key: {real}")
        attribute = _ALL.get(real)
        if attribute is None:
            raise AttributeError_(f"unsupported key: {real}")
        if not create and not attribute.changeable:
            raise AttributeError_(f"attempt to update an unchangeable attribute. key: {real}")
        if deleting:
            removed.append(real)
        else:
            attribute.verify(value)
            final[real] = value
    for real in removed:
        final.pop(real, None)
    return final


def message_type_of_attributes(attributes: Mapping[str, str]) -> str:
    """The topic's message type: its ``message.type``, NORMAL without one (TopicConfig.getTopicMessageType)."""
    return attributes.get(MESSAGE_TYPE) or "NORMAL"
