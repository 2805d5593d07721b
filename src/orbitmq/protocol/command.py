"""The RemotingCommand value object and its encoding (sans-IO).

A command is one request or response. Its header travels as JSON (serialization
type 0) or in RocketMQ's binary layout (type 1); a server answers in the type the
request used, because the C++ and Node clients can read JSON only.

JSON header fields: ``code`` (number), ``language`` (enum name), ``version``
(number), ``opaque`` (number), ``flag`` (number), ``remark`` (string or null),
``extFields`` (object string -> string), ``serializeTypeCurrentRPC`` (informational).

Binary header layout (all big-endian)::

    offset  size  field
    0       2     code (short)
    2       1     language (byte code)
    3       2     version (short)
    5       4     opaque (int)
    9       4     flag (int)
    13      4     remark_len (int), 0 = none
    17      R     remark, UTF-8
    17+R    4     ext_len (int), bytes of the map that follows
    21+R    E     entries: key_len (short) key, value_len (int) value

Ext field values are read leniently (string, number, boolean or null, see
remoting-protocol §1.3) and always normalised to strings, and always written as
JSON strings, since the C++ client ignores a response field that is not a string.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

import orjson

from orbitmq.errors import LocalProtocolError, RemoteProtocolError
from orbitmq.protocol.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    ORBITMQ_VERSION,
    LanguageCode,
    SerializeType,
)
from orbitmq.protocol.names import shorten

_INT = struct.Struct(">i")
_BINARY_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remark_len
_SHORT = struct.Struct(">h")

_DECIMAL_INT = re.compile(r"[+-]?[0-9]{1,10}")
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1

_STR_TYPE_ONLY = frozenset((str,))

_LANGUAGE_BY_CODE = {member.value: member.name for member in LanguageCode}
_LANGUAGE_CODE_BY_NAME = {member.name: member.value for member in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One request or response of the remoting protocol."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: str = "PYTHON"
    version: int = ORBITMQ_VERSION
    serialize_type: SerializeType = SerializeType.JSON

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A new request; the transport assigns the opaque when it sends it."""
        return cls(
            code=int(code),
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=dict(ext_fields or {}),
            body=body,
        )

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """A response to this request: same opaque and serialization type, response flag set."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=dict(ext_fields or {}),
            body=body,
            language="JAVA",
            version=ORBITMQ_VERSION,
            serialize_type=self.serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    # -- encoding --------------------------------------------------------------------------

    def encode_header(self, body_len: int | None = None) -> bytes:
        """The frame up to the body: length, header word and header.

        Sending ``encode_header() + body`` as two writes lets a large body (a pull
        response sliced from the commit log) go out without being copied.
        """
        if body_len is None:
            body_len = len(self.body)
        if self.serialize_type == SerializeType.JSON:
            header = self._json_header()
        else:
            header = self._binary_header()
        header_len = len(header)
        if header_len > 0xFFFFFF:
            raise LocalProtocolError(f"header of {header_len} bytes does not fit 24 bits")
        header_word = (int(self.serialize_type) << 24) | header_len
        return struct.pack(">ii", 4 + header_len + body_len, header_word) + header

    def encode(self) -> bytes:
        """The whole frame, length prefix included."""
        return self.encode_header() + bytes(self.body)

    def _json_header(self) -> bytes:
        ext = self.ext_fields
        header: dict[str, Any] = {
            "code": self.code,
            # Handlers nearly always give strings already: then the map is written as it is.
            "extFields": ext
            if _STR_TYPE_ONLY.issuperset(map(type, ext.values()))
            else {key: _ext_str(value) for key, value in ext.items()},
            "flag": self.flag,
            "language": self.language,
            "opaque": self.opaque,
            "remark": self.remark,
            "serializeTypeCurrentRPC": "JSON",
            "version": self.version,
        }
        return orjson.dumps(header)

    def _binary_header(self) -> bytes:
        remark = (self.remark or "").encode()
        entries = bytearray()
        for key, value in self.ext_fields.items():
            key_bytes = key.encode()
            value_bytes = _ext_str(value).encode()
            entries += _SHORT.pack(len(key_bytes)) + key_bytes
            entries += _INT.pack(len(value_bytes)) + value_bytes
        language = _LANGUAGE_CODE_BY_NAME.get(self.language, LanguageCode.OTHER)
        try:
            fixed = _BINARY_FIXED.pack(self.code, language, self.version, self.opaque, self.flag, len(remark))
        except struct.error as exc:
            raise LocalProtocolError(f"header field out of range for the binary layout: {exc}") from exc
        return fixed + remark + _INT.pack(len(entries)) + bytes(entries)


def _ext_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise LocalProtocolError(f"ext field value {value!r} is not a string or integer")


def _lenient_str(key: str, value: object) -> str:
    """Normalise a received ext value (string, number, boolean) to its string form."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if value is None:
        return ""
    raise RemoteProtocolError(f"ext field {shorten(key)!r} has a value of type {type(value).__name__}")


def decode_command(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame (the bytes after the length field) into a command.

    Raises:
        RemoteProtocolError: the bytes are not a valid command.
    """
    view = memoryview(frame)
    if len(view) < 4:
        raise RemoteProtocolError(f"frame of {len(view)} bytes has no header word")
    (header_word,) = _INT.unpack_from(view, 0)
    serialize_code = (header_word >> 24) & 0xFF
    header_len = header_word & 0xFFFFFF
    if 4 + header_len > len(view):
        raise RemoteProtocolError(
            f"header length {header_len} exceeds the frame's {len(view) - 4} remaining bytes"
        )
    header = view[4 : 4 + header_len]
    body = bytes(view[4 + header_len :])
    if serialize_code == SerializeType.JSON:
        command = _decode_json_header(header)
    elif serialize_code == SerializeType.ROCKETMQ:
        command = _decode_binary_header(header)
    else:
        raise RemoteProtocolError(f"unknown serialization type {serialize_code}")
    command.body = body
    return command


def _int_field(header: dict[str, Any], name: str, default: int) -> int:
    """A 32-bit integer field of the JSON header (Java declares them ``int``).

    A value that is not one cannot be echoed back (an opaque) or answered in either layout, so
    the frame is refused as a whole and its connection closed.
    """
    value = header.get(name, default)
    if type(value) is int and _INT32_MIN <= value <= _INT32_MAX:
        return value
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and _DECIMAL_INT.fullmatch(value.strip()):
            value = int(value)
        else:
            raise RemoteProtocolError(f"header field {name!r} is not an integer: {shorten(repr(value))}")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise RemoteProtocolError(f"header field {name!r} is {shorten(str(value))}, not a 32-bit integer")
    return value


def _decode_json_header(header: memoryview) -> RemotingCommand:
    try:
        parsed = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise RemoteProtocolError(f"header is not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise RemoteProtocolError("JSON header is not an object")
    if "code" not in parsed:
        raise RemoteProtocolError("JSON header has no 'code'")
    raw_ext = parsed.get("extFields") or {}
    if not isinstance(raw_ext, dict):
        raise RemoteProtocolError("header field 'extFields' is not an object")
    remark = parsed.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemoteProtocolError("header field 'remark' is not a string")
    language = parsed.get("language", "OTHER")
    if isinstance(language, int) and not isinstance(language, bool):
        language = _LANGUAGE_BY_CODE.get(language, "OTHER")
    if not isinstance(language, str):
        raise RemoteProtocolError("header field 'language' is not a string")
    # Every client sends string values (the C++ client numbers too): then the parsed object
    # is the map as it is (a JSON object's keys are always strings).
    if raw_ext and _STR_TYPE_ONLY.issuperset(map(type, raw_ext.values())):
        ext_fields: dict[str, str] = raw_ext
    else:
        ext_fields = {str(key): _lenient_str(str(key), value) for key, value in raw_ext.items()}
    return RemotingCommand(
        code=_int_field(parsed, "code", 0),
        opaque=_int_field(parsed, "opaque", 0),
        flag=_int_field(parsed, "flag", 0),
        remark=remark,
        ext_fields=ext_fields,
        language=language,
        version=_int_field(parsed, "version", 0),
        serialize_type=SerializeType.JSON,
    )


def _decode_binary_header(header: memoryview) -> RemotingCommand:
    size = len(header)
    if size < _BINARY_FIXED.size + 4:
        raise RemoteProtocolError(f"binary header of {size} bytes is shorter than 21")
    code, language, version, opaque, flag, remark_len = _BINARY_FIXED.unpack_from(header, 0)
    position = _BINARY_FIXED.size
    if remark_len < 0 or position + remark_len + 4 > size:
        raise RemoteProtocolError(f"binary header remark length {remark_len} out of bounds")
    remark = _utf8(header[position : position + remark_len], "remark") if remark_len else None
    position += remark_len
    (ext_len,) = _INT.unpack_from(header, position)
    position += 4
    if ext_len < 0 or position + ext_len > size:
        raise RemoteProtocolError(f"binary header ext length {ext_len} out of bounds")
    end = position + ext_len
    ext_fields: dict[str, str] = {}
    while position < end:
        if position + 2 > end:
            raise RemoteProtocolError("binary ext entry truncated in its key length")
        (key_len,) = _SHORT.unpack_from(header, position)
        position += 2
        if key_len < 0 or position + key_len + 4 > end:
            raise RemoteProtocolError(f"binary ext key length {key_len} out of bounds")
        key = _utf8(header[position : position + key_len], "ext key")
        position += key_len
        (value_len,) = _INT.unpack_from(header, position)
        position += 4
        if value_len < 0 or position + value_len > end:
            raise RemoteProtocolError(f"binary ext value length {value_len} out of bounds")
        ext_fields[key] = _utf8(header[position : position + value_len], "ext value")
        position += value_len
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext_fields,
        language=_LANGUAGE_BY_CODE.get(language, "OTHER"),
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _utf8(data: memoryview, what: str) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"{what} is not valid UTF-8") from exc
