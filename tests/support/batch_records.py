"""Batch-send bodies laid out by hand, for tests of the decoders that split them."""

from __future__ import annotations

import struct


def batch_record(flag: int, body: bytes, properties: bytes) -> bytes:
    """One inner record of a batch body, as remoting-protocol §3.4 describes it."""
    total = 20 + len(body) + 2 + len(properties)
    return (
        struct.pack(">iiiii", total, 0, 0, flag, len(body))
        + body
        + struct.pack(">h", len(properties))
        + properties
    )
