"""The message property string: ``key 0x01 value 0x02 key 0x01 value 0x02 ...`` (UTF-8).

Java writes no trailing separator; the C++ client writes one. Decoding is lenient:
empty items are skipped and each item splits at its first 0x01. Keys and values
must not contain either separator; encoding refuses them.
"""

from __future__ import annotations

from collections.abc import Mapping

from orbitmq.errors import LocalProtocolError, RemoteProtocolError

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_BYTES = 32767


def decimal_value(text: str, max_digits: int = 19) -> int | None:
    """A property value as a non-negative decimal: ASCII digits only, at most ``max_digits``.

    None for anything else. ``str.isdigit`` alone is not enough: it accepts superscripts that
    ``int`` refuses, and ``int`` refuses more than 4300 digits; a property comes from a client.
    """
    if 0 < len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def encode_properties(properties: Mapping[str, str]) -> str:
    """The property string for a mapping, without a trailing separator."""
    parts = []
    for key, value in properties.items():
        if (
            NAME_VALUE_SEPARATOR in key
            or PROPERTY_SEPARATOR in key
            or NAME_VALUE_SEPARATOR in value
            or PROPERTY_SEPARATOR in value
        ):
            raise LocalProtocolError(f"property {key!r} contains a separator character")
        parts.append(f"{key}{NAME_VALUE_SEPARATOR}{value}")
    return PROPERTY_SEPARATOR.join(parts)


def decode_properties(text: str) -> dict[str, str]:
    """The mapping of a property string (lenient: trailing and empty items are ignored)."""
    properties: dict[str, str] = {}
    if not text:
        return properties
    for item in text.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        key, separator, value = item.partition(NAME_VALUE_SEPARATOR)
        if not separator:
            # RocketMQ ignores an item without a name/value separator; so do we.
            continue
        properties[key] = value
    return properties


def decode_properties_canonical(text: str) -> tuple[dict[str, str], bool]:
    """:func:`decode_properties`, and whether ``text`` is canonical.

    Canonical: :func:`encode_properties` of the mapping gives back exactly ``text`` without
    one trailing separator (the C++ client's), so a caller holding the bytes can store them
    as they came instead of encoding the mapping again. Not canonical: an empty item, an
    item without or with a second name/value separator, a repeated key.
    """
    properties: dict[str, str] = {}
    if not text:
        return properties, True
    if text[-1] == PROPERTY_SEPARATOR:
        text = text[:-1]
        if not text:
            return properties, True
    items = text.split(PROPERTY_SEPARATOR)
    canonical = True
    for item in items:
        key, separator, value = item.partition(NAME_VALUE_SEPARATOR)
        if not separator:
            canonical = False
            continue
        if NAME_VALUE_SEPARATOR in value:
            canonical = False
        properties[key] = value
    return properties, canonical and len(properties) == len(items)


def decode_properties_bytes(data: bytes | memoryview) -> dict[str, str]:
    """Decode a property string from UTF-8 bytes, raising RemoteProtocolError on bad UTF-8."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError("message properties are not valid UTF-8") from exc
    return decode_properties(text)
