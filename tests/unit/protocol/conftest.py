"""Shared helpers for the protocol tests: golden hex fixtures under ``tests/fixtures``.

A fixture file holds lowercase hex wrapped at 64 characters per line. Tests compare
freshly encoded bytes with it; ``to_fixture_text`` is the one formatter used to write them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES_DIR = Path(__file__).resolve().parents[2] / "fixtures"
HEX_LINE_CHARS = 64


def to_fixture_text(data: bytes) -> str:
    """Lowercase hex of ``data``, 64 characters per line, ending with a newline."""
    text = data.hex()
    lines = [text[index : index + HEX_LINE_CHARS] for index in range(0, len(text), HEX_LINE_CHARS)]
    return "\n".join(lines) + "\n"


def load_hex(name: str) -> bytes:
    """The bytes stored in ``tests/fixtures/<name>`` (whitespace between hex digits ignored)."""
    return bytes.fromhex("".join((FIXTURES_DIR / name).read_text().split()))


@pytest.fixture
def golden_hex() -> Callable[[str], bytes]:
    """Loader for golden fixtures: ``golden_hex("send_message_request.hex") -> bytes``."""
    return load_hex
