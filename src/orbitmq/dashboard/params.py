"""What a dashboard request asks, checked: times, numbers, topic and group names.

A bad value raises :class:`BadRequest` (the app answers 400 with the one line saying what was
wrong; the cluster is not asked); a name that does not exist raises :class:`NotFound` (404).
"""

from __future__ import annotations

import datetime

from orbitmq.protocol.names import group_name_problem, topic_name_problem

__all__ = ["BadRequest", "NotFound", "group_name", "int_param", "parse_time_ms", "time_input", "topic_name"]


class BadRequest(Exception):
    """A request the dashboard cannot answer as asked: a 400 page saying what was wrong."""


class NotFound(Exception):
    """A topic, group or message that does not exist: a 404 page saying so."""

    def __init__(self, title: str, text: str) -> None:
        super().__init__(text)
        self.title = title


def parse_time_ms(text: str | None, default_ms: int, name: str = "time") -> int:
    """``YYYY-MM-DDTHH:MM[:SS]`` in UTC (an HTML datetime-local value), or epoch ms.

    Raises:
        BadRequest: neither.
    """
    if not text:
        return default_ms
    if text.isdigit() and len(text) <= 16:
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return int(moment.timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise BadRequest(
            f"{name} {shown!r} is not a time: give YYYY-MM-DDTHH:MM (UTC) or epoch milliseconds"
        ) from None


def topic_name(name: str) -> str:
    """``name`` when it is a legal topic name (RocketMQ's rule).

    Raises:
        BadRequest: it is not; the cluster is not asked.
    """
    problem = topic_name_problem(name)
    if problem is not None:
        raise BadRequest(problem)
    return name


def group_name(name: str) -> str:
    """``name`` when it is a legal consumer group name (or a ``%DLQ%`` topic's).

    Raises:
        BadRequest: it is not.
    """
    problem = group_name_problem(name.removeprefix("%DLQ%"))
    if problem is not None:
        raise BadRequest(problem)
    return name


def int_param(text: str | None, default: int, name: str) -> int:
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"{name} {text[:40]!r} is not a whole number") from None


def time_input(timestamp_ms: int) -> str:
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M")
