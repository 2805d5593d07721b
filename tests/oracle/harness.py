"""The differential harness: play one scenario against two servers, compare what they answered.

A scenario (tests/oracle/scenarios.py) is a short async function that sends raw remoting
requests through a :class:`Target` and records each response it wants compared with
:meth:`Target.record`. Both targets get the same requests with the same topic and group names.

Each recorded response becomes a flat *view*: ``{path: value}`` with

- ``code``: the response code;
- ``ext.<key>``: the kind of each ext field's value (``int``, ``bool``, ``str``, ``empty``) and,
  unless the key is one whose value must differ between two servers (times, ids, addresses),
  the value itself;
- ``body``: ``json`` / ``messages`` / ``bytes`` / ``empty``;
- ``body.<json path>``: the JSON type of each value in a JSON body (list items merged under
  ``[]``), the value itself where a scenario asked for it (``values=``), or for a body of stored
  messages ``msg[i].<field>`` for each message's topic, queue, queue offset, body, flag and
  property keys.

Maps keyed by names that only one server has (every topic a Java broker creates at start-up)
are cut down by the scenario before comparison (``select=``). Remarks are shown in the failure
message but not compared: they are prose.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from orbitmq.errors import OrbitError
from orbitmq.protocol import fastjson
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.message_codec import decode_stored_messages
from orbitmq.transport.connection import RemotingClient

# Ext-field keys whose values differ between any two servers by nature: compared by kind only.
VARYING_EXT_KEYS = frozenset(
    {
        "msgId",
        "offsetMsgId",
        "transactionId",
        "timestamp",
        "storeTimestamp",
        "brokerAddr",
        "haServerAddr",
        "masterAddr",
        "clientId",
        "dataVersion",
        "MSG_REGION",
        "TRACE_ON",
        # counts of tables that hold each server's own system topics and groups
        "totalTopicNum",
        "totalGroupNum",
    }
)
# Body JSON keys whose values (not types) vary by nature, wherever they appear.
VARYING_BODY_KEYS = frozenset({"timestamp", "counter", "stateVersion", "bornTimestamp", "storeTimestamp"})


def value_kind(value: str) -> str:
    if value == "":
        return "empty"
    if value in ("true", "false"):
        return "bool"
    try:
        int(value)
    except ValueError:
        return "str"
    return "int"


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "object"


def _json_shape(value: Any, path: str, out: dict[str, Any]) -> None:
    out[path] = json_kind(value)
    if isinstance(value, dict):
        for key, item in value.items():
            _json_shape(item, f"{path}.{key}", out)
    elif isinstance(value, list):
        for item in value:
            _json_shape(item, f"{path}[]", out)


def _pick(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not part:
            continue
        if isinstance(value, dict):
            value = {str(key): item for key, item in value.items()}.get(part)
        else:
            return None
    return value


def _plain(value: Any) -> Any:
    """fastjson's ObjectKey keys as plain strings, so bodies compare as ordinary JSON."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _unordered(value: Any) -> Any:
    """Lists sorted: RocketMQ's bodies serialise sets (locked queues, consumer ids) as lists."""
    if isinstance(value, dict):
        return {key: _unordered(item) for key, item in value.items()}
    if isinstance(value, list):
        items = [_unordered(item) for item in value]
        return sorted(items, key=lambda item: orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
    return value


@dataclass
class Recorded:
    label: str
    response: RemotingCommand
    view: dict[str, Any]


@dataclass
class Target:
    """One server pair (broker and nameserver) a scenario is played against."""

    name: str
    broker_addr: str
    namesrv_addr: str
    client: RemotingClient
    scenario: str = ""
    recorded: list[Recorded] = field(default_factory=list)

    async def broker(
        self, code: int, ext: Mapping[str, object] | None = None, body: bytes = b"", timeout_ms: int = 10_000
    ) -> RemotingCommand:
        return await self._invoke(self.broker_addr, code, ext, body, timeout_ms)

    async def namesrv(
        self, code: int, ext: Mapping[str, object] | None = None, body: bytes = b"", timeout_ms: int = 10_000
    ) -> RemotingCommand:
        return await self._invoke(self.namesrv_addr, code, ext, body, timeout_ms)

    async def _invoke(
        self, addr: str, code: int, ext: Mapping[str, object] | None, body: bytes, timeout_ms: int
    ) -> RemotingCommand:
        fields = {
            key: str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in (ext or {}).items()
        }
        request = RemotingCommand.request(code, fields, body)
        return await self.client.invoke(addr, request, timeout_ms=timeout_ms)

    def record(
        self,
        label: str,
        response: RemotingCommand,
        *,
        select: Iterable[str] = (),
        values: Iterable[str] = (),
        ext_values: bool = True,
    ) -> RemotingCommand:
        """Keep ``response`` for comparison under ``label``.

        ``select``: JSON paths (dotted) of the body to compare instead of the whole body;
        ``values``: JSON paths (dotted, from the body's root) whose values are compared, not only types;
        ``ext_values``: False compares every ext field by kind only.
        """
        self.recorded.append(Recorded(label, response, view_of(response, select, values, ext_values)))
        return response


def view_of(
    response: RemotingCommand, select: Iterable[str], values: Iterable[str], ext_values: bool
) -> dict[str, Any]:
    view: dict[str, Any] = {"code": response.code}
    for key, value in response.ext_fields.items():
        view[f"ext.{key}"] = value_kind(value)
        if ext_values and key not in VARYING_EXT_KEYS:
            view[f"ext.{key}="] = value
    body = bytes(response.body)
    if not body:
        view["body"] = "empty"
        return view
    try:
        parsed = _plain(fastjson.loads(body))
    except OrbitError:
        parsed = None
    if isinstance(parsed, dict | list):
        view["body"] = "json"
        selected = {path: _pick(parsed, path) for path in select} if select else {"": parsed}
        shape: dict[str, Any] = {}
        for path, value in selected.items():
            _json_shape(value, f"body.{path}" if path else "body", shape)
        view.update(shape)
        for path in values:
            view[f"body.{path}="] = _unordered(_pick(parsed, path))
        return view
    try:
        messages = decode_stored_messages(body)
    except (OrbitError, ValueError, IndexError):
        messages = []
    if messages:
        view["body"] = "messages"
        for index, message in enumerate(messages):
            prefix = f"msg[{index}]"
            view[f"{prefix}.topic"] = message.topic
            view[f"{prefix}.queueId"] = message.queue_id
            view[f"{prefix}.queueOffset"] = message.queue_offset
            view[f"{prefix}.body"] = bytes(message.body)
            view[f"{prefix}.flag"] = message.flag
            view[f"{prefix}.sysFlag"] = message.sys_flag
            view[f"{prefix}.reconsumeTimes"] = message.reconsume_times
            view[f"{prefix}.properties"] = sorted(message.properties)
        return view
    view["body"] = "bytes"
    return view


def _strip_varying(view: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for path, value in view.items():
        last = path.rstrip("=").rsplit(".", 1)[-1]
        if path.endswith("=") and path.startswith("body.") and last in VARYING_BODY_KEYS:
            continue
        out[path] = value
    return out


@dataclass(frozen=True)
class Difference:
    scenario: str
    label: str
    path: str
    apache: Any
    orbitmq: Any

    def __str__(self) -> str:
        return (
            f"{self.scenario} / {self.label} / {self.path}: apache={self.apache!r} orbitmq={self.orbitmq!r}"
        )


_ABSENT = "<absent>"


def compare(scenario: str, apache: list[Recorded], orbitmq: list[Recorded]) -> list[Difference]:
    """Every path where the two servers' recorded responses differ."""
    differences = []
    if [r.label for r in apache] != [r.label for r in orbitmq]:
        return [Difference(scenario, "*", "labels", [r.label for r in apache], [r.label for r in orbitmq])]
    for left, right in zip(apache, orbitmq, strict=True):
        left_view, right_view = _strip_varying(left.view), _strip_varying(right.view)
        for path in sorted(set(left_view) | set(right_view)):
            a, b = left_view.get(path, _ABSENT), right_view.get(path, _ABSENT)
            if a != b:
                differences.append(Difference(scenario, left.label, path, a, b))
    return differences


@dataclass(frozen=True)
class Allowed:
    """One entry of the reviewed list of differences (tests/oracle/intended_differences.py)."""

    scenario: str  # fnmatch pattern
    label: str  # fnmatch pattern
    path: str  # fnmatch pattern
    reason: str
    known_defect: bool = False

    def matches(self, difference: Difference) -> bool:
        return (
            fnmatch.fnmatchcase(difference.scenario, self.scenario)
            and fnmatch.fnmatchcase(difference.label, self.label)
            and fnmatch.fnmatchcase(difference.path, self.path)
        )


def unexplained(differences: list[Difference], allowed: Iterable[Allowed]) -> list[Difference]:
    rules = list(allowed)
    return [d for d in differences if not any(rule.matches(d) for rule in rules)]


Scenario = Callable[[Target], Awaitable[None]]
