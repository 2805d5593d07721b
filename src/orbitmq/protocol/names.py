"""The rules for names that travel in requests: topics, groups, broker and cluster names.

RocketMQ allows ``[%|a-zA-Z0-9_-]`` in topic and group names, topics up to 127 characters
(the stored record keeps the topic length in one signed byte). OrbitMQ keeps groups to 120
characters, so that ``%RETRY%<group>`` and ``%DLQ%<group>``, the topics a group's retries and
dead letters go to, are always legal topic names themselves.

Names become directory names in the store (``consumequeue/<topic>/<queueId>``) and keys of
the persisted tables, so these rules are also what keeps a request from naming a path: the
charset has no ``/``, ``.`` or NUL. The functions return ``None`` for an acceptable name, or
a short remark that names the rule broken and shows at most the start of the value
(:func:`shorten`), so a megabyte of bad input never reaches a response or a log line.
"""

from __future__ import annotations

import re

__all__ = [
    "GROUP_NAME_MAX_CHARS",
    "NAME_CHARSET",
    "TOPIC_NAME_MAX_CHARS",
    "group_name_problem",
    "is_legal_name",
    "shorten",
    "topic_name_problem",
]

NAME_CHARSET = "^[%|a-zA-Z0-9_-]+$"
TOPIC_NAME_MAX_CHARS = 127
GROUP_NAME_MAX_CHARS = 120
"""127 minus ``len("%RETRY%")``: a group's retry topic must itself be a legal topic name."""

_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
_SHOWN_MAX_CHARS = 48


def shorten(value: object, shown_max_chars: int = _SHOWN_MAX_CHARS) -> str:
    """``value`` as text for a remark or log line: at most ``shown_max_chars`` characters of it.

    A longer value shows its start, then ``...`` and its full length, e.g. ``aaaa...(1048576
    chars)``. Control characters are escaped so a remark stays one printable line.
    """
    text = value if isinstance(value, str) else repr(value)
    if len(text) > shown_max_chars:
        text = f"{text[:shown_max_chars]}...({len(text)} chars)"
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text


def is_legal_name(name: str, max_chars: int = TOPIC_NAME_MAX_CHARS) -> bool:
    """True when ``name`` is 1..``max_chars`` characters from :data:`NAME_CHARSET`."""
    return 0 < len(name) <= max_chars and _NAME.fullmatch(name) is not None


def _name_problem(kind: str, name: str, max_chars: int) -> str | None:
    if not name or not name.strip():
        return f"The specified {kind} is blank."
    if len(name) > max_chars:
        return f"The specified {kind} '{shorten(name)}' is longer than {kind} max length {max_chars}."
    if _NAME.fullmatch(name) is None:
        return f"The specified {kind} '{shorten(name)}' contains illegal characters, allowing only {NAME_CHARSET}"
    return None


def topic_name_problem(topic: str) -> str | None:
    """RocketMQ's TopicValidator rule; None when ``topic`` is legal, else the remark."""
    return _name_problem("topic", topic, TOPIC_NAME_MAX_CHARS)


def group_name_problem(group: str) -> str | None:
    """The group rule; None when ``group`` is legal, else the remark."""
    return _name_problem("group", group, GROUP_NAME_MAX_CHARS)
