"""The AK/SK request signature of RocketMQ's ACL (the 5.x rule), for signers and checkers.

Content, from a request's ext fields and body::

    every ext field except Signature (and except _UNIQUE_KEY_QUERY when the request's
    version is <= 399, V4_9_3), sorted by key, values only, concatenated, UTF-8
    + the raw body bytes

    Signature = Base64(HmacSHA1(key = secretKey UTF-8, data = content))

The signer sets ``AccessKey`` first, so the key is part of what it signs. This is what the Java
client (4.9.4+), the C++ client (``set_session_credentials``; it adds ``OnsChannel``, which is
just one more field) and ali-ons send; ``tests/fixtures/acl`` holds requests recorded from the
real C++ client. Values are the decoded strings: a JSON number arrives as its decimal text and
a JSON boolean as ``true``/``false``, as Java's fastjson renders them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

from orbitmq.protocol.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "Credentials",
    "SIGNATURE",
    "compute_signature",
    "sign_request",
    "signature_content",
    "signatures_equal",
]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_V4_9_3 = 399  # MQVersion.Version.V4_9_3.ordinal()


def signature_content(ext: Mapping[str, str], body: bytes, version: int) -> bytes:
    """The bytes a signature covers (see the module docstring)."""
    skip_unique_key = version <= _V4_9_3
    values = [
        value
        for key, value in sorted(ext.items())
        if key != SIGNATURE and not (skip_unique_key and key == UNIQUE_KEY_QUERY)
    ]
    text = "".join(values).encode("utf-8")
    return text + body if body else text


def compute_signature(content: bytes, secret_key: str) -> str:
    """Base64 of HmacSHA1(secret_key, content)."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signatures_equal(expected: str, given: str | None) -> bool:
    """Compare in constant time, so the answer's timing does not leak the right signature."""
    return given is not None and hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


def sign_request(
    ext: MutableMapping[str, str], body: bytes, version: int, access_key: str, secret_key: str
) -> None:
    """Add ``AccessKey`` and ``Signature`` to a request's ext fields, in place."""
    ext[ACCESS_KEY] = access_key
    ext[SIGNATURE] = compute_signature(signature_content(ext, body, version), secret_key)


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret; :meth:`sign` is a transport request signer."""

    access_key: str
    secret_key: str = field(repr=False)

    def sign(self, request: RemotingCommand) -> None:
        """Sign ``request`` in place (its ext fields and body must be final)."""
        sign_request(request.ext_fields, request.body, request.version, self.access_key, self.secret_key)
