"""An orderly clustering push consumer's broker locks on its queues (LOCK/UNLOCK_BATCH_MQ).

A queue is consumed in order by one member at a time: the member locks it on its broker before
pulling it (:func:`lock_new_queues`), renews its locks every ``lock_renew_interval_ms`` (the
broker expires them after 60 s: :func:`renew_locks`), and unlocks a queue it gives away or
at shutdown (:func:`unlock_queues_of`), so that the next owner need not wait for the expiry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from orbitmq.client._group_api import lock_queues, unlock_queues
from orbitmq.client._instance import ClientInstance
from orbitmq.client._process_queue import ProcessQueue
from orbitmq.errors import OrbitError
from orbitmq.model.message import MessageQueue

__all__ = ["LOCK_RETRY_DELAY_S", "lock_new_queues", "renew_locks", "unlock_queues_of"]

logger = logging.getLogger(__name__)

LOCK_RETRY_DELAY_S = 1.0
"""When a broker granted only some of the queues asked for, a rebalance asks again after this."""


async def lock_new_queues(
    instance: ClientInstance, group: str, queues: list[MessageQueue], retry: Callable[[], None]
) -> list[MessageQueue]:
    """The ``queues`` their brokers locked for this client; ``retry`` is called after
    :data:`LOCK_RETRY_DELAY_S` when some were not (another member still holds them: it unlocks
    once its consumption stops)."""
    locked: list[MessageQueue] = []
    for broker_name in sorted({mq.broker_name for mq in queues}):
        wanted = [mq for mq in queues if mq.broker_name == broker_name]
        granted = await lock_queues(instance, broker_name, group, instance.client_id, wanted)
        locked += [mq for mq in wanted if mq in granted]
    if len(locked) < len(queues):
        asyncio.get_running_loop().call_later(LOCK_RETRY_DELAY_S, retry)
    return locked


async def unlock_queues_of(instance: ClientInstance, group: str, queues: list[MessageQueue]) -> None:
    """UNLOCK_BATCH_MQ for ``queues``, broker by broker."""
    for broker_name in sorted({mq.broker_name for mq in queues}):
        wanted = [mq for mq in queues if mq.broker_name == broker_name]
        await unlock_queues(instance, broker_name, group, instance.client_id, wanted)


async def renew_locks(
    instance: ClientInstance,
    group: str,
    owned: Callable[[], Mapping[MessageQueue, ProcessQueue]],
    interval_s: float,
) -> None:
    """Forever: every ``interval_s`` lock again the queues ``owned()`` gives, and record in each
    process queue whether its lock is held, and since when."""
    while True:
        await asyncio.sleep(interval_s)
        queues = owned()
        for broker_name in sorted({mq.broker_name for mq in queues}):
            wanted = [mq for mq in queues if mq.broker_name == broker_name]
            try:
                granted = await lock_queues(instance, broker_name, group, instance.client_id, wanted)
            except OrbitError as exc:
                logger.info("lock renewal on %s for group %s failed: %s", broker_name, group, exc)
                continue
            now_owned = owned()  # a rebalance may have dropped some meanwhile
            for mq in wanted:
                pq = now_owned.get(mq)
                if pq is not None:
                    pq.locked = mq in granted
                    pq.last_lock_ms = int(time.time() * 1000)
