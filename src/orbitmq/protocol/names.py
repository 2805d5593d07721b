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

import functools
import ipaddress
import re

__all__ = [
    "ADDRESS_MAX_CHARS",
    "GROUP_NAME_MAX_CHARS",
    "NAME_CHARSET",
    "TOPIC_NAME_MAX_CHARS",
    "address_problem",
    "group_name_problem",
    "is_legal_name",
    "shorten",
    "topic_name_problem",
]

NAME_CHARSET = "^[%|a-zA-Z0-9_-]+$"
TOPIC_NAME_MAX_CHARS = 127
GROUP_NAME_MAX_CHARS = 120
"""127 minus ``len("%RETRY%")``: a group's retry topic must itself be a legal topic name."""

ADDRESS_MAX_CHARS = 261
"""A 255-character host name, ``:`` and a 5-digit port."""

_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
# A DNS host name (labels of letters, digits, '-' and, as some hosts have them, '_').
_HOST_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_PORT = re.compile(r"[0-9]{1,5}")
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


# Every request names its topic and group, mostly the same few: the verdicts are cached.
_NAME_VERDICTS_MAX = 4096


@functools.lru_cache(maxsize=_NAME_VERDICTS_MAX)
def topic_name_problem(topic: str) -> str | None:
    """RocketMQ's TopicValidator rule; None when ``topic`` is legal, else the remark."""
    return _name_problem("topic", topic, TOPIC_NAME_MAX_CHARS)


@functools.lru_cache(maxsize=_NAME_VERDICTS_MAX)
def group_name_problem(group: str) -> str | None:
    """The group rule; None when ``group`` is legal, else the remark."""
    return _name_problem("group", group, GROUP_NAME_MAX_CHARS)


def address_problem(address: str) -> str | None:
    """None when ``address`` is ``host:port`` as RocketMQ splits it, else the remark.

    The port follows the last ``:`` (RemotingHelper.string2SocketAddress), 1..65535; the
    host is an IPv4 or IPv6 literal (bare, as Java prints it, or in brackets) or a DNS host
    name. Nothing else is connectable, so a registration naming anything else is refused
    rather than published to clients, the dashboard and ``orbitmq admin``.
    """
    if not address:
        return "the address is blank"
    if len(address) > ADDRESS_MAX_CHARS:
        return f"the address '{shorten(address)}' is longer than {ADDRESS_MAX_CHARS} characters"
    host, colon, port_text = address.rpartition(":")
    if not colon or _PORT.fullmatch(port_text) is None or not 0 < int(port_text) < 65536:
        return f"the address '{shorten(address)}' is not host:port (port 1..65535)"
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if _host_ok(host):
        return None
    return f"the address '{shorten(address)}' does not start with an IP address or host name"


def _host_ok(host: str) -> bool:
    if "%" in host:  # an IPv6 scope id names a local interface, not a peer
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    return 0 < len(host) <= 255 and all(_HOST_LABEL.fullmatch(label) for label in labels)
