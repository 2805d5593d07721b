"""The VIP channel: RocketMQ's broker serves every request on ``listenPort - 2`` as well.

A Java slave fetches its master's topic table (GET_ALL_TOPIC_CONFIG) and timer checkpoint on
that port (RocketMQ's ``BrokerOuterAPI`` dials ``MixAll.brokerVIPChannel(true, addr)``), and a
Java client with ``vipChannelEnabled`` sends there; without it a Java slave of an OrbitMQ master
never learns a topic and answers every pull TOPIC_NOT_EXIST. It is the same server as the main
port's (same handlers, connection ids from one counter). It is served with
``vipChannelEnabled=true`` (OrbitMQ's key, off by default: ``orbitmq cluster`` and the test
harness put brokers two ports apart, where one broker's VIP port is another's listenPort). A
port that cannot be bound costs only this channel: one warning, and the broker serves on
``listenPort`` as before. With ``listenPort=0`` (a port picked by the system) there is none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from orbitmq.transport.server import RemotingServer

__all__ = ["VIP_PORT_OFFSET", "start_vip_server", "vip_port"]

logger = logging.getLogger(__name__)

VIP_PORT_OFFSET = 2


def vip_port(listen_port: int) -> int | None:
    """RocketMQ's VIP port for ``listen_port`` (None when there is none)."""
    return listen_port - VIP_PORT_OFFSET if listen_port > VIP_PORT_OFFSET else None


async def start_vip_server(
    make_server: Callable[[int], RemotingServer], listen_port: int
) -> RemotingServer | None:
    """The VIP server, started, or None when its port is not bound (logged once)."""
    port = vip_port(listen_port)
    if port is None:
        return None
    server = make_server(port)
    try:
        await server.start()
    except OSError as exc:
        logger.warning(
            "VIP channel not served: port %d (listenPort - %d, where RocketMQ's slaves fetch their "
            "master's topics) cannot be bound: %s",
            port,
            VIP_PORT_OFFSET,
            exc.strerror or exc,
        )
        return None
    return server
