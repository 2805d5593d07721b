"""BrokerApp: wires the store, the tables, the handlers and the background services together.

Lifecycle (uvicorn style): :meth:`BrokerApp.startup` opens the store on a thread (recovery may
take a while), loads the persisted tables from ``<storePathRootDir>/config``, creates the system
topics, binds the remoting server with every handler in one table keyed by request code
(:mod:`orbitmq.broker.handler_table`), then starts the services. :meth:`BrokerApp.shutdown` undoes it in reverse, one commented step each.

With ``aclEnable=true`` the accounts are loaded first (a bad file stops the start), every
handler sits behind the :class:`~orbitmq.security.AclService` check, and the service reloads
the files when they change. The guard wraps the finished handler table: a handler must be in
that table (not added later with ``RemotingServer.register``) to be checked. ``tls.server.mode`` decides whether the port speaks TLS.

Background work uses one shape, :class:`PeriodicService` (start/stop): persisting dirty tables,
scanning for expired clients; the long-polling, registration, delay-level (broker.schedule),
timer (broker.timer), transaction-check (broker.transaction) and replication
(broker.replication) services have the same start/stop pair.

A SLAVE copies its master: its store refuses puts, and the services that write messages
(delay levels, timed messages, transaction checks) do not run; their progress is copied from
the master instead (broker.replication.metadata).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from orbitmq.acl.accounts import Account
from orbitmq.acl.signature import Credentials
from orbitmq.broker import gc_policy, metrics_view
from orbitmq.broker.clients import ConsumerTable, ProducerTable
from orbitmq.broker.config import BrokerConfig, BrokerRole
from orbitmq.broker.handler_table import build_handler_table
from orbitmq.broker.handlers import BrokerState, now_ms
from orbitmq.broker.handlers.acl import AclHandlers
from orbitmq.broker.handlers.client_manage import ClientManageHandlers
from orbitmq.broker.locks import QueueLockTable
from orbitmq.broker.long_polling import LongPollingService
from orbitmq.broker.offsets import ConsumerOffsetTable
from orbitmq.broker.pop import PopService
from orbitmq.broker.pop.journal import SNAPSHOT_FILE
from orbitmq.broker.registration import NamesrvRegistration
from orbitmq.broker.replication import ReplicationService
from orbitmq.broker.replication.controlled import ReplicasManager
from orbitmq.broker.reput import ReputTargets
from orbitmq.broker.schedule import DELAY_OFFSET_FILE, ScheduleService
from orbitmq.broker.staging import StagingService
from orbitmq.broker.stats import BrokerStats
from orbitmq.broker.subscriptions import SubscriptionGroupTable
from orbitmq.broker.timer import TimerService
from orbitmq.broker.topics import TopicConfigTable
from orbitmq.broker.transaction import TransactionService
from orbitmq.broker.validation import is_system_topic
from orbitmq.broker.vip_channel import start_vip_server
from orbitmq.errors import ConfigError, ProtocolError
from orbitmq.metrics import MetricsExporter, MetricsExporterType, Recorder, rpc_timer, serve_metrics_in_steps
from orbitmq.metrics.steps import Steps, run_sliced
from orbitmq.model.route import PERM_READ_WRITE
from orbitmq.security import AclService, ha_exposure_warning, warn_if_exposed
from orbitmq.store.config import StoreConfig, delay_levels_ms
from orbitmq.store.message_store import MessageStore
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.server import RemotingServer

logger = logging.getLogger(__name__)

TOPICS_FILE = "topics.json"
CONSUMER_OFFSETS_FILE = "consumerOffset.json"
SUBSCRIPTION_GROUPS_FILE = "subscriptionGroup.json"
_RATE_SAMPLE_INTERVAL_MS = 5_000  # the per-minute TPS gauges are differences of these samples
STATS_SAMPLE_INTERVAL_MS = 1_000


class Service(Protocol):
    """The one shape of background work."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class PeriodicService:
    """Runs ``action`` every ``interval_ms`` until stopped; a failing round is logged, not fatal."""

    def __init__(self, name: str, interval_ms: int, action: Callable[[], Awaitable[None] | None]) -> None:
        self._name = name
        self._interval_s = interval_ms / 1000
        self._action = action
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                outcome = self._action()
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.exception("%s failed", self._name)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _read_optional(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


ACL_FILE = Path("conf") / "plain_acl.yml"
"""The accounts file's place under ``storePathRootDir`` when ``aclFile`` is not set."""


class BrokerApp:
    """One broker process: store + tables + remoting server + services.

    Args:
        broker_config: the broker's settings (``tls`` and ACL included).
        store_config: the store's settings.
        namesrv_credentials: what to sign name-server requests with; default
            ``innerClientAuthenticationCredentials`` (a standalone passes its in-memory key).
        inner_accounts: accounts this broker accepts that no file lists (a standalone's
            in-memory key, which its embedded gRPC proxy signs with).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        *,
        namesrv_credentials: Credentials | None = None,
        inner_accounts: Iterable[Account] = (),
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self._namesrv_credentials = namesrv_credentials or broker_config.inner_credentials
        self.acl: AclService | None = None
        if broker_config.acl_enable:
            acl_file = broker_config.acl_file or Path(store_config.store_path_root_dir) / ACL_FILE
            self.acl = AclService(Path(acl_file), "broker", inner_accounts=inner_accounts)
        self._config_dir = Path(store_config.store_path_root_dir) / "config"
        # Resolved once: without brokerIP1 this looks up the host's addresses.
        self._host = broker_config.advertised_host
        self._store = MessageStore(store_config)
        self._server: RemotingServer | None = None
        self._vip_server: RemotingServer | None = None
        self._services: list[Service] = []
        self._state: BrokerState | None = None
        self._registration: NamesrvRegistration | None = None
        self._topics_write_lock = asyncio.Lock()
        self._topics_writer: asyncio.Task[None] | None = None
        self._background_writes: set[asyncio.Task[None]] = set()
        self._writers: list[Service] = []  # controller mode: run while this broker is master
        self._writers_running = False
        self._writers_started = False
        self._metrics: MetricsExporter | None = None
        self._boot_timestamp_ms = now_ms()

    def _inner_client(self) -> RemotingClient:
        """A client for this broker's own requests (name servers, a slave's master): signed, TLS as set."""
        return RemotingClient(
            signer=self._namesrv_credentials.sign if self._namesrv_credentials else None,
            ssl_context=self.broker_config.tls.client_context(),
        )

    @property
    def port(self) -> int:
        """The bound listening port (meaningful after startup)."""
        return self._server.port if self._server is not None else self.broker_config.listen_port

    @property
    def address(self) -> str:
        """``ip:port`` clients use to reach this broker."""
        return f"{self._host}:{self.port}"

    @property
    def state(self) -> BrokerState:
        if self._state is None:
            raise RuntimeError("BrokerApp.state used before startup()")
        return self._state

    async def startup(self) -> None:
        config = self.broker_config
        # Accounts and certificates first: a broker that cannot enforce them must not start.
        if self.acl is not None:
            self.acl.load()
        ssl_context = config.tls.server_context()
        # Recovery after a crash re-scans the commit log: keep it off the event loop.
        await asyncio.to_thread(self._store.open)
        controlled = config.enable_controller_mode
        is_slave = config.broker_role is BrokerRole.SLAVE and not controlled
        if is_slave:
            # Only the master writes; a slave's log grows by replicated appends alone.
            self._store.refuse_puts(
                f"the broker[{config.broker_name}] is a slave (brokerId {config.broker_id}): "
                "messages are put to its master"
            )
        topics, offsets, groups = self._load_tables()
        topics.create_system_topics(
            config.broker_cluster_name,
            config.broker_name,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
        )
        if config.trace_topic_enable:
            topics.find_or_create(config.msg_trace_topic_name, 1, PERM_READ_WRITE)
        long_polling = LongPollingService(self._store.get_max_queue_offset)
        self._store.add_arrival_listener(long_polling.on_arrival)
        state = BrokerState(
            config=config,
            store_config=self.store_config,
            store=self._store,
            topics=topics,
            offsets=offsets,
            groups=groups,
            producers=ProducerTable(config.producer_groups_max),
            consumers=ConsumerTable(config.consumer_groups_max),
            locks=QueueLockTable(config.rebalance_lock_max_live_time_ms, config.queue_locks_max),
            long_polling=long_polling,
            store_host=(self._host, config.listen_port),
            on_topics_changed=self._on_topics_changed,
            stats=BrokerStats(config.broker_cluster_name, now_ms()),
            on_config_changed=self._on_config_changed,
        )
        if controlled:
            # Fenced until the controller names a role (ReplicasManager refuses puts meanwhile).
            state.config = dataclasses.replace(
                config, broker_role=BrokerRole.SLAVE, broker_id=max(config.broker_id, 1)
            )
        self._state = state
        await self._create_message_services(state, is_slave)
        client_manage = ClientManageHandlers(state)
        handlers = build_handler_table(state, client_manage)
        handlers.update(AclHandlers(state, self.acl, lambda: self.address).handler_table())
        if self.acl is not None:
            handlers = self.acl.guard(handlers)
        # Prometheus counts (metrics.Recorder) and request timing only with metricsExporterType=PROM;
        # the runtime figures of GET_BROKER_RUNTIME_INFO are broker.stats' own, always kept.
        if config.metrics_exporter_type is MetricsExporterType.PROM:
            state.recorder = Recorder(is_system_topic, state.stats.group_get_totals)
            # The zero sample: rates in the first minute span the time since start-up.
            state.recorder.sample(now_ms())
        connection_ids = itertools.count(1)

        def make_server(port: int) -> RemotingServer:
            return RemotingServer(
                config.bind_address,
                port,
                handlers,
                idle_timeout_s=config.channel_expired_timeout_ms / 1000,
                on_connection_closed=client_manage.on_connection_closed,
                max_frame_bytes=config.max_frame_bytes,
                limits=config.server_limits(),
                bad_request_log_interval_s=config.bad_request_log_interval_ms / 1000,
                tls_mode=config.tls.server_mode,
                ssl_context=ssl_context,
                on_handled=rpc_timer(state.recorder) if state.recorder is not None else None,
                connection_ids=connection_ids,
            )

        self._server = make_server(config.listen_port)
        await self._server.start()
        # Tens of thousands of topics make a heap that full collections would walk again and
        # again, holding the GIL for seconds each time: freeze it once one takes long.
        # The same policy shortens the switch interval: the store's and the executors' threads
        # run long pure-Python passes with that many topics, the loop gets the GIL back sooner.
        gc_policy.install()
        if config.vip_channel_enabled:
            self._vip_server = await start_vip_server(make_server, config.listen_port)
        # With listenPort=0 the bound port is known only now; records must carry the real one.
        state.store_host = (self._host, self._server.port)
        replication = state.replication
        assert replication is not None
        # The HA port first: registrations carry its address.
        await replication.start()
        self._registration = NamesrvRegistration(
            config,
            topics,
            self.address,
            replication.ha_address,
            replication.on_registered,
            client=self._inner_client(),
        )
        self._services = [
            long_polling,
            PeriodicService("persist-tables", config.flush_consumer_offset_interval_ms, self._persist_tables),
            PeriodicService("client-expiry-scan", config.client_scan_interval_ms, client_manage.scan_expired),
            PeriodicService("stats-sample", STATS_SAMPLE_INTERVAL_MS, lambda: state.stats.sample(now_ms())),
        ]
        if not controlled:
            self._services.append(self._registration)
        # A slave writes no message of its own: no deliveries, no transaction checks. Its POP
        # state follows the replicated journal (POP requests are refused on a slave).
        writers: list[Service] = [
            service for service in (state.schedule, state.timer, state.transactions) if service is not None
        ]
        if controlled:
            self._writers = writers  # started when the controller makes this broker master
            writers = []
        elif is_slave:
            writers = []
        self._services += [service for service in (*writers, state.pop) if service is not None]
        if self.acl is not None:
            self._services.append(self.acl)
        recorder = state.recorder
        if recorder is not None:

            async def rate_sample() -> None:
                # The per-topic sums run a slice at a time: with tens of thousands of topics they
                # would hold the loop for a good part of a second every few seconds (and on a
                # thread, the GIL they share would hold it nearly as long).
                captured = recorder.capture_sample()
                sample = await run_sliced(recorder.sample_steps(now_ms(), captured))
                recorder.add_sample(sample)

            self._services.append(
                PeriodicService("metrics-rate-sample", _RATE_SAMPLE_INTERVAL_MS, rate_sample)
            )
            self._start_metrics(state, recorder)
        for service in self._services:
            await service.start()
        if controlled:
            replicas = ReplicasManager(
                config, self._store, replication, self.address, write_atomically, self._on_role
            )
            state.replicas = replicas
            await replicas.start()
            self._services.append(replicas)
        # Stopped last (services stop in reverse): sends still waiting for a slave are answered first.
        self._services.insert(0, replication)
        # What is bound (bindAddress, 0.0.0.0 = every interface) and, apart, what is advertised.
        logger.info(
            "broker %s (%s, id %d) listening on %s, advertised as %s; HA port listening on %s, advertised as %s"
            " (store %s)",
            config.broker_name,
            config.broker_role.value,
            config.broker_id,
            ", ".join(self._server.bound_addresses),
            self.address,
            ", ".join(replication.bound_addresses),
            replication.ha_address,
            self._store.store_path,
        )
        warn_if_exposed(
            logger, f"broker {config.broker_name}", config.bind_address, self.port, self.acl is not None
        )
        if self.acl is not None and (
            ha_warning := ha_exposure_warning(config.bind_address, replication.master.port)
        ):
            logger.warning("%s", ha_warning)
        if is_slave:
            logger.info(
                "slave of %s: %s",
                config.broker_name,
                f"master HA address {config.ha_master_address} (haMasterAddress)"
                if config.ha_master_address
                else "master learned from the name servers",
            )

    @property
    def metrics_port(self) -> int | None:
        """The bound port of ``/metrics`` (None when metricsExporterType is DISABLE)."""
        return self._metrics.port if self._metrics is not None else None

    def _start_metrics(self, state: BrokerState, recorder: Recorder) -> None:
        config = self.broker_config
        address = self.address

        def steps() -> Steps[list[Any]]:
            return metrics_view.scrape_steps(state, recorder, self._boot_timestamp_ms, address)

        host = config.metrics_prom_exporter_host or self._host
        exporter = serve_metrics_in_steps(host, config.metrics_prom_exporter_port, steps)
        self._metrics = exporter
        logger.info("broker %s metrics at %s", config.broker_name, exporter.url)

    async def shutdown(self) -> None:
        if self._server is None:
            return
        # The metrics endpoint first: a scrape must not wait on a loop that is shutting down.
        if self._metrics is not None:
            await asyncio.to_thread(self._metrics.stop)
            self._metrics = None
        # Release parked pulls and pops first: they answer "nothing" now instead of holding the drain.
        if self._state is not None:
            await self._state.long_polling.stop()
            if self._state.pop is not None:
                self._state.pop.release_waiters()
        # Stop accepting; requests in flight get the grace period to finish.
        if self._vip_server is not None:
            await self._vip_server.stop(self.broker_config.shutdown_grace_ms / 1000)
            self._vip_server = None
        await self._server.stop(self.broker_config.shutdown_grace_ms / 1000)
        # Stop background work; the registration service unregisters from every name server.
        for service in reversed(self._services):
            try:
                await service.stop()
            except Exception:
                logger.exception("stopping %s failed", type(service).__name__)
        if self.broker_config.enable_controller_mode:
            await self._set_writers(False)
            if self._registration is not None:
                await self._registration.stop()
        # Persist offsets, topics and groups whether dirty or not.
        await self._persist_tables(force=True)
        # Close the store: flush, write the checkpoint, remove the abort marker.
        await asyncio.to_thread(self._store.close)
        self._server = None
        gc_policy.uninstall()
        logger.info("broker %s stopped", self.broker_config.broker_name)

    async def _on_role(self, role: BrokerRole, broker_id: int) -> None:
        """Controller mode: the controller made this broker master (id 0) or a slave."""
        state = self.state
        state.config = dataclasses.replace(self.broker_config, broker_role=role, broker_id=broker_id)
        if state.staging is not None:
            # The ledger of staged writes is the store's: a new master loads the one it copied
            # (in the background: the heartbeat to the controller must go on), a slave stops.
            if role is BrokerRole.SLAVE:
                state.staging.suspend()
            else:
                task = asyncio.get_running_loop().create_task(state.staging.promote())
                self._background_writes.add(task)
                task.add_done_callback(self._background_writes.discard)
        await self._set_writers(role is not BrokerRole.SLAVE)
        registration = self._registration
        if registration is None:
            return
        registration.set_config(state.config)
        replicas = state.replicas
        registration.master_epoch = (
            replicas.master_epoch if replicas is not None and role is not BrokerRole.SLAVE else None
        )
        if registration.started:
            await registration.register_all()
        else:
            await registration.start()

    async def _set_writers(self, running: bool) -> None:
        """Start or stop the services that write messages (delay levels, timers, transactions)."""
        if running == self._writers_running:
            return
        first_start = running and not self._writers_started
        self._writers_running = running
        self._writers_started = self._writers_started or running
        for service in self._writers if running else reversed(self._writers):
            try:
                if running and not first_start and isinstance(service, TimerService):
                    # Its stop closed the timer files: load them again (a thread: it may rebuild).
                    await asyncio.to_thread(service.open)
                await (service.start() if running else service.stop())
            except Exception:
                logger.exception(
                    "%s %s failed", "starting" if running else "stopping", type(service).__name__
                )

    async def _create_message_services(self, state: BrokerState, is_slave: bool) -> None:
        """Delay levels, timed messages, transactions, staged writes: load their progress, hook arrivals.

        Also the replication service, which a slave's metadata copy attaches to these tables.
        A slave gets no timer service: its timer progress is the master's, kept in a file. Nor
        staged writes: it stores no message of its own, and its copy of the staging ledger is
        the master's, which finishes interrupted commits. In controller mode every broker gets
        the staging service, serving only while master.
        """
        config = self.broker_config
        store = self._store
        replication = ReplicationService(config, store)
        state.replication = replication
        replication.attach(state, self._host, self._config_dir, write_atomically, self._inner_client())

        def store_host() -> tuple[str, int]:
            return state.store_host

        targets = ReputTargets(state.topics)
        schedule = ScheduleService(
            store,
            delay_levels_ms(self.store_config.message_delay_level),
            self._config_dir / DELAY_OFFSET_FILE,
            store_host,
            config.flush_delay_offset_interval_ms,
            write_atomically,
            now_ms,
            targets=targets,
        )
        schedule.load()
        store.add_arrival_listener(schedule.on_arrival)
        state.schedule = schedule
        if config.timer_wheel_enable and not is_slave:
            timer = TimerService(
                store,
                Path(self.store_config.store_path_root_dir) / "timer",
                config.timer_precision_ms,
                config.timer_max_delay_sec * 1000,
                config.timer_flush_interval_ms,
                store_host,
                now_ms,
                targets=targets,
            )
            # A crash start relinks the pending timers: keep it off the event loop.
            await asyncio.to_thread(timer.open)
            store.add_arrival_listener(timer.on_arrival)
            state.timer = timer
        transactions = TransactionService(
            store,
            state.producers,
            self._config_dir,
            (
                config.transaction_timeout_ms,
                config.transaction_check_max,
                config.transaction_check_interval_ms,
            ),
            store_host,
            write_atomically,
            now_ms,
            targets=targets,
        )
        await asyncio.to_thread(transactions.load)
        state.transactions = transactions
        pop = PopService(
            store,
            state.topics,
            state.groups,
            state.offsets,
            self._config_dir / SNAPSHOT_FILE,
            (
                config.auto_create_subscription_group,
                config.max_reconsume_times,
                config.pop_snapshot_interval_ms,
            ),
            store_host,
            write_atomically,
            now_ms,
        )
        # Replaying the journal reads the store: keep it off the event loop.
        await asyncio.to_thread(pop.load)
        pop.on_topics_changed(state.on_topics_changed)
        store.add_arrival_listener(pop.on_arrival)
        state.pop = pop
        if not is_slave:
            staging = StagingService(store, state.topics, config.broker_cluster_name, store_host, now_ms)
            if not config.enable_controller_mode:
                # Finishes commits a crash interrupted before the broker serves again.
                await asyncio.to_thread(staging.load)
                staging.serving = True
            # In controller mode the ledger is loaded when this broker becomes master (_on_role).
            state.staging = staging

    def _on_config_changed(self, new_config: BrokerConfig) -> None:
        """UPDATE_BROKER_CONFIG swapped in ``new_config``: update what holds the old one."""
        state = self.state
        old_config, state.config = state.config, new_config
        self.broker_config = new_config
        if self._registration is not None:
            self._registration.set_config(new_config)
        if new_config.trace_topic_enable and new_config.msg_trace_topic_name not in state.topics:
            state.topics.find_or_create(new_config.msg_trace_topic_name, 1, PERM_READ_WRITE)
            self._on_topics_changed()
        elif new_config.broker_permission != old_config.broker_permission:
            # Routes carry the broker's permission: publish the new one now.
            self._on_topics_changed()
        logger.info("broker %s config updated live", new_config.broker_name)

    def _on_topics_changed(self) -> None:
        if self._registration is not None:
            self._registration.request()
        # RocketMQ rewrites topics.json on every change: a topic created by an admin or
        # auto-created for a send must survive a crash, not wait for the periodic persist.
        # One writer at a time, which writes again while changes came in meanwhile: a burst of
        # 50,000 auto-created topics is a few writes, not 50,000 queued tasks.
        if self._topics_writer is not None and not self._topics_writer.done():
            return
        task = asyncio.get_running_loop().create_task(self._write_topics_while_dirty())
        self._topics_writer = task
        self._background_writes.add(task)
        task.add_done_callback(self._background_writes.discard)

    async def _write_topics_while_dirty(self) -> None:
        state = self._state
        while state is not None and state.topics.dirty:
            try:
                await self._persist_topics()
            except Exception:
                logger.exception("writing %s failed; the periodic persist tries again", TOPICS_FILE)
                return

    async def _persist_topics(self, force: bool = False) -> None:
        state = self._state
        if state is None:
            return
        topics = state.topics
        path = self._config_dir / TOPICS_FILE

        def write() -> None:
            # Encoded on the thread too: only the changed topics are encoded, but the join
            # and the copy of the table are still proportional to the table.
            try:
                write_atomically(path, topics.encode())
            except BaseException:
                topics.mark_dirty()
                raise

        # One writer at a time, each writing the newest table: an older snapshot never lands last.
        async with self._topics_write_lock:
            if force or topics.dirty:
                await asyncio.to_thread(write)

    def _load_tables(self) -> tuple[TopicConfigTable, ConsumerOffsetTable, SubscriptionGroupTable]:
        """Load the persisted tables; damaged entries are skipped (logged), a file that is not
        JSON at all stops the start with its name (the broker never writes one)."""
        limits = self.broker_config
        topics_path = self._config_dir / TOPICS_FILE
        raw_topics = _read_optional(topics_path)
        try:
            topics = (
                TopicConfigTable.decode(raw_topics, str(topics_path), limits.topics_max)
                if raw_topics is not None
                else TopicConfigTable(limits.topics_max)
            )
        except ProtocolError as exc:
            raise ConfigError(f"{topics_path}: {exc}") from exc
        offsets_path = self._config_dir / CONSUMER_OFFSETS_FILE
        raw_offsets = _read_optional(offsets_path)
        offsets = (
            ConsumerOffsetTable.decode(raw_offsets, str(offsets_path))
            if raw_offsets is not None
            else ConsumerOffsetTable()
        )
        groups_path = self._config_dir / SUBSCRIPTION_GROUPS_FILE
        raw_groups = _read_optional(groups_path)
        groups = (
            SubscriptionGroupTable.decode(raw_groups, str(groups_path), limits.consumer_groups_max)
            if raw_groups is not None
            else SubscriptionGroupTable(limits.consumer_groups_max)
        )
        return topics, offsets, groups

    async def _persist_tables(self, force: bool = False) -> None:
        state = self._state
        if state is None:
            return
        tables: list[tuple[Path, ConsumerOffsetTable | SubscriptionGroupTable]] = [
            (self._config_dir / CONSUMER_OFFSETS_FILE, state.offsets),
            (self._config_dir / SUBSCRIPTION_GROUPS_FILE, state.groups),
        ]
        due = [(path, table) for path, table in tables if force or table.dirty]

        def write() -> None:
            # Encoded on the thread too (each table copies itself under its own lock): tens of
            # thousands of offsets would hold the event loop every flush interval.
            for path, table in due:
                write_atomically(path, table.encode())

        if due:
            await asyncio.to_thread(write)
        await self._persist_topics(force=force)
