"""One broker's replication, by role: what the rest of the broker sees of ``broker.replication``.

=============  ==========================================================================
role           runs
=============  ==========================================================================
ASYNC_MASTER   the HA port (``master.py``): slaves stream from it; sends never wait
SYNC_MASTER    the same, and a send is answered only once a slave acknowledged its bytes
SLAVE          the HA port too (a slave of a slave may stream from it), the HA client
               (``slave.py``) and the metadata copy (``metadata.py``); its store refuses puts
=============  ==========================================================================

The registration service hands every name server answer to :meth:`on_registered`: a slave
learns its master's HA address and remoting address there (unless ``haMasterAddress`` is set).

In controller mode (``controlled.py``) the role changes at run time: :meth:`follow` starts the
HA client and the metadata copy toward the master the controller named, :meth:`lead` stops
them; the HA port serves throughout. The name servers' answers are then ignored: the
controller, not the route, says who the master is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from orbitmq.broker.config import BrokerConfig, BrokerRole
from orbitmq.broker.replication.master import ReplicationMaster
from orbitmq.broker.replication.metadata import MetadataSync
from orbitmq.broker.replication.slave import ReplicationSlave
from orbitmq.store.message_store import MessageStore, PutStatus

if TYPE_CHECKING:
    from collections.abc import Callable

    from orbitmq.broker.handlers import BrokerState
    from orbitmq.transport.connection import RemotingClient


class ReplicationService:
    """The HA port, and for a slave the HA client and the metadata copy."""

    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.role = config.broker_role
        self.master = ReplicationMaster(config, store)
        store.add_arrival_listener(self.master.on_arrival)
        self._store = store
        self.slave: ReplicationSlave | None = None
        self.metadata: MetadataSync | None = None
        self.controlled = config.enable_controller_mode
        if self.role is BrokerRole.SLAVE and not self.controlled:
            self.slave = ReplicationSlave(config, store)
        self._host = ""

    @property
    def is_slave(self) -> bool:
        return self.role is BrokerRole.SLAVE

    @property
    def ha_address(self) -> str:
        """``brokerIP2:haPort``: where this broker's slaves connect (after start)."""
        host = self.config.broker_ip2 or self._host
        return f"{host}:{self.master.port}"

    @property
    def bound_addresses(self) -> list[str]:
        """The HA port's sockets as really bound (after start)."""
        return self.master.bound_addresses

    def attach(
        self,
        state: BrokerState,
        host: str,
        config_dir: Path,
        write_file: Callable[[Path, bytes], None],
        client: RemotingClient | None = None,
    ) -> None:
        """Give the service the broker's tables (a slave copies them) and its advertised host.

        ``client`` is what a slave asks its master with: the broker's inner client, which signs
        (the master may have ACL on) and speaks TLS as the broker's settings say.
        """
        self._host = host
        if self.is_slave or self.controlled:
            self.metadata = MetadataSync(state, config_dir, write_file, client)
            state.store.add_arrival_listener(self.metadata.on_arrival)

    async def start(self) -> None:
        await self.master.start()
        if self.controlled:
            # The controller decides the rest (follow / lead); the metadata copy runs paused
            # (no master address) until this broker follows a master.
            if self.metadata is not None:
                await self.metadata.start()
            return
        if self.slave is not None:
            await self.slave.start()
        if self.metadata is not None:
            await self.metadata.start()

    async def follow(self, broker_id: int, master_ha_address: str, master_addr: str) -> None:
        """Controller mode: become a slave of the given master (after :meth:`lead` or another follow)."""
        await self.unfollow()
        self.role = BrokerRole.SLAVE
        self.slave = ReplicationSlave(self.config, self._store, broker_id)
        self.slave.set_master_address(master_ha_address)
        await self.slave.start()
        if self.metadata is not None:
            self.metadata.set_master_addr(master_addr)

    async def unfollow(self) -> None:
        """Controller mode: stop copying from any master."""
        if self.metadata is not None:
            self.metadata.set_master_addr(None)
        if self.slave is not None:
            await self.slave.stop()
            self.slave = None

    async def lead(self, role: BrokerRole) -> None:
        """Controller mode: become the master (the HA port already serves)."""
        await self.unfollow()
        self.role = role

    async def stop(self) -> None:
        if self.controlled:
            await self.unfollow()
            if self.metadata is not None:
                await self.metadata.stop()
            await self.master.stop()
            return
        if self.metadata is not None:
            await self.metadata.stop()
        if self.slave is not None:
            await self.slave.stop()
        await self.master.stop()

    def on_registered(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """A name server's answer to REGISTER_BROKER (both None: no live master known there)."""
        if self.controlled:
            return
        if self.slave is not None:
            # A live link is kept; a dead master's address stays for the reconnects.
            self.slave.set_master_address(ha_server_addr)
        if self.metadata is not None:
            # No live master: the copy pauses, as in RocketMQ.
            self.metadata.set_master_addr(master_addr)

    async def wait_replicated(self, end_offset: int) -> PutStatus:
        """SYNC_MASTER: PUT_OK once a slave holds every byte below ``end_offset`` (else 11 or 12)."""
        return await self.master.wait_replicated(end_offset)

    def runtime_info(self) -> dict[str, Any]:
        """RocketMQ's HARuntimeInfo (GET_BROKER_HA_STATUS), with OrbitMQ's extra fields."""
        info = self.master.runtime_info()
        info["master"] = not self.is_slave
        info["brokerRole"] = self.role.value
        info["controllerMode"] = self.controlled
        info["haServerAddr"] = self.ha_address
        if self.slave is not None:
            info["haClientRuntimeInfo"] = self.slave.runtime_info()
        return info
