"""The resource limits of a remoting server (each a config key of both servers, see docs/limits.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WRITE_BUFFER_HIGH_BYTES", "ServerLimits"]

WRITE_BUFFER_HIGH_BYTES = 4 * 1024 * 1024
"""Above this many unsent bytes a connection stops reading requests until it drains."""


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Per-server resource limits (see the module docstring and docs/limits.md)."""

    # Open connections; one more is closed at once.
    max_connections: int = 10_000
    # Unsent response bytes above which a connection stops reading requests.
    write_buffer_high_bytes: int = WRITE_BUFFER_HIGH_BYTES
    # Unsent response bytes above which a connection is aborted.
    write_buffer_max_bytes: int = 64 * 1024 * 1024
    # Time from a frame's first byte until its header must have arrived.
    header_read_timeout_ms: int = 10_000
    # Time from a frame's first byte until all of it must have arrived.
    frame_read_timeout_ms: int = 60_000
