"""The NameServer process wiring: route table + handlers + remoting server + expiry scan.

Several name servers run side by side without talking to each other; every broker registers
with each of them, and clients may ask any of them.

With ``aclEnable=true`` the handler table sits behind an :class:`AclService` that demands an
admin signature for registration and the other broker-only writes (OrbitMQ's extension), so
nobody can register a broker under a name that is not theirs and take its routes.

With ``enableControllerInNamesrv=true`` a controller (``orbitmq.controller``) runs inside: its
handlers join the name server's table (outside the ACL guard: brokers do not sign controller
requests) and its Raft node and election scan start and stop with the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client.core import Metric

from orbitmq.acl.accounts import Account
from orbitmq.controller import ControllerApp, ControllerConfig
from orbitmq.metrics import (
    MetricsExporter,
    MetricsExporterType,
    NamesrvView,
    Recorder,
    namesrv_families,
    request_code_names,
    rpc_timer,
    serve_metrics,
)
from orbitmq.namesrv.admin_handlers import NamesrvAdminHandlers
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.handlers import NamesrvHandlers, monotonic_ms
from orbitmq.namesrv.kv_config import KVConfigTable
from orbitmq.namesrv.route_table import RouteTable
from orbitmq.security import AclService, warn_if_exposed
from orbitmq.transport.log_limit import LogLimiter
from orbitmq.transport.server import RemotingServer, ServerConnection

__all__ = ["NamesrvApp"]

logger = logging.getLogger(__name__)
_log_limit = LogLimiter(logger)

SHUTDOWN_GRACE_S = 3.0
_CODE_NAMES = request_code_names()


class NamesrvApp:
    """One name server: ``await startup()``, serve, ``await shutdown()``.

    Args:
        config: the settings; ``listen_port`` 0 picks a free port (see :attr:`port`).
        clock_ms: liveness clock in milliseconds (tests inject a fake one).
        inner_accounts: admin accounts known only in memory (a standalone broker's key).
    """

    def __init__(
        self,
        config: NamesrvConfig,
        *,
        clock_ms: Callable[[], int] = monotonic_ms,
        inner_accounts: Iterable[Account] = (),
        controller: ControllerConfig | None = None,
    ) -> None:
        self.config = config
        self.route_table = RouteTable(
            delete_topic_with_broker_registration=config.delete_topic_with_broker_registration
        )
        self._clock_ms = clock_ms
        self.kv_config = self._load_kv_config()
        self._handlers = NamesrvHandlers(
            self.route_table,
            clock_ms,
            self.kv_config,
            self._persist_kv_config,
            topics_per_broker_max=config.topics_per_broker_max,
            brokers_max=config.brokers_max,
        )
        self._admin_handlers = NamesrvAdminHandlers(self.route_table, lambda: self.config, self._apply_config)
        self.acl: AclService | None = None
        if config.acl_enable and config.acl_file:
            self.acl = AclService(Path(config.acl_file), "namesrv", inner_accounts=inner_accounts)
        self.controller = ControllerApp(controller) if controller is not None else None
        self._server: RemotingServer | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._recorder: Recorder | None = None
        self._metrics: MetricsExporter | None = None

    def _apply_config(self, config: NamesrvConfig) -> None:
        """UPDATE_NAMESRV_CONFIG's live keys: the scan reads ``self.config`` each round, the
        registration limits live on the handlers."""
        self.config = config
        self._handlers.topics_per_broker_max = config.topics_per_broker_max
        self._handlers.brokers_max = config.brokers_max

    def _load_kv_config(self) -> KVConfigTable:
        path = self.config.kv_config_path
        if not path:
            return KVConfigTable()
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            return KVConfigTable()
        return KVConfigTable.decode(data, path)

    def _persist_kv_config(self) -> None:
        """Rewrite kvConfig.json (atomically) after a KV change; a no-op without kvConfigPath."""
        path = self.config.kv_config_path
        if not path:
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_bytes(self.kv_config.encode())
        os.replace(temporary, target)

    @property
    def port(self) -> int:
        """The bound port (after :meth:`startup`)."""
        return self._server.port if self._server is not None else self.config.listen_port

    @property
    def address(self) -> str:
        """``host:port`` a local client can connect to."""
        host = self.config.bind_address
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    async def startup(self) -> None:
        """Load the accounts (with ACL), bind the port, start the inactive-broker scan.

        Raises:
            ConfigError: an accounts file or a TLS certificate cannot be used.
        """
        config = self.config
        handlers = self._handlers.table() | self._admin_handlers.table()
        if self.acl is not None:
            self.acl.load()
            handlers = self.acl.guard(handlers)
        if config.metrics_exporter_type is MetricsExporterType.PROM:
            self._recorder = Recorder()
        if self.controller is not None:
            handlers = {**handlers, **self.controller.handler_table()}
        self._server = RemotingServer(
            config.bind_address,
            config.listen_port,
            handlers,
            max_frame_bytes=config.max_frame_bytes,
            idle_timeout_s=float(config.server_channel_max_idle_s),
            on_connection_closed=self._on_connection_closed,
            limits=config.server_limits(),
            bad_request_log_interval_s=config.bad_request_log_interval_ms / 1000,
            tls_mode=config.tls.server_mode,
            ssl_context=config.tls.server_context(),
            on_handled=rpc_timer(self._recorder) if self._recorder is not None else None,
        )
        await self._server.start()
        if self.acl is not None:
            await self.acl.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_inactive_brokers())
        if self.controller is not None:
            await self.controller.start_scan()
        logger.info(
            "name server listening on %s%s",
            ", ".join(self._server.bound_addresses),
            " with an embedded controller" if self.controller is not None else "",
        )
        warn_if_exposed(logger, "name server", config.bind_address, self.port, self.acl is not None)
        if self._recorder is not None:
            self._start_metrics(self._recorder)

    @property
    def metrics_port(self) -> int | None:
        """The bound port of ``/metrics`` (None when metricsExporterType is DISABLE)."""
        return self._metrics.port if self._metrics is not None else None

    def _start_metrics(self, recorder: Recorder) -> None:
        config = self.config
        table = self.route_table

        def build() -> list[Metric]:
            view = NamesrvView(
                node_id=self.address,
                cluster_count=len(table.cluster_addr_table),
                broker_count=len(table.broker_addr_table),
                topic_count=len(table.topic_queue_table),
            )
            return list(namesrv_families(recorder.snapshot(int(time.time() * 1000)), view, _CODE_NAMES))

        host = config.metrics_prom_exporter_host or config.bind_address
        exporter = serve_metrics(host, config.metrics_prom_exporter_port, build, list)
        self._metrics = exporter
        logger.info("name server metrics at %s", exporter.url)

    async def shutdown(self) -> None:
        """Stop the scan, then the server (in-flight requests get a short grace period)."""
        # Stop the scan first: there is nothing to expire once nobody can ask for routes.
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        if self._metrics is not None:
            await asyncio.to_thread(self._metrics.stop)
            self._metrics = None
        if self.acl is not None:
            await self.acl.stop()
        # Then stop accepting and let requests in flight finish.
        if self._server is not None:
            await self._server.stop(SHUTDOWN_GRACE_S)
        # The embedded controller's election scan and Raft node last.
        if self.controller is not None:
            await self.controller.stop_scan()
        logger.info("name server on port %d stopped", self.port)

    def scan_once(self) -> list[str]:
        """Remove brokers silent for longer than ``broker_channel_expired_ms``; their addresses."""
        expired = self.route_table.scan_inactive(self._clock_ms(), self.config.broker_channel_expired_ms)
        for addr in expired:
            _log_limit.warning(
                "broker-expired",
                "broker %s silent for over %d ms: removed",
                addr,
                self.config.broker_channel_expired_ms,
            )
        return expired

    async def _scan_inactive_brokers(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval_ms / 1000)
            try:
                self.scan_once()
            except Exception:
                logger.exception("inactive broker scan failed")

    def _on_connection_closed(self, connection: ServerConnection) -> None:
        for addr in self.route_table.on_connection_closed(connection.id):
            _log_limit.log(
                logging.INFO,
                "broker-removed",
                "broker %s removed: its connection from %s closed",
                addr,
                connection.peer_address,
            )
