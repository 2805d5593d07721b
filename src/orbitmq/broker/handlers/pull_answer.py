"""The answer to a pull that found messages, its JSON header written from one template.

Every such answer has the same header but for six numbers: the code, the four offsets and
broker id of ``extFields`` (``topicSysFlag`` and ``groupSysFlag`` too), and the flag and
opaque the transport sets. The generic encoder builds a dict, converts each ext value and
runs the JSON serializer for each of them; :class:`PullAnswer` fills the numbers into the
bytes the generic encoder would write (``tests/unit/broker/test_pull_answer.py`` holds the
two to the same bytes). An answer in RocketMQ's binary layout, or with a remark, is encoded
by the generic encoder.
"""

from __future__ import annotations

import struct

from orbitmq.protocol.codes import FLAG_RESPONSE, ORBITMQ_VERSION, ResponseCode, SerializeType
from orbitmq.protocol.command import RemotingCommand

__all__ = ["ANSWER_EXT_KEYS", "PullAnswer", "found_answer"]

ANSWER_EXT_KEYS = (
    "nextBeginOffset",
    "minOffset",
    "maxOffset",
    "suggestWhichBrokerId",
    "topicSysFlag",
    "groupSysFlag",
)
"""The ext fields of a pull's answer, in the order they are written."""

_LANGUAGE = "JAVA"
# What RemotingCommand._json_header writes for a JSON answer without a remark (orjson: no
# spaces, keys in insertion order); every value of extFields is a decimal string.
_JSON_TEMPLATE = (
    '{"code":%d,"extFields":{'
    + ",".join(f'"{key}":"%s"' for key in ANSWER_EXT_KEYS)
    + '},"flag":%d,"language":"'
    + _LANGUAGE
    + '","opaque":%d,"remark":null,"serializeTypeCurrentRPC":"JSON","version":'
    + str(ORBITMQ_VERSION)
    + "}"
)
_SUCCESS = int(ResponseCode.SUCCESS)
_FRAME_HEAD = struct.Struct(">ii")  # frame length, header word (JSON: the header's length)


class PullAnswer(RemotingCommand):
    """A pull's answer with messages (see the module docstring)."""

    __slots__ = ()

    def encode_header(self, body_len: int | None = None) -> bytes:
        if (
            self.serialize_type != SerializeType.JSON
            or self.remark is not None
            or self.language != _LANGUAGE
            or self.version != ORBITMQ_VERSION
        ):
            return RemotingCommand.encode_header(self, body_len)
        ext = self.ext_fields
        header = (
            _JSON_TEMPLATE
            % (
                self.code,
                ext["nextBeginOffset"],
                ext["minOffset"],
                ext["maxOffset"],
                ext["suggestWhichBrokerId"],
                ext["topicSysFlag"],
                ext["groupSysFlag"],
                self.flag,
                self.opaque,
            )
        ).encode()
        if body_len is None:
            body_len = len(self.body)
        return _FRAME_HEAD.pack(4 + len(header) + body_len, len(header)) + header


def found_answer(
    request: RemotingCommand,
    next_begin_offset: int,
    min_offset: int,
    max_offset: int,
    suggested_broker_id: int,
    topic_sys_flag: int,
    body: bytes,
) -> PullAnswer:
    """SUCCESS to ``request`` with ``body`` (the records) and the offsets the client needs."""
    return PullAnswer(
        code=_SUCCESS,
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        ext_fields={
            "nextBeginOffset": str(next_begin_offset),
            "minOffset": str(min_offset),
            "maxOffset": str(max_offset),
            "suggestWhichBrokerId": str(suggested_broker_id),
            "topicSysFlag": str(topic_sys_flag),
            # OrbitMQ's groups carry no sys flag (RocketMQ's default 0).
            "groupSysFlag": "0",
        },
        body=body,
        language=_LANGUAGE,
        version=ORBITMQ_VERSION,
        serialize_type=request.serialize_type,
    )
