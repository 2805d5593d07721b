"""ProxyApp: the gRPC MessagingService's lifecycle (uvicorn style: startup, serve, shutdown).

:meth:`ProxyApp.startup` starts the broker gateway (routes, connections, heartbeats), binds the
grpc.aio server on ``grpcServerPort`` with the servicer, then starts two background loops:
auto-renewal of push consumers' deliveries and the expiry of idle clients. The same app runs
alone (``orbitmq proxy``, cluster mode) or beside a broker in one process (local mode).

With ``aclEnable=true`` the accounts files are loaded first (a bad file stops the start) and
watched like a broker's; every call is checked (``proxy.auth``), and the proxy signs its own
requests to name servers and brokers with ``innerClientAuthenticationCredentials`` (or the
credentials its process hands it: a standalone's in-memory key). Its ``tls.*`` settings (the
broker's in local mode, the proxy.conf's in cluster mode) are used both ways: outgoing
(``tls.enable``, ``tls.client.*``) to reach brokers whose ports enforce TLS, and on the gRPC
port (``proxy.tls``): TLS only when ``tls.server.mode=enforcing``, plaintext only with
``tlsTestModeEnable=false`` and no ``tls.server.mode``, else TLS and plaintext on one port, as
RocketMQ's proxy serves it: then the public port is a ``transport.splice.SplicingServer`` in
front of a TLS and a plaintext port of the grpc server, both on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from orbitmq.acl.signature import Credentials
from orbitmq.broker.config import parse_credentials_json
from orbitmq.broker.pop.renew import RenewTable
from orbitmq.errors import ConfigError, ListenError
from orbitmq.model.message import MessageExt
from orbitmq.protocol.headers import CheckTransactionStateRequestHeader
from orbitmq.proxy.auth import GrpcGuard
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.core import ProxyCore
from orbitmq.proxy.gateway import BrokerGateway
from orbitmq.proxy.service import MessagingService
from orbitmq.proxy.sessions import SessionTable
from orbitmq.proxy.tls import grpc_port_security
from orbitmq.proxy.wire import add_messaging_service, max_receive_bytes
from orbitmq.security import AclService
from orbitmq.security.exposure import grpc_exposure_warning
from orbitmq.transport.listen_probe import bind_failure_reason, cannot_bind
from orbitmq.transport.splice import SplicingServer
from orbitmq.transport.tls import TlsConfig, TlsMode

__all__ = ["ProxyApp"]

logger = logging.getLogger(__name__)

_EXPIRY_SCAN_S = 5.0


class ProxyApp:
    """One gRPC MessagingService."""

    def __init__(
        self, config: ProxyConfig, *, credentials: Credentials | None = None, tls: TlsConfig | None = None
    ) -> None:
        self.config = config
        self._tls = tls
        self._credentials = credentials or parse_credentials_json(
            config.inner_client_authentication_credentials, "innerClientAuthenticationCredentials"
        )
        self.acl: AclService | None = None
        if config.acl_enable:
            if not config.acl_file:
                raise ConfigError(
                    "aclEnable=true needs aclFile: the plain_acl.yml the proxy checks callers against"
                )
            self.acl = AclService(Path(config.acl_file), "proxy")
        self._server: grpc.aio.Server | None = None
        self._splice: SplicingServer | None = None
        self._port = config.grpc_server_port
        self._service: MessagingService | None = None
        self._core: ProxyCore | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def port(self) -> int:
        """The bound gRPC port (meaningful after startup)."""
        return self._port

    @property
    def service(self) -> MessagingService:
        """The servicer (after startup): also how to ask a client for its stacks or a verification."""
        if self._service is None:
            raise RuntimeError("ProxyApp.service used before startup()")
        return self._service

    async def startup(self) -> None:
        config = self.config
        service_holder: list[MessagingService] = []

        async def on_check(
            broker_addr: str, header: CheckTransactionStateRequestHeader, message: MessageExt
        ) -> None:
            await service_holder[0].producer.on_check(broker_addr, header, message)

        # Accounts first: a proxy that cannot check its callers must not start.
        if self.acl is not None:
            self.acl.load()
        # So is a TLS setting the gRPC port cannot use (it must not fall back to plaintext).
        security = grpc_port_security(self._tls, config.tls_test_mode_enable)
        credentials = security.credentials
        gateway = BrokerGateway(config, on_check, self._credentials, self._tls)
        core = ProxyCore(
            config=config,
            sessions=SessionTable(config.client_idle_time_ms),
            gateway=gateway,
            renewals=RenewTable(config.renew_ahead_time_ms, config.renew_max_time_ms),
        )
        service = MessagingService(core, GrpcGuard(self.acl))
        service_holder.append(service)
        await gateway.start()
        server = grpc.aio.server(
            options=[
                # Past this grpc refuses a request from its length prefix, before buffering it.
                ("grpc.max_receive_message_length", max_receive_bytes(config.max_message_size_bytes)),
                ("grpc.max_send_message_length", -1),
                ("grpc.so_reuseport", 0),
                # Ping idle connections: a client that vanished without closing its Telemetry
                # stream (a cut network) is then noticed, and its deliveries released.
                ("grpc.keepalive_time_ms", 60_000),
                ("grpc.keepalive_timeout_ms", 20_000),
            ]
        )
        add_messaging_service(service, server, service.bad_request_log)
        address = f"{config.grpc_bind_address}:{config.grpc_server_port}"
        # Checked first, so a port in use is refused in one line, without gRPC's own error log.
        taken = config.grpc_server_port and cannot_bind(config.grpc_bind_address, config.grpc_server_port)
        if taken:
            await gateway.close()
            raise ListenError("grpcServerPort", config.grpc_bind_address, config.grpc_server_port, taken)
        try:
            if security.mode is TlsMode.PERMISSIVE:
                assert credentials is not None
                tls_port = server.add_secure_port("127.0.0.1:0", credentials)
                plain_port = server.add_insecure_port("127.0.0.1:0")
                splice = SplicingServer(tls_port, plain_port)
                await splice.start(config.grpc_bind_address, config.grpc_server_port)
                self._splice, self._port = splice, splice.port
            elif credentials is None:
                self._port = server.add_insecure_port(address)
            else:
                self._port = server.add_secure_port(address, credentials)
        except (RuntimeError, OSError):  # grpcio >= 1.61 raises where older ones returned port 0
            self._port = 0
        if self._port == 0:
            if self._splice is not None:
                await self._splice.close()
                self._splice = None
            await gateway.close()
            raise ListenError(
                "grpcServerPort",
                config.grpc_bind_address,
                config.grpc_server_port,
                bind_failure_reason(config.grpc_bind_address, config.grpc_server_port),
            )
        await server.start()
        self._server, self._service, self._core = server, service, core
        self._tasks = [
            asyncio.create_task(
                self._every(config.renew_schedule_period_ms / 1000, service.consumer.renew_due)
            ),
            asyncio.create_task(self._every(_EXPIRY_SCAN_S, self._expire_clients)),
        ]
        logger.info(
            "gRPC proxy listening on %s:%d (%s; name servers %s)",
            config.grpc_bind_address,
            self._port,
            security.describe(),
            ";".join(config.namesrv_addr),
        )
        if self.acl is not None:
            await self.acl.start()
        elif warning := grpc_exposure_warning(config.grpc_bind_address, self._port):
            logger.warning("%s", warning)

    async def shutdown(self) -> None:
        if self._server is None:
            return
        # Stop accepting; calls in flight (long polls included) get the grace period.
        if self._splice is not None:
            self._splice.stop_accepting()
        await self._server.stop(grace=2.0)
        if self._splice is not None:
            await self._splice.close()
            self._splice = None
        # Stop the renew and expiry loops.
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.acl is not None:
            await self.acl.stop()
        # Leave every producer group and close the broker connections.
        if self._core is not None:
            await self._core.gateway.close()
        self._server = None
        logger.info("gRPC proxy on port %d stopped", self._port)

    async def _every(self, interval_s: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception:
                logger.exception("proxy background job failed")

    async def _expire_clients(self) -> None:
        core, service = self._core, self._service
        if core is None or service is None:
            return
        for client_id in core.sessions.expired(core.clock_ms()):
            logger.info("client %s idle for %d ms: gone", client_id, core.config.client_idle_time_ms)
            await service.client_gone(client_id)
