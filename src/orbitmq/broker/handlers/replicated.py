"""When a stored write may be acknowledged on a replicated master (shared by the write handlers).

A SYNC_MASTER acknowledges only what a slave holds: :func:`replicated_status` waits until a
slave acknowledged every byte below the write's end (``broker.replication``; FLUSH_SLAVE_TIMEOUT
after ``slaveTimeout``, SLAVE_NOT_AVAILABLE at once without a usable slave), and in controller
mode a master deposed while it waited answers FLUSH_SLAVE_TIMEOUT: the write is stored here
but never acknowledged, as RocketMQ's order has it (a slave's status overrides PUT_OK, not a
flush timeout, so callers ask only after their flush succeeded).
"""

from __future__ import annotations

from orbitmq.broker.config import BrokerRole
from orbitmq.broker.handlers import BrokerState
from orbitmq.store.message_store import PutStatus

__all__ = ["replicated_status", "unreplicated_status", "waits_for_slave"]


def waits_for_slave(state: BrokerState, *, wait: bool = True) -> bool:
    """Whether :func:`replicated_status` waits for a slave: on a SYNC_MASTER, for a producer that waits."""
    return wait and state.replication is not None and state.config.broker_role is BrokerRole.SYNC_MASTER


def unreplicated_status(state: BrokerState) -> PutStatus:
    """:func:`replicated_status` of a write that waits for no slave: the deposed check alone."""
    replicas = state.replicas
    if replicas is not None and replicas.write_refusal() is not None:
        return PutStatus.FLUSH_SLAVE_TIMEOUT
    return PutStatus.PUT_OK


async def replicated_status(state: BrokerState, end_offset: int, *, wait: bool = True) -> PutStatus:
    """PUT_OK when a write ending at ``end_offset`` may be acknowledged (see the module docstring).

    ``wait=False`` (a producer that does not wait for the store) skips the slave but not the
    deposed check.
    """
    status = PutStatus.PUT_OK
    replication = state.replication
    if replication is not None and waits_for_slave(state, wait=wait):
        status = await replication.wait_replicated(end_offset)
    if status is PutStatus.PUT_OK:
        status = unreplicated_status(state)
    return status
