"""Why a port cannot be listened on, for servers whose library says only that it failed.

gRPC's ``add_insecure_port`` answers 0 (or raises) without the system's reason; binding a
plain socket to the same address once tells it ("address already in use", "cannot assign
requested address"), so the refusal can name it.
"""

from __future__ import annotations

import os
import socket

__all__ = ["bind_failure_reason", "cannot_bind"]


def bind_failure_reason(host: str, port: int) -> str:
    """The system's reason why ``host:port`` cannot be bound now, in its own short words."""
    return cannot_bind(host, port) or "the port could not be bound (it is free again now)"


def cannot_bind(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound now, or None when it can (checked by binding it once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(1)
    except OSError as exc:
        return os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return None
