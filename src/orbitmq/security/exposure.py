"""The start-up warnings for a port that anyone on the network can use.

A server listening beyond loopback without ACL serves every request from every address:
reads, writes, topic deletion, offset resets. It says so once, at start, naming itself and
the address, so the operator sees it before anyone else does.

A broker's HA port stays open whatever ACL says, and says so too: RocketMQ's HA link carries
no credentials, so whoever connects and reports an offset receives the commit log from there.
Only the network protects it; ``docs/security.md`` says how. The gRPC proxy's port warns like
a remoting port when it listens beyond loopback without ACL.
"""

from __future__ import annotations

import ipaddress
import logging
import socket

__all__ = [
    "exposure_warning",
    "grpc_exposure_warning",
    "ha_exposure_warning",
    "is_loopback_bind",
    "warn_if_exposed",
]


def is_loopback_bind(host: str) -> bool:
    """Whether a listening socket bound to ``host`` is reachable from this machine only."""
    text = host.strip().strip("[]")
    if text in ("", "0.0.0.0", "::"):
        return False
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(text, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]).is_loopback for info in infos
    )


def exposure_warning(server: str, host: str, port: int, acl_enabled: bool) -> str | None:
    """The warning text for ``server`` bound to ``host:port``, or None when there is no risk."""
    if acl_enabled or is_loopback_bind(host):
        return None
    return (
        f"{server} listens on {host or '0.0.0.0'}:{port} without ACL: anyone who can reach this "
        "address can read, write and administer it (delete topics, reset offsets, register "
        "brokers). Set aclEnable=true with accounts in plain_acl.yml, or bind to 127.0.0.1."
    )


def warn_if_exposed(logger: logging.Logger, server: str, host: str, port: int, acl_enabled: bool) -> bool:
    """Log :func:`exposure_warning` once (the caller calls this once, at start); True if logged."""
    text = exposure_warning(server, host, port, acl_enabled)
    if text is None:
        return False
    logger.warning("%s", text)
    return True


def ha_exposure_warning(host: str, port: int) -> str | None:
    """The warning for a master's HA port bound beyond loopback, or None."""
    if is_loopback_bind(host):
        return None
    return (
        f"HA port {host or '0.0.0.0'}:{port} hands this broker's commit log to whoever connects: "
        "ACL and TLS do not cover the HA link (it carries no credentials, as in RocketMQ). "
        "Let only the slaves' addresses reach it (a firewall rule)."
    )


def grpc_exposure_warning(host: str, port: int) -> str | None:
    """The warning for the gRPC proxy's port bound beyond loopback without ACL, or None."""
    if is_loopback_bind(host):
        return None
    return (
        f"gRPC proxy listens on {host or '0.0.0.0'}:{port} without ACL: anyone who can reach it "
        "can send and receive with the rights the brokers grant this proxy. Set aclEnable=true "
        "with accounts in plain_acl.yml, or bind to 127.0.0.1 (grpcBindAddress)."
    )
