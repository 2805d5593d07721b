"""The NameServer process wiring: route table + handlers + remoting server + expiry scan.

Several name servers run side by side without talking to each other; every broker registers
with each of them, and clients may ask any of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.handlers import NamesrvHandlers, monotonic_ms
from orbitmq.namesrv.route_table import RouteTable
from orbitmq.transport.server import RemotingServer, ServerConnection

__all__ = ["NamesrvApp"]

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 3.0


class NamesrvApp:
    """One name server: ``await startup()``, serve, ``await shutdown()``.

    Args:
        config: the settings; ``listen_port`` 0 picks a free port (see :attr:`port`).
        clock_ms: liveness clock in milliseconds (tests inject a fake one).
    """

    def __init__(self, config: NamesrvConfig, *, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.config = config
        self.route_table = RouteTable()
        self._clock_ms = clock_ms
        self._handlers = NamesrvHandlers(self.route_table, clock_ms)
        self._server = RemotingServer(
            config.bind_address,
            config.listen_port,
            self._handlers.table(),
            max_frame_bytes=config.max_frame_bytes,
            idle_timeout_s=float(config.server_channel_max_idle_s),
            on_connection_closed=self._on_connection_closed,
        )
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`startup`)."""
        return self._server.port

    @property
    def address(self) -> str:
        """``host:port`` a local client can connect to."""
        host = self.config.bind_address
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    async def startup(self) -> None:
        """Bind the port and start the inactive-broker scan."""
        await self._server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_inactive_brokers())
        logger.info("name server listening on %s", ", ".join(self._server.bound_addresses))

    async def shutdown(self) -> None:
        """Stop the scan, then the server (in-flight requests get a short grace period)."""
        # Stop the scan first: there is nothing to expire once nobody can ask for routes.
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        # Then stop accepting and let requests in flight finish.
        await self._server.stop(SHUTDOWN_GRACE_S)
        logger.info("name server on port %d stopped", self.port)

    def scan_once(self) -> list[str]:
        """Remove brokers silent for longer than ``broker_channel_expired_ms``; their addresses."""
        expired = self.route_table.scan_inactive(self._clock_ms(), self.config.broker_channel_expired_ms)
        for addr in expired:
            logger.warning(
                "broker %s silent for over %d ms: removed", addr, self.config.broker_channel_expired_ms
            )
        return expired

    async def _scan_inactive_brokers(self) -> None:
        interval_s = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.scan_once()
            except Exception:
                logger.exception("inactive broker scan failed")

    def _on_connection_closed(self, connection: ServerConnection) -> None:
        for addr in self.route_table.on_connection_closed(connection.id):
            logger.info("broker %s removed: its connection from %s closed", addr, connection.peer_address)
