"""The credentials of a RocketMQ 5.x gRPC client: its ``authorization`` header and signature.

Every call of a 5.x SDK carries two metadata headers (grpc-v5-protocol §2.1)::

    x-mq-date-time: 20261125T054613Z
    authorization:  MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>

    Signature = hex(HmacSHA1(key = secretKey UTF-8, data = the x-mq-date-time value))

Python sends lower-case hex, Java and Node upper-case: the comparison ignores case. The Python
SDK sends the header even without credentials, with an empty ``Credential``: that is no access
key. The date is not checked against the clock, as in RocketMQ's ACL 1.0 proxy: Python and Java
write local time labelled ``Z``, so a window would refuse whole time zones. A captured header
is therefore replayable; TLS in front of the gRPC port is what keeps it from being captured.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

__all__ = [
    "AUTHORIZATION",
    "DATE_TIME",
    "GRPC_ALGORITHM",
    "GrpcCredentials",
    "grpc_authorization",
    "grpc_signature",
    "parse_grpc_authorization",
]

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
GRPC_ALGORITHM = "MQv2-HMAC-SHA1"


@dataclass(frozen=True, slots=True)
class GrpcCredentials:
    """What a call's headers claim: an access key (``""``: none), its signature, the signed date."""

    access_key: str
    signature: str
    date_time: str


def grpc_signature(secret_key: bytes, date_time: str) -> str:
    """Lower-case hex of HmacSHA1(secret_key, date_time)."""
    return hmac.digest(secret_key, date_time.encode("utf-8"), "sha1").hex()


def grpc_signatures_equal(expected_hex: str, given: str) -> bool:
    """Case-insensitive, constant-time comparison of two hex signatures."""
    return hmac.compare_digest(expected_hex.encode("ascii"), given.lower().encode("utf-8", "replace"))


def grpc_authorization(access_key: str, secret_key: str, date_time: str) -> str:
    """The ``authorization`` header a 5.x SDK sends (for tests and OrbitMQ's own callers)."""
    signature = grpc_signature(secret_key.encode("utf-8"), date_time)
    return f"{GRPC_ALGORITHM} Credential={access_key}, SignedHeaders={DATE_TIME}, Signature={signature}"


def parse_grpc_authorization(header: str | None, date_time: str | None) -> GrpcCredentials:
    """The claimed credentials; an absent or unreadable header is no access key.

    A header of another scheme, or one without ``Credential``, also yields ``access_key=""``,
    which the check answers with "No accessKey is configured".
    """
    if not header:
        return GrpcCredentials("", "", date_time or "")
    scheme, _, rest = header.strip().partition(" ")
    if scheme != GRPC_ALGORITHM:
        return GrpcCredentials("", "", date_time or "")
    parts: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            parts[key.strip()] = value.strip()
    return GrpcCredentials(parts.get("Credential", ""), parts.get("Signature", ""), date_time or "")
